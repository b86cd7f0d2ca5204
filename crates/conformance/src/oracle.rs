//! The oracle: Argo Rollouts' own functions, linked at a given release into
//! `sluice-argo-oracle` (tools/argo-oracle), spoken to over a pipe, one JSON line each way.
//!
//! The binary is built and cached by `scripts/build-argo-oracle.sh`; `make test` builds it
//! before the tests, and a test run without it builds it on first use. `SLUICE_ARGO_ORACLE_<v>`
//! (dots as underscores, `SLUICE_ARGO_ORACLE_1_9_1`) names a binary to use instead.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use anyhow::{Context, bail};
use serde_json::Value;

/// The releases the oracle is built at: the one Sluice's takeover is tested against, and the
/// newest 1.10 release the machine's Go builds (1.10.2 asks for a newer Go than the project's).
pub const ARGO_VERSIONS: [&str; 2] = ["1.9.1", "1.10.1"];

/// One running oracle.
pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    version: String,
    asked: u64,
}

impl Oracle {
    /// Starts the oracle built at `argo_version`, building it first if it is not cached.
    pub fn start(argo_version: &str) -> anyhow::Result<Self> {
        let binary = binary(argo_version)?;
        let mut child = Command::new(&binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdin = child.stdin.take().context("the oracle's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the oracle's stdout")?);
        let mut oracle = Oracle {
            child,
            stdin,
            stdout,
            version: argo_version.to_string(),
            asked: 0,
        };
        let answer = oracle.ask(&serde_json::json!({"op": "version"}))?;
        let reported = answer["version"].as_str().unwrap_or_default();
        if !reported.starts_with(&format!("v{argo_version}")) {
            bail!("the oracle built for {argo_version} reports {answer}");
        }
        Ok(oracle)
    }

    /// The Argo release this oracle links.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// How many questions it has answered.
    pub fn asked(&self) -> u64 {
        self.asked
    }

    /// Asks one question. An answer with `panic` (Argo's code panicked on the input) or
    /// `decodeError` (Go could not read it) comes back as it is, for the caller to judge.
    pub fn ask(&mut self, request: &Value) -> anyhow::Result<Value> {
        let mut line = serde_json::to_vec(request)?;
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .and_then(|()| self.stdin.flush())
            .context("writing to the oracle")?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            bail!("the oracle ({}) exited", self.version);
        }
        self.asked += 1;
        serde_json::from_str(&answer).with_context(|| format!("reading the oracle's {answer:?}"))
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test binary's oracle for `argo_version`, started once and shared by its tests.
pub fn shared(argo_version: &str) -> MutexGuard<'static, Oracle> {
    static ORACLES: OnceLock<Vec<(String, Mutex<Oracle>)>> = OnceLock::new();
    let oracles = ORACLES.get_or_init(|| {
        ARGO_VERSIONS
            .iter()
            .map(|v| {
                let oracle = Oracle::start(v).unwrap_or_else(|e| panic!("oracle {v}: {e:#}"));
                (v.to_string(), Mutex::new(oracle))
            })
            .collect()
    });
    let (_, oracle) = oracles
        .iter()
        .find(|(v, _)| v == argo_version)
        .unwrap_or_else(|| panic!("no oracle for Argo {argo_version}; see ARGO_VERSIONS"));
    oracle
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn binary(argo_version: &str) -> anyhow::Result<PathBuf> {
    let variable = format!("SLUICE_ARGO_ORACLE_{}", argo_version.replace('.', "_"));
    if let Some(path) = std::env::var_os(&variable) {
        return Ok(PathBuf::from(path));
    }
    let root = repo_root();
    let script = root.join("scripts/build-argo-oracle.sh");
    let output = Command::new("bash")
        .arg(&script)
        .env("ARGO_VERSION", argo_version)
        .current_dir(&root)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "scripts/build-argo-oracle.sh failed for {argo_version} ({}); run it by hand to see why",
            output.status
        );
    }
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if !path.is_file() {
        bail!("scripts/build-argo-oracle.sh printed {path:?}, which is not a file");
    }
    Ok(path)
}

/// The repository's root (this crate is `crates/conformance`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}
