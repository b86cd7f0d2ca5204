//! The controller under test as its own process (its CPU and memory are read from /proc),
//! started with the flags of a production install and stopped with SIGTERM: Sluice's, or, to
//! measure beside it, Argo Rollouts' own (built from its Go module, as the round-trip tests
//! run it).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use sluice_testenv::harness::{ArgoController, TestEnv};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// Which controller a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    Sluice,
    /// Argo Rollouts 1.9.1's controller, at the same client rate limits.
    Argo,
}

impl Kind {
    /// The prefix of a run's workload label: `rollouts/plain` is Sluice's, `argo/plain` Argo's.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Sluice => "rollouts",
            Kind::Argo => "argo",
        }
    }

    /// The counter of the controller's API requests (labels `verb` and `kind`).
    pub fn requests_metric(self) -> &'static str {
        match self {
            Kind::Sluice => "sluice_k8s_requests_total",
            Kind::Argo => "controller_clientset_k8s_request_total",
        }
    }

    /// The histogram of its Rollout reconciles, in seconds.
    pub fn reconcile_metric(self) -> &'static str {
        match self {
            Kind::Sluice => "sluice_rollout_reconcile_seconds",
            Kind::Argo => "rollout_reconcile",
        }
    }
}

pub struct Controller {
    kind: Kind,
    process: Process,
    metrics_port: u16,
    healthz_port: u16,
}

enum Process {
    Sluice(Child),
    Argo(ArgoController),
}

/// The `sluice-controller` built beside this binary (`cargo build --release` builds both).
pub fn default_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("sluice-controller")))
        .unwrap_or_else(|| PathBuf::from("sluice-controller"))
}

impl Controller {
    /// Starts `binary` against `kubeconfig`, cluster-wide (or in `namespace` only), without
    /// leader election, at the given client rate limits; waits until it is ready (its caches
    /// have synced).
    pub async fn start(
        binary: &Path,
        kubeconfig: &Path,
        work_dir: &Path,
        (qps, burst): (u32, u32),
        namespace: Option<&str>,
        extra_args: &[String],
    ) -> anyhow::Result<Controller> {
        let ports_file = work_dir.join("controller-ports.json");
        let _ = std::fs::remove_file(&ports_file);
        let log = std::fs::File::create(work_dir.join("controller.log"))
            .context("creating the controller log")?;
        let child = Command::new(binary)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--leader-elect=false", "--loglevel", "warn"])
            .args(["--qps", &qps.to_string(), "--burst", &burst.to_string()])
            .args(["--healthzPort", "0", "--metricsPort", "0", "--ports-file"])
            .arg(&ports_file)
            .args(namespace.map_or(Vec::new(), |ns| vec!["--namespaced", "--namespace", ns]))
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| {
                format!(
                    "starting {} (build it with `cargo build --release -p sluice-controller`)",
                    binary.display()
                )
            })?;
        let mut controller = Controller {
            kind: Kind::Sluice,
            process: Process::Sluice(child),
            metrics_port: 0,
            healthz_port: 0,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Process::Sluice(child) = &mut controller.process
                && let Some(status) = child.try_wait()?
            {
                bail!(
                    "the controller exited at start ({status}); see {}",
                    work_dir.join("controller.log").display()
                );
            }
            if controller.healthz_port == 0
                && let Ok(text) = std::fs::read_to_string(&ports_file)
                && let Ok(ports) = serde_json::from_str::<serde_json::Value>(&text)
            {
                controller.metrics_port = ports["metrics"].as_u64().unwrap_or(0) as u16;
                controller.healthz_port = ports["healthz"].as_u64().unwrap_or(0) as u16;
            }
            if controller.healthz_port != 0
                && get(controller.healthz_port, "/readyz")
                    .await
                    .ok()
                    .as_deref()
                    == Some("ok")
            {
                return Ok(controller);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the controller was not ready within 60s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Argo Rollouts' controller watching `namespace`, waiting until its workers run. Its log
    /// stays at `info`, the level of Argo's install manifests (its start is known from an info
    /// line).
    pub async fn start_argo(
        env: &TestEnv,
        namespace: &str,
        (qps, burst): (u32, u32),
    ) -> anyhow::Result<Controller> {
        let (qps, burst) = (qps.to_string(), burst.to_string());
        let args = ["--qps", &qps, "--burst", &burst];
        let argo = ArgoController::start(env, namespace, &args).await?;
        Ok(Controller {
            kind: Kind::Argo,
            metrics_port: argo.metrics_port(),
            healthz_port: 0,
            process: Process::Argo(argo),
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn pid(&self) -> Option<u32> {
        match &self.process {
            Process::Sluice(child) => child.id(),
            Process::Argo(argo) => argo.pid(),
        }
    }

    /// The controller's `/metrics`.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        get(self.metrics_port, "/metrics").await
    }

    /// SIGTERM, then waits for the orderly exit (killing it after 30 s).
    pub async fn stop(self) -> anyhow::Result<()> {
        let mut child = match self.process {
            Process::Sluice(child) => child,
            Process::Argo(argo) => return argo.stop().await,
        };
        if let Some(pid) = child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => child.kill().await?,
        }
        Ok(())
    }
}

/// A plain HTTP/1.0 GET on loopback: the body, or an error for a status other than 200.
async fn get(port: u16, path: &str) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("a response without a body")?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        bail!("GET {path}: HTTP {status}");
    }
    Ok(body.to_string())
}
