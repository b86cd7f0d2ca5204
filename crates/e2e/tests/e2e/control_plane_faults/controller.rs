//! The `sluice-controller` binary as a process of the test, with its log in a file and its
//! `/metrics` read over HTTP: what an operator of a crashing or silent controller would have.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use sluice_e2e::process::controller_binary;

pub struct Controller {
    child: Child,
    log: PathBuf,
    metrics_port: u16,
}

impl Controller {
    /// Starts the controller on one namespace with `kubeconfig`, logging at info level into
    /// `dir/<name>.log`, and waits until its endpoints listen.
    pub async fn start(
        kubeconfig: &Path,
        namespace: &str,
        dir: &Path,
        name: &str,
    ) -> anyhow::Result<Controller> {
        let binary = controller_binary().await?;
        let log = dir.join(format!("{name}.log"));
        let ports = dir.join(format!("{name}.ports.json"));
        let out = std::fs::File::create(&log)
            .with_context(|| format!("creating the log {}", log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new(&binary)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespaced", "--namespace", namespace])
            .args([
                "--leader-elect=false",
                "--healthzPort",
                "0",
                "--metricsPort",
                "0",
            ])
            .arg("--ports-file")
            .arg(&ports)
            .args(["--rollout-resync", "30", "--loglevel", "info"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut controller = Controller {
            child,
            log,
            metrics_port: 0,
        };
        for _ in 0..300 {
            if let Ok(text) = std::fs::read_to_string(&ports) {
                let ports: serde_json::Value = serde_json::from_str(&text)?;
                controller.metrics_port = ports["metrics"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .context("no metrics port in the ports file")?;
                return Ok(controller);
            }
            if !controller.running() {
                bail!("the controller exited at start:\n{}", controller.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "the controller wrote no ports file in 30 s:\n{}",
            controller.log()
        )
    }

    /// Whether the process is still there (it never exits on its own while the test runs).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `sluice_k8s_requests_total` from `/metrics`, by (kind, verb, status code).
    pub async fn requests(&self) -> anyhow::Result<Requests> {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        let text = reqwest::get(&url)
            .await
            .with_context(|| format!("GET {url}"))?
            .text()
            .await?;
        Ok(Requests::parse(&text))
    }

    /// SIGTERM, and waits until it has exited (it steps down within seconds).
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..100 {
            if !self.running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        // std's kill is SIGKILL on Unix; a no-op once it has exited.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The controller's API requests so far: how many by (kind, verb, status code), and by verb how
/// many were timed and how many of those took 5 s or less.
#[derive(Clone, Debug, Default)]
pub struct Requests {
    counts: BTreeMap<(String, String, String), u64>,
    durations: BTreeMap<String, (u64, u64)>,
}

/// The value of label `name` in `k="v",k="v"`.
fn label(labels: &str, name: &str) -> String {
    labels
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
        .map(|v| v.trim_end_matches('"').to_string())
        .unwrap_or_default()
}

impl Requests {
    fn parse(text: &str) -> Requests {
        let mut out = Requests::default();
        for line in text.lines() {
            let Some((name, rest)) = line.split_once('{') else {
                continue;
            };
            let Some((labels, value)) = rest.split_once("} ") else {
                continue;
            };
            let value = value.trim().parse::<f64>().unwrap_or(0.0) as u64;
            match name {
                "sluice_k8s_requests_total" => {
                    let key = (
                        label(labels, "kind"),
                        label(labels, "verb"),
                        label(labels, "status_code"),
                    );
                    out.counts.insert(key, value);
                }
                "sluice_k8s_request_duration_seconds_count" => {
                    out.durations.entry(label(labels, "verb")).or_default().0 = value;
                }
                "sluice_k8s_request_duration_seconds_bucket" if label(labels, "le") == "5.0" => {
                    out.durations.entry(label(labels, "verb")).or_default().1 = value;
                }
                _ => {}
            }
        }
        out
    }

    /// Requests counted since `before` whose (verb, status code) `matches`.
    pub fn since(&self, before: &Requests, matches: impl Fn(&str, &str) -> bool) -> u64 {
        self.counts
            .iter()
            .filter(|((_, verb, status), _)| matches(verb, status))
            .map(|(key, n)| n - before.counts.get(key).copied().unwrap_or(0).min(*n))
            .sum()
    }

    /// Requests since `before` that took longer than 5 s.
    pub fn slow_since(&self, before: &Requests) -> u64 {
        let slow = |r: &Requests| -> u64 {
            r.durations
                .values()
                .map(|(all, quick)| all.saturating_sub(*quick))
                .sum()
        };
        slow(self).saturating_sub(slow(before))
    }

    /// The counts that changed since `before`, 200 and 201 aside, for the test's output.
    pub fn changes(&self, before: &Requests) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for ((kind, verb, status), n) in &self.counts {
            let key = (kind.clone(), verb.clone(), status.clone());
            let delta = n - before.counts.get(&key).copied().unwrap_or(0).min(*n);
            if delta > 0 && status != "200" && status != "201" {
                out.insert(format!("{verb} {kind} {status}"), delta);
            }
        }
        let slow = self.slow_since(before);
        if slow > 0 {
            out.insert("slower than 5 s".into(), slow);
        }
        out
    }
}
