//! `kubectl sluice dashboard` under the soak: the server as its own process (its memory is
//! read from /proc) with three tabs of headless Chromium kept open on it by
//! `crates/cli/dashboard-ui/tests/hold-tabs.mjs`, so that every change the soak makes goes
//! through the server's watches to live pages.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

pub struct Dashboard {
    server: Child,
    tabs: Child,
    tabs_log: PathBuf,
}

impl Dashboard {
    /// Serves `namespace` with `binary` on a free loopback port, read-only, and opens the
    /// tabs (two lists of the `expect` Rollouts, one page of `rollout`); returns once every
    /// row is drawn.
    pub async fn start(
        binary: &Path,
        kubeconfig: &Path,
        namespace: &str,
        rollout: &str,
        expect: usize,
        work_dir: &Path,
        ui_dir: &Path,
    ) -> anyhow::Result<Dashboard> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::fs::File::create(work_dir.join("dashboard.log"))?;
        let server = Command::new(binary)
            .args(["dashboard", "--read-only", "--port", &port.to_string()])
            .args(["-n", namespace, "--kubeconfig"])
            .arg(kubeconfig)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} dashboard", binary.display()))?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if tokio::time::Instant::now() > deadline {
                bail!("the dashboard did not listen on port {port} within 60s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let tabs_log = work_dir.join("dashboard-tabs.log");
        let log = std::fs::File::create(&tabs_log)?;
        let tabs = Command::new("node")
            .arg("tests/hold-tabs.mjs")
            .current_dir(ui_dir)
            .env("DASHBOARD_URL", format!("http://127.0.0.1:{port}"))
            .env("NAMESPACE", namespace)
            .env("ROLLOUT", rollout)
            .env("EXPECT", expect.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("starting node (the dashboard's tabs need node and chromium)")?;
        let mut dashboard = Dashboard {
            server,
            tabs,
            tabs_log,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        loop {
            if let Some(status) = dashboard.tabs.try_wait()? {
                bail!(
                    "the dashboard's tabs exited ({status}); see {}",
                    dashboard.tabs_log.display()
                );
            }
            let log = std::fs::read_to_string(&dashboard.tabs_log).unwrap_or_default();
            if log.lines().any(|l| l == "tabs open") {
                return Ok(dashboard);
            }
            if tokio::time::Instant::now() > deadline {
                bail!("the dashboard's tabs did not draw {expect} rows within 10 minutes");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    pub fn server_pid(&self) -> Option<u32> {
        self.server.id()
    }

    /// What the tabs reported since they opened (one line per check).
    pub fn tabs_report(&self) -> Vec<String> {
        std::fs::read_to_string(&self.tabs_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("minute "))
            .map(str::to_owned)
            .collect()
    }

    /// Closes the tabs, then stops the server.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        for child in [&mut self.tabs, &mut self.server] {
            if let Some(pid) = child.id() {
                let _ = std::process::Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
            }
            match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
                Ok(status) => {
                    status?;
                }
                Err(_) => child.kill().await?,
            }
        }
        Ok(())
    }
}
