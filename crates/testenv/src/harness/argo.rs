//! Argo Rollouts' own controller, run as a process against the local control plane, so that a
//! test can hand Rollouts from Argo to Sluice and back.
//!
//! The binary is `cmd/rollouts-controller` of Argo's Go module, built and cached by
//! `scripts/build-argo-rollouts.sh` (`make test` runs it before the tests, so its progress is
//! shown; a test run without it builds here, once per process), or the file named by
//! `SLUICE_ARGO_ROLLOUTS_BIN`.
//!
//! Argo runs with the admin kubeconfig and needs nothing else: without its `argo-rollouts-config`
//! ConfigMap and its notification ConfigMap and Secret it starts with its defaults (checked with
//! 1.9.1 and 1.10.1). The CRDs the harness installs (`manifests/crds`) carry every field of
//! Argo's own schema, so nothing Argo writes is pruned.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::sync::OnceCell;

use super::TestEnv;

/// Names the Argo Rollouts controller binary to run instead of building it.
pub const ARGO_BIN_ENV: &str = "SLUICE_ARGO_ROLLOUTS_BIN";

/// The line Argo logs once its informers have synced and its Rollout workers run.
const STARTED_LINE: &str = "Started rollout workers";

/// How long Argo may take to start (its caches sync in about a second on the local control
/// plane) and to stop after SIGTERM before it is killed.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

static BINARY: OnceCell<PathBuf> = OnceCell::const_new();

/// The newest Argo Rollouts 1.10 release that builds with the Go installed here, tested beside
/// 1.9.1 (1.10.2 needs a newer Go).
pub const ARGO_1_10: &str = "1.10.1";

/// Binaries of given releases, built once per test process.
static VERSIONED: std::sync::Mutex<Vec<(String, std::sync::Arc<OnceCell<PathBuf>>)>> =
    std::sync::Mutex::new(Vec::new());

/// The Argo Rollouts controller of release `version` (`1.10.1`), from the cached build of
/// `scripts/build-argo-rollouts.sh` (built first when not cached).
pub async fn argo_rollouts_binary_of(version: &str) -> anyhow::Result<PathBuf> {
    let cell = {
        let mut versions = VERSIONED
            .lock()
            .map_err(|_| anyhow::anyhow!("the Argo binaries' table was poisoned"))?;
        match versions.iter().find(|(v, _)| v == version) {
            Some((_, cell)) => cell.clone(),
            None => {
                let cell = std::sync::Arc::new(OnceCell::new());
                versions.push((version.to_string(), cell.clone()));
                cell
            }
        }
    };
    cell.get_or_try_init(|| async {
        let path =
            super::build_script::run_with("build-argo-rollouts.sh", &[("ARGO_VERSION", version)])
                .await?;
        if !path.is_file() {
            bail!(
                "scripts/build-argo-rollouts.sh printed {}, which is not a file",
                path.display()
            );
        }
        Ok(path)
    })
    .await
    .cloned()
}

/// The Argo Rollouts controller binary: `$SLUICE_ARGO_ROLLOUTS_BIN`, or the cached build of
/// `scripts/build-argo-rollouts.sh` (built first when not cached: several minutes, once).
pub async fn argo_rollouts_binary() -> anyhow::Result<PathBuf> {
    BINARY.get_or_try_init(find_or_build).await.cloned()
}

async fn find_or_build() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(ARGO_BIN_ENV) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("{ARGO_BIN_ENV}={} is not a file", path.display());
        }
        return Ok(path);
    }
    let path = super::build_script::run("build-argo-rollouts.sh").await?;
    if !path.is_file() {
        bail!(
            "scripts/build-argo-rollouts.sh printed {}, which is not a file",
            path.display()
        );
    }
    Ok(path)
}

/// An Argo Rollouts controller process watching one namespace, with the admin kubeconfig,
/// without leader election, its health and metrics servers on free ports and its log in
/// `.dev/logs/argo-rollouts-<namespace>-<n>.log`. Stopped (SIGTERM, then SIGKILL after 10 s)
/// by [`ArgoController::stop`] or when dropped.
pub struct ArgoController {
    child: Option<Child>,
    log: PathBuf,
    metrics_port: u16,
}

impl ArgoController {
    /// Starts Argo for `namespace` and waits until its workers run.
    ///
    /// `extra_args` go after the harness's own flags (a later flag wins), e.g.
    /// `["--rollout-resync", "5"]`.
    pub async fn start(
        env: &TestEnv,
        namespace: &str,
        extra_args: &[&str],
    ) -> anyhow::Result<ArgoController> {
        let mut argo = ArgoController::spawn(env, namespace, extra_args).await?;
        argo.wait_started(START_TIMEOUT).await?;
        Ok(argo)
    }

    /// Starts Argo for `namespace` without waiting for it: with `--leader-elect` it runs its
    /// workers only once it holds its Lease (`argo-rollouts-controller-lock` in `namespace`);
    /// see [`ArgoController::workers_running`] and [`ArgoController::wait_started`].
    pub async fn spawn(
        env: &TestEnv,
        namespace: &str,
        extra_args: &[&str],
    ) -> anyhow::Result<ArgoController> {
        let binary = argo_rollouts_binary().await?;
        Self::spawn_binary(env, namespace, extra_args, binary)
    }

    /// [`ArgoController::spawn`] with Argo's release `version` (see [`argo_rollouts_binary_of`]).
    pub async fn spawn_version(
        env: &TestEnv,
        namespace: &str,
        extra_args: &[&str],
        version: &str,
    ) -> anyhow::Result<ArgoController> {
        let binary = argo_rollouts_binary_of(version).await?;
        Self::spawn_binary(env, namespace, extra_args, binary)
    }

    /// [`ArgoController::start`] with Argo's release `version`.
    pub async fn start_version(
        env: &TestEnv,
        namespace: &str,
        extra_args: &[&str],
        version: &str,
    ) -> anyhow::Result<ArgoController> {
        let mut argo = ArgoController::spawn_version(env, namespace, extra_args, version).await?;
        argo.wait_started(START_TIMEOUT).await?;
        Ok(argo)
    }

    fn spawn_binary(
        env: &TestEnv,
        namespace: &str,
        extra_args: &[&str],
        binary: PathBuf,
    ) -> anyhow::Result<ArgoController> {
        let logs = env.repo_root().join(".dev/logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let log = (1..)
            .map(|n| logs.join(format!("argo-rollouts-{namespace}-{n}.log")))
            .find(|path| !path.exists())
            .unwrap_or_else(|| logs.join(format!("argo-rollouts-{namespace}.log")));
        let out = std::fs::File::create(&log)
            .with_context(|| format!("creating the log {}", log.display()))?;
        let err = out.try_clone()?;
        let metrics_port = free_port()?;
        let healthz_port = free_port()?;
        let child = Command::new(&binary)
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            // The namespace to watch is the client config's namespace (`--namespace`).
            .args(["--namespaced", "--namespace", namespace])
            .arg("--leader-elect=false")
            .args(["--metricsPort", &metrics_port.to_string()])
            .args(["--healthzPort", &healthz_port.to_string()])
            .args(["--loglevel", "info"])
            .args(extra_args)
            // Where Argo looks for its notification ConfigMap and Secret (and would take its
            // lease): the test's namespace rather than `argo-rollouts`.
            .env("POD_NAMESPACE", namespace)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(ArgoController {
            child: Some(child),
            log,
            metrics_port,
        })
    }

    /// Whether Argo's Rollout workers run (with leader election: whether it has led).
    pub fn workers_running(&self) -> bool {
        self.log().contains(STARTED_LINE)
    }

    /// Waits at most `timeout` until Argo's Rollout workers run; fails at once if Argo exits.
    pub async fn wait_started(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.workers_running() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "Argo Rollouts exited ({status}) before starting; log {}:\n{}",
                    self.log.display(),
                    self.log_tail(40)
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "Argo Rollouts did not log {STARTED_LINE:?} within {timeout:?}; log {}:\n{}",
                    self.log.display(),
                    self.log_tail(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The controller's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Everything the controller has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// The version Argo says it is at start (`v1.9.1`), from its log.
    pub fn version(&self) -> Option<String> {
        started_version(&self.log())
    }

    /// Whether Argo is idle on the Rollout `namespace/name` as it is at `resource_version`: the
    /// last reconcile of it Argo logged started from that version and has completed.
    ///
    /// Act on a Rollout under Argo (promote, change its spec) only once it is idle: Argo writes
    /// the result of its own status patch back into its cache when a reconcile ends, and a
    /// change that reached the cache during that reconcile is overwritten by the older object,
    /// so Argo never sees it (until the object changes again or Argo restarts).
    pub fn idle_at(&self, namespace: &str, name: &str, resource_version: &str) -> bool {
        last_reconcile(&self.log(), namespace, name)
            .is_some_and(|(completed, version)| completed && version == resource_version)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The port of Argo's `/metrics` on 127.0.0.1.
    pub fn metrics_port(&self) -> u16 {
        self.metrics_port
    }

    /// Stops the controller: SIGTERM, and SIGKILL if it has not exited 10 s later. Returns
    /// once the process is gone.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        terminate(&child);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while child.try_wait()?.is_none() {
            if Instant::now() >= deadline {
                child.kill().ok();
                child.wait()?;
                bail!(
                    "Argo Rollouts was still running {STOP_TIMEOUT:?} after SIGTERM and was \
                     killed; log {}",
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

impl Drop for ArgoController {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        terminate(&child);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while matches!(child.try_wait(), Ok(None)) {
            if Instant::now() >= deadline {
                child.kill().ok();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait().ok();
        if std::thread::panicking() {
            eprintln!(
                "\n===== Argo Rollouts log {} (last 60 lines) =====\n{}",
                self.log.display(),
                self.log_tail(60)
            );
        }
    }
}

/// The `version` field of Argo's first log line, "Argo Rollouts controller starting".
fn started_version(log: &str) -> Option<String> {
    let line = log
        .lines()
        .find(|l| l.contains(r#"msg="Argo Rollouts controller starting""#))?;
    let version = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("version="))?;
    Some(version.to_string())
}

/// The last reconcile of `namespace/name` in Argo's log: whether it has completed, and the
/// resourceVersion it started from.
fn last_reconcile(log: &str, namespace: &str, name: &str) -> Option<(bool, String)> {
    let (ns_field, name_field) = (format!("namespace={namespace}"), format!("rollout={name}"));
    log.lines().rev().find_map(|line| {
        let completed = if line.contains(r#"msg="Reconciliation completed""#) {
            true
        } else if line.contains(r#"msg="Started syncing rollout""#) {
            false
        } else {
            return None;
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !fields.contains(&ns_field.as_str()) || !fields.contains(&name_field.as_str()) {
            return None;
        }
        let version = fields
            .iter()
            .find_map(|f| f.strip_prefix("resourceVersion="))?;
        Some((completed, version.to_string()))
    })
}

/// SIGTERM, through kill(1): the crate forbids unsafe code, and std only sends SIGKILL.
fn terminate(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A port nothing listens on right now (Argo binds its servers on all interfaces).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("0.0.0.0:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// The last `lines` lines of a file, reading at most its last 64 KiB.
fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(64 * 1024);
    let mut text = String::new();
    if file.seek(SeekFrom::Start(start)).is_err() {
        return text;
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return text;
    }
    text = String::from_utf8_lossy(&bytes).into_owned();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_reconcile_of_a_rollout_is_read_from_the_log() {
        let log = r#"time="t" level=info msg="Started syncing rollout" generation=1 namespace=ns resourceVersion=10 rollout=web
time="t" level=info msg="Reconciliation completed" generation=1 namespace=ns resourceVersion=10 rollout=web time_ms=3.2
time="t" level=info msg="Started syncing rollout" generation=1 namespace=ns resourceVersion=12 rollout=web-2
time="t" level=info msg="Started syncing rollout" generation=1 namespace=other resourceVersion=13 rollout=web
time="t" level=info msg="persisted to informer" generation=1 namespace=ns resourceVersion=14 rollout=web
"#;
        assert_eq!(last_reconcile(log, "ns", "web"), Some((true, "10".into())));
        assert_eq!(
            last_reconcile(log, "ns", "web-2"),
            Some((false, "12".into()))
        );
        assert_eq!(
            last_reconcile(log, "other", "web"),
            Some((false, "13".into()))
        );
        assert_eq!(last_reconcile(log, "ns", "api"), None);
    }

    #[test]
    fn the_version_is_read_from_the_first_line() {
        let log = r#"time="t" level=info msg="Argo Rollouts controller starting" healthzPort=1 instanceID= metricsPort=2 namespace=ns version=v1.9.1
time="t" level=info msg="Creating event broadcaster"
"#;
        assert_eq!(started_version(log).as_deref(), Some("v1.9.1"));
        assert_eq!(started_version("starting\n"), None);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = std::env::temp_dir().join(format!("sluice-argo-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let text: String = (1..=100).map(|n| format!("line {n}\n")).collect();
        std::fs::write(&path, text).unwrap();
        assert_eq!(tail(&path, 3), "line 98\nline 99\nline 100");
        assert_eq!(tail(&path, 1000).lines().count(), 100);
        assert_eq!(tail(&dir.join("missing"), 3), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
