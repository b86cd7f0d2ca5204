//! The Sluice controller as an OS process, the `sluice-controller` binary, for scenarios that
//! kill it with SIGKILL: nothing of it runs on after the kill, not even a task the runtime
//! would finish, as in a crashed pod.
//!
//! The binary is `$SLUICE_CONTROLLER_BIN`, or the workspace's debug build, brought up to date
//! once per test process with `cargo build -p sluice-controller --bin sluice-controller`
//! (a no-op when `cargo test --workspace` built it). Its log goes to
//! `.dev/logs/sluice-<namespace>-<n>.log`. [`cli_binary`] brings `kubectl-sluice` up to date
//! the same way.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Context as _, bail};
use sluice_testenv::harness::TestEnv;
use tokio::sync::OnceCell;

/// Names the controller binary to run instead of building it (`make test` sets it to the one
/// its build of the tests made).
pub const CONTROLLER_BIN_ENV: &str = "SLUICE_CONTROLLER_BIN";
/// Names the `kubectl-sluice` binary to run instead of building it.
pub const CLI_BIN_ENV: &str = "SLUICE_CLI_BIN";

static BINARY: OnceCell<PathBuf> = OnceCell::const_new();
static CLI: OnceCell<PathBuf> = OnceCell::const_new();

/// The controller binary, built first when needed.
pub async fn controller_binary() -> anyhow::Result<PathBuf> {
    BINARY
        .get_or_try_init(|| async {
            named_or_built(CONTROLLER_BIN_ENV, "sluice-controller", "sluice-controller").await
        })
        .await
        .cloned()
}

/// The `kubectl-sluice` binary, built first when needed.
pub async fn cli_binary() -> anyhow::Result<PathBuf> {
    CLI.get_or_try_init(|| named_or_built(CLI_BIN_ENV, "kubectl-sluice", "kubectl-sluice"))
        .await
        .cloned()
}

/// The binary the variable `env` names, or else `bin` of `package`, built.
async fn named_or_built(
    env: &str,
    package: &'static str,
    bin: &'static str,
) -> anyhow::Result<PathBuf> {
    match std::env::var_os(env) {
        Some(path) => Ok(PathBuf::from(path)),
        None => workspace_binary(package, bin).await,
    }
}

/// `bin` of the workspace's `package`, debug build, brought up to date with `cargo build`.
async fn workspace_binary(package: &'static str, bin: &'static str) -> anyhow::Result<PathBuf> {
    let root = sluice_testenv::harness::repo_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let status = tokio::task::spawn_blocking(move || {
        // Without the test's own package variables, or ring and all above it would rebuild.
        sluice_testenv::cargo::command()
            .args(["build", "-q", "-p", package, "--bin", bin])
            .current_dir(&root)
            .stdin(Stdio::null())
            .status()
    })
    .await
    .context("waiting for cargo build")?
    .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build -p {package} failed ({status})");
    }
    let path = target.join("debug").join(bin);
    if !path.is_file() {
        bail!("{} is not a file after cargo build", path.display());
    }
    Ok(path)
}

/// A `sluice-controller` process; killed (SIGKILL) by [`ControllerProcess::kill`] or when
/// dropped.
pub struct ControllerProcess {
    child: Option<Child>,
    log: PathBuf,
}

impl ControllerProcess {
    /// Starts the controller with the admin kubeconfig, no leader election, health and metrics
    /// on free ports, then `args` (for instance `--namespaced --namespace <ns>`), with the
    /// environment `env` (`POD_NAMESPACE`, ...).
    pub async fn start(
        test_env: &TestEnv,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<ControllerProcess> {
        Self::start_with(test_env, test_env.kubeconfig_path(), name, args, env).await
    }

    /// As [`ControllerProcess::start`], talking to the API server with `kubeconfig` (a fault
    /// proxy's, say).
    pub async fn start_with(
        test_env: &TestEnv,
        kubeconfig: &std::path::Path,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<ControllerProcess> {
        let binary = controller_binary().await?;
        let logs = test_env.repo_root().join(".dev/logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let log = (1..)
            .map(|n| logs.join(format!("sluice-{name}-{n}.log")))
            .find(|path| !path.exists())
            .unwrap_or_else(|| logs.join(format!("sluice-{name}.log")));
        let out = std::fs::File::create(&log)
            .with_context(|| format!("creating the log {}", log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new(&binary)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--leader-elect=false",
                "--healthzPort",
                "0",
                "--metricsPort",
                "0",
            ])
            .args(["--loglevel", "info"])
            // Tests wait less with a short resync; one that gives its own keeps it.
            .args(if args.contains(&"--rollout-resync") {
                &[][..]
            } else {
                &["--rollout-resync", "30"][..]
            })
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(ControllerProcess {
            child: Some(child),
            log,
        })
    }

    /// The process id, while it has not been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The signal that ended the process, once it has ended (`None` while it runs, or when it
    /// exited by itself).
    pub fn ended_by_signal(&mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt as _;
        let status = self.child.as_mut()?.try_wait().ok()??;
        status.signal()
    }

    /// Kills the process with SIGKILL and returns once it is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // std's kill is SIGKILL on Unix.
            child.kill().ok();
            child.wait().ok();
        }
    }

    /// Everything the process has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
