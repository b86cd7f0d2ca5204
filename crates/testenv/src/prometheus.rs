//! A real Prometheus server (Debian's `prometheus` package) for analysis tests: started on a
//! free loopback port with a throw-away data directory, scraping the targets a test names every
//! second. Stopped (and its data removed) when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::loopback::{encode, free_port};

/// Where Debian installs the server; `SLUICE_PROMETHEUS` overrides.
const DEFAULT_BINARY: &str = "/usr/bin/prometheus";

pub struct Prometheus {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port`, path `/metrics`) every second, and
    /// waits until it is ready.
    pub async fn start(targets: &[String]) -> anyhow::Result<Prometheus> {
        let binary = std::env::var("SLUICE_PROMETHEUS").unwrap_or_else(|_| DEFAULT_BINARY.into());
        if !std::path::Path::new(&binary).exists() {
            bail!(
                "{binary} not found: install Debian's `prometheus` package (scripts/install-test-tools.sh does)"
            );
        }
        let port = free_port()?;
        let dir =
            std::env::temp_dir().join(format!("sluice-prometheus-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n- job_name: test\n  static_configs:\n  - targets: [{}]\n",
            targets.join(", ")
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        let mut prom = Prometheus { child, dir, port };
        for _ in 0..150 {
            if let Some(status) = prom.child.try_wait()? {
                bail!(
                    "prometheus exited ({status}): {}",
                    std::fs::read_to_string(prom.dir.join("prometheus.log")).unwrap_or_default()
                );
            }
            if is_ok(port, "/-/ready").await.unwrap_or(false) {
                return Ok(prom);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("prometheus on port {port} did not become ready in 30 s")
    }

    /// `http://127.0.0.1:<port>`, the address an analysis template names.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits until an instant query for `query` returns at least one sample (the first
    /// scrapes have landed).
    pub async fn wait_for_series(&self, query: &str, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let path = format!("/api/v1/query?query={}", encode(query));
        loop {
            let body = get_body(self.port, &path).await.unwrap_or_default();
            if body.contains("\"result\":[{") {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("no samples for {query:?} after {timeout:?}: {body}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// A minimal HTTP/1.0 GET on loopback (no client library needed for two probes).
async fn get_body(port: u16, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    let mut out = String::new();
    stream.read_to_string(&mut out).await?;
    Ok(out)
}

async fn is_ok(port: u16, path: &str) -> anyhow::Result<bool> {
    let body = get_body(port, path).await?;
    Ok(body.starts_with("HTTP/1.0 200") || body.starts_with("HTTP/1.1 200"))
}
