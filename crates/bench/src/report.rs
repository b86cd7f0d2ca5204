//! The result of a run as JSON (everything) and as a Markdown table (what docs/benchmarks.md
//! keeps), with the machine it ran on.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cli::CliTiming;
use crate::measure::{PhaseResult, opt};

/// The machine a run was made on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kubernetes: String,
}

impl Machine {
    pub fn describe(kubernetes: String) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<f64>().ok()
            })
            .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib,
            kubernetes,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub machine: Machine,
    pub started: String,
    pub objects: usize,
    pub qps: u32,
    pub burst: u32,
    /// The controller's RSS once its caches had synced, before any object existed.
    pub controller_idle_rss_mib: Option<f64>,
    pub phases: Vec<PhaseResult>,
    /// `kubectl sluice` read commands timed after each Rollout scenario.
    pub cli: Vec<CliTiming>,
}

impl Report {
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "{} objects of one replica each, {}; {} cores ({}), {:.0} GiB; controller and \
             kube-controller-manager at qps {} / burst {}. Controller RSS after its caches \
             synced, before any object: {} MiB.\n",
            self.objects,
            self.started,
            m.cores,
            m.cpu,
            m.memory_gib,
            self.qps,
            self.burst,
            opt(self.controller_idle_rss_mib, 1),
        );
        let _ = writeln!(
            out,
            "| workload | phase | wall s | CPU s: controller / apiserver / etcd / KCM / kubelet | \
             ms CPU per object: controller / control plane / all | API requests per object: all / controller | \
             Rollout writes per object | new RS ms p50 / p99 | reconciles per object, ms p50 / p99 | controller RSS MiB peak / end |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
        for p in &self.phases {
            let cpu = |name: &str| opt(p.cpu.per_process.get(name).copied(), 1);
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} / {} / {} / {} / {} | {} / {:.1} / {:.1} | {:.1} / {} | {} | {} / {} | {}, {} / {} | {} / {} |",
                p.workload,
                p.phase,
                p.wall_seconds,
                cpu(crate::procs::CONTROLLER),
                cpu("kube-apiserver"),
                cpu("etcd"),
                cpu("kube-controller-manager"),
                cpu("fake-kubelet"),
                opt(p.controller_ms_per_object, 2),
                p.control_plane_ms_per_object,
                p.all_ms_per_object,
                p.apiserver_requests_per_object,
                opt(p.controller_requests_per_object, 1),
                opt(p.rollout_writes_per_object, 2),
                opt(p.new_replica_set_ms.p50, 0),
                opt(p.new_replica_set_ms.p99, 0),
                opt(
                    (p.reconcile_ms.count > 0)
                        .then(|| p.reconcile_ms.count as f64 / p.objects.max(1) as f64),
                    1
                ),
                opt(p.reconcile_ms.p50, 2),
                opt(p.reconcile_ms.p99, 2),
                opt(p.controller_rss_peak_mib, 1),
                opt(p.controller_rss_end_mib, 1),
            );
        }
        if let Some(comparison) = self.comparison() {
            out.push('\n');
            out.push_str(&comparison);
        }
        if !self.cli.is_empty() {
            let _ = writeln!(
                out,
                "\n`kubectl sluice` against the {} Rollouts of the namespace, after their update \
                 (a new process each run, wall time from start to exit):\n",
                self.objects
            );
            let _ = writeln!(
                out,
                "| workload | command | ms median | ms min / max | runs |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|");
            for c in &self.cli {
                let _ = writeln!(
                    out,
                    "| {} | `{}` | {:.0} | {:.0} / {:.0} | {} |",
                    c.workload, c.command, c.median_ms, c.min_ms, c.max_ms, c.runs
                );
            }
        }
        out.push_str("\nAPI requests by verb and resource, per object, in the update phases:\n\n");
        for p in self.phases.iter().filter(|p| p.phase == "update") {
            let n = p.objects.max(1) as f64;
            let list: Vec<String> = p
                .apiserver_requests
                .iter()
                .filter(|(_, c)| **c as f64 / n >= 0.05)
                .map(|(k, c)| format!("{k} {:.2}", *c as f64 / n))
                .collect();
            let _ = writeln!(out, "- {} (API server): {}", p.workload, list.join(", "));
            if !p.controller_requests.is_empty() {
                let list: Vec<String> = p
                    .controller_requests
                    .iter()
                    .map(|(k, c)| format!("{k} {:.2}", *c as f64 / n))
                    .collect();
                let _ = writeln!(out, "- {} (controller): {}", p.workload, list.join(", "));
            }
        }
        out
    }

    /// Plain Rollouts against Deployments, update phase: the ratios the targets are set on.
    fn comparison(&self) -> Option<String> {
        let find = |workload: &str| {
            self.phases
                .iter()
                .find(|p| p.workload == workload && p.phase == "update")
        };
        let (ro, d) = (find("rollouts/plain")?, find("deployments")?);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        let cpu = |p: &PhaseResult, name: &str| p.cpu.per_process.get(name).copied().unwrap_or(0.0);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| update of {} objects | Rollouts (plain canary) | Deployments | ratio |",
            ro.objects
        );
        let _ = writeln!(out, "|---|---|---|---|");
        let _ = writeln!(
            out,
            "| CPU of all control-plane processes, s | {:.1} | {:.1} | {:.2}x |",
            ro.cpu.control_plane,
            d.cpu.control_plane,
            ratio(ro.cpu.control_plane, d.cpu.control_plane)
        );
        let _ = writeln!(
            out,
            "| CPU of the control plane and the controller, s | {:.1} | {:.1} | {:.2}x |",
            ro.cpu.all,
            d.cpu.all,
            ratio(ro.cpu.all, d.cpu.all)
        );
        let (ra, da) = (cpu(ro, "kube-apiserver"), cpu(d, "kube-apiserver"));
        let _ = writeln!(
            out,
            "| of which kube-apiserver, s | {ra:.1} | {da:.1} | {:.2}x |",
            ratio(ra, da)
        );
        let _ = writeln!(
            out,
            "| API requests per update, all clients | {:.1} | {:.1} | {:.2}x |",
            ro.apiserver_requests_per_object,
            d.apiserver_requests_per_object,
            ratio(
                ro.apiserver_requests_per_object,
                d.apiserver_requests_per_object
            )
        );
        let _ = writeln!(
            out,
            "| new ReplicaSet after the change, p50 / p99 ms | {} / {} | {} / {} | |",
            opt(ro.new_replica_set_ms.p50, 0),
            opt(ro.new_replica_set_ms.p99, 0),
            opt(d.new_replica_set_ms.p50, 0),
            opt(d.new_replica_set_ms.p99, 0),
        );
        let _ = writeln!(
            out,
            "| wall time of the update, s | {:.1} | {:.1} | {:.2}x |",
            ro.wall_seconds,
            d.wall_seconds,
            ratio(ro.wall_seconds, d.wall_seconds)
        );
        Some(out)
    }
}
