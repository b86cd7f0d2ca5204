//! CPU time and memory of the processes under test, read from /proc: the controller (a child
//! of the bench) and the control plane (whose pids `scripts/cluster-up.sh` records in
//! `.dev/pids/`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

/// The control-plane components whose CPU is reported, by their pid file's name.
pub const CONTROL_PLANE: [&str; 4] = [
    "kube-apiserver",
    "etcd",
    "kube-controller-manager",
    "fake-kubelet",
];

/// Name of the controller in [`Processes`].
pub const CONTROLLER: &str = "sluice-controller";

/// Clock ticks per second of /proc/<pid>/stat's times (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// User plus system CPU seconds of `pid` so far, or `None` once it is gone.
fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis
    // start at field 3, so utime and stime (fields 14 and 15) are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

/// Resident set size of `pid` in MiB, or `None` once it is gone.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The processes being measured, by name.
#[derive(Clone, Debug, Default)]
pub struct Processes {
    pids: BTreeMap<String, u32>,
    ticks: f64,
}

impl Processes {
    /// The control plane's processes from the pid files in `pid_dir` (those missing are left
    /// out: a cluster the bench did not start has none).
    pub fn control_plane(pid_dir: &Path) -> Processes {
        let mut pids = BTreeMap::new();
        for name in CONTROL_PLANE {
            let pid = std::fs::read_to_string(pid_dir.join(format!("{name}.pid")))
                .ok()
                .and_then(|s| s.trim().parse().ok());
            if let Some(pid) = pid {
                pids.insert(name.to_string(), pid);
            }
        }
        Processes {
            pids,
            ticks: clock_ticks(),
        }
    }

    /// These processes and the controller at `pid`.
    pub fn with_controller(&self, pid: Option<u32>) -> Processes {
        let mut more = self.clone();
        match pid {
            Some(pid) => more.pids.insert(CONTROLLER.to_string(), pid),
            None => more.pids.remove(CONTROLLER),
        };
        more
    }

    pub fn controller_pid(&self) -> Option<u32> {
        self.pids.get(CONTROLLER).copied()
    }

    /// CPU seconds so far of every process that is still alive.
    pub fn cpu(&self) -> BTreeMap<String, f64> {
        self.pids
            .iter()
            .filter_map(|(name, pid)| Some((name.clone(), cpu_seconds(*pid, self.ticks)?)))
            .collect()
    }
}

/// CPU seconds spent by each process between two readings.
pub fn cpu_between(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> CpuSpent {
    let per_process: BTreeMap<String, f64> = after
        .iter()
        .filter_map(|(name, end)| Some((name.clone(), end - before.get(name)?)))
        .collect();
    let control_plane = per_process
        .iter()
        .filter(|(name, _)| name.as_str() != CONTROLLER)
        .map(|(_, s)| s)
        .sum();
    CpuSpent {
        control_plane,
        all: per_process.values().sum(),
        per_process,
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CpuSpent {
    /// CPU seconds by process.
    pub per_process: BTreeMap<String, f64>,
    /// Of the control plane (API server, etcd, kube-controller-manager, fake kubelet).
    pub control_plane: f64,
    /// Of every process measured, the controller included.
    pub all: f64,
}

/// Samples a process's RSS in the background, keeping the peak and the samples.
#[derive(Clone)]
pub struct RssSampler {
    state: Arc<Mutex<RssState>>,
}

#[derive(Default)]
struct RssState {
    peak: f64,
    samples: Vec<(f64, f64)>,
}

impl RssSampler {
    /// Samples `pid` every `every` until the returned sampler is dropped by all holders and
    /// the process is gone.
    pub fn start(pid: u32, every: Duration) -> RssSampler {
        let sampler = RssSampler {
            state: Arc::default(),
        };
        let weak = Arc::downgrade(&sampler.state);
        let started = std::time::Instant::now();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                let Some(rss) = rss_mib(pid) else { return };
                let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
                state.peak = state.peak.max(rss);
                state.samples.push((started.elapsed().as_secs_f64(), rss));
            }
        });
        sampler
    }

    /// Starts a new measurement window: the peak so far is forgotten.
    pub fn reset_peak(&self, to: f64) {
        self.lock().peak = to;
    }

    pub fn peak(&self) -> f64 {
        self.lock().peak
    }

    /// (seconds since start, MiB) of every sample so far.
    pub fn samples(&self) -> Vec<(f64, f64)> {
        self.lock().samples.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RssState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time_and_memory() {
        let me = std::process::id();
        let ticks = clock_ticks();
        assert!(ticks > 0.0);
        let spent = cpu_seconds(me, ticks).expect("own stat");
        assert!(spent >= 0.0);
        assert!(rss_mib(me).expect("own status") > 0.0);
        assert_eq!(rss_mib(u32::MAX), None, "no such process");
    }

    #[test]
    fn cpu_between_splits_controller_and_control_plane() {
        let before = BTreeMap::from([
            ("etcd".to_string(), 1.0),
            (CONTROLLER.to_string(), 2.0),
            ("kube-apiserver".to_string(), 3.0),
        ]);
        let after = BTreeMap::from([
            ("etcd".to_string(), 1.5),
            (CONTROLLER.to_string(), 3.0),
            ("kube-apiserver".to_string(), 5.0),
        ]);
        let spent = cpu_between(&before, &after);
        assert_eq!(spent.per_process["kube-apiserver"], 2.0);
        assert_eq!(spent.control_plane, 2.5);
        assert_eq!(spent.all, 3.5);
    }
}
