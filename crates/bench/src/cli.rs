//! How long `kubectl sluice` takes against the benchmark's objects: after a scenario's update
//! (N Rollouts Healthy, each with its ReplicaSets and pod, the controller still running),
//! each read-only command is run as a user runs it, a new process each time, and timed from
//! start to exit.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;

/// Runs of each command; the median is what the report shows.
const RUNS: usize = 5;

/// One command's wall times.
#[derive(Clone, Debug, Serialize)]
pub struct CliTiming {
    pub workload: String,
    pub command: String,
    pub runs: usize,
    pub min_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
}

/// The `kubectl-sluice` built beside this binary (`make bench` builds it).
pub fn default_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("kubectl-sluice")))
        .unwrap_or_else(|| PathBuf::from("kubectl-sluice"))
}

/// Times `get rollout`, `status`, `explain` (of one Rollout in the middle of the namespace) and
/// `list rollouts` (of the whole namespace) in `namespace`.
pub async fn time_commands(
    binary: &Path,
    kubeconfig: &Path,
    workload: &str,
    namespace: &str,
    rollout: &str,
) -> anyhow::Result<Vec<CliTiming>> {
    let commands: [Vec<&str>; 4] = [
        vec!["get", "rollout", rollout],
        vec!["status", rollout, "--watch=false"],
        vec!["explain", rollout],
        vec!["list", "rollouts"],
    ];
    let mut out = Vec::new();
    for args in commands {
        let (binary, kubeconfig) = (binary.to_owned(), kubeconfig.to_owned());
        let namespace = namespace.to_owned();
        let owned: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let times =
            tokio::task::spawn_blocking(move || time_one(&binary, &kubeconfig, &namespace, &owned))
                .await??;
        let timing = summarize(workload, &args.join(" "), times);
        println!(
            "{workload}: kubectl sluice {}: median {:.0} ms (min {:.0}, max {:.0}, {} runs)",
            timing.command, timing.median_ms, timing.min_ms, timing.max_ms, timing.runs
        );
        out.push(timing);
    }
    Ok(out)
}

fn time_one(
    binary: &Path,
    kubeconfig: &Path,
    namespace: &str,
    args: &[String],
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        let output = Command::new(binary)
            .args(args)
            .args(["-n", namespace, "--kubeconfig"])
            .arg(kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .with_context(|| format!("running {}", binary.display()))?;
        let took = start.elapsed();
        if !output.status.success() {
            bail!(
                "kubectl sluice {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        times.push(took);
    }
    Ok(times)
}

fn summarize(workload: &str, command: &str, mut times: Vec<Duration>) -> CliTiming {
    times.sort();
    let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    CliTiming {
        workload: workload.to_owned(),
        command: command.to_owned(),
        runs: times.len(),
        min_ms: ms(times.first()),
        median_ms: ms(times.get(times.len() / 2)),
        max_ms: ms(times.last()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_the_runs_is_the_middle_one() {
        let t = summarize(
            "rollouts/plain",
            "list rollouts",
            [30, 10, 50, 20, 40]
                .into_iter()
                .map(Duration::from_millis)
                .collect(),
        );
        assert_eq!(
            (t.min_ms, t.median_ms, t.max_ms, t.runs),
            (10.0, 30.0, 50.0, 5)
        );
    }
}
