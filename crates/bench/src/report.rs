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
    /// Further arguments Sluice's controller ran with (`--controller-arg`).
    pub controller_args: Vec<String>,
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
        if !self.controller_args.is_empty() {
            let _ = writeln!(
                out,
                "Sluice's controller ran with `{}`.\n",
                self.controller_args.join(" ")
            );
        }
        let _ = writeln!(
            out,
            "| workload | phase | wall s | CPU s: controller / apiserver / etcd / KCM / kubelet | \
             ms CPU per object: controller / control plane / all | API requests per object: all / controller | \
             Rollout writes per object | new RS ms p50 / p99 / max | settled ms p50 / p99 / max | \
             reconciles per object, ms p50 / p99 | controller MiB: RSS peak / RSS end / live heap end |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
        for p in &self.phases {
            let cpu = |name: &str| opt(p.cpu.per_process.get(name).copied(), 1);
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} / {} / {} / {} / {} | {} / {:.1} / {:.1} | {:.1} / {} | {} | {} | {} | {}, {} / {} | {} / {} / {} |",
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
                p.new_replica_set_ms.figures(),
                p.settled_ms.figures(),
                opt(
                    (p.reconcile_ms.count > 0)
                        .then(|| p.reconcile_ms.count as f64 / p.objects.max(1) as f64),
                    1
                ),
                opt(p.reconcile_ms.p50, 2),
                opt(p.reconcile_ms.p99, 2),
                opt(p.controller_rss_peak_mib, 1),
                opt(p.controller_rss_end_mib, 1),
                opt(p.controller_heap_end_mib, 1),
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

    /// The update of plain Rollouts under Sluice beside Argo's controller and Deployments,
    /// each where the run has it: what a user waits and what it costs.
    fn comparison(&self) -> Option<String> {
        let find = |workload: &str, phase: &str| {
            self.phases
                .iter()
                .find(|p| p.workload == workload && p.phase == phase)
        };
        let mut out = String::new();
        for phase in ["create", "update"] {
            let columns: Vec<(&str, &PhaseResult)> = [
                ("Sluice", "rollouts/plain"),
                ("Argo 1.9.1", "argo/plain"),
                ("Deployments", "deployments"),
            ]
            .into_iter()
            .filter_map(|(name, workload)| Some((name, find(workload, phase)?)))
            .collect();
            if columns.len() < 2 || columns[0].0 != "Sluice" {
                continue;
            }
            let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
            let _ = writeln!(
                out,
                "| {phase} of {} objects (plain canary) | {} |",
                columns[0].1.objects,
                names.join(" | ")
            );
            let _ = writeln!(out, "|---|{}", "---|".repeat(columns.len()));
            let mut row = |what: &str, cell: &dyn Fn(&PhaseResult) -> String| {
                let cells: Vec<String> = columns.iter().map(|(_, p)| cell(p)).collect();
                let _ = writeln!(out, "| {what} | {} |", cells.join(" | "));
            };
            row(
                "new ReplicaSet after the change, ms p50 / p99 / max",
                &|p| p.new_replica_set_ms.figures(),
            );
            row(
                "its pods all available after the change, ms p50 / p99 / max",
                &|p| p.new_replica_set_available_ms.figures(),
            );
            row("settled after the change, ms p50 / p99 / max", &|p| {
                p.settled_ms.figures()
            });
            row(
                "where each wait went: new ReplicaSet to its pods available, ms p50 / p99 / max",
                &|p| p.pods_ms.figures(),
            );
            row(
                "  the pods: new ReplicaSet to its first pod, ms p50 / p99 / max",
                &|p| p.pod_created_ms.figures(),
            );
            row("  the pods: first pod to Ready, ms p50 / p99 / max", &|p| {
                p.pod_ready_ms.figures()
            });
            row(
                "  the pods: pod Ready to the ReplicaSet counting it, ms p50 / p99 / max",
                &|p| p.pod_reported_ms.figures(),
            );
            row(
                "where each wait went: pods available to settled, ms p50 / p99 / max",
                &|p| p.finish_ms.figures(),
            );
            if columns.iter().any(|(_, p)| p.apply_seconds.is_some()) {
                row("one kubectl apply of every object, s", &|p| {
                    opt(p.apply_seconds, 1)
                });
                row("every object settled after the apply's end, s", &|p| {
                    opt(p.settled_after_apply_seconds, 1)
                });
            }
            row("wall time, s", &|p| format!("{:.1}", p.wall_seconds));
            row("CPU of all control-plane processes, s", &|p| {
                format!("{:.1}", p.cpu.control_plane)
            });
            row("of which kube-apiserver, s", &|p| {
                opt(p.cpu.per_process.get("kube-apiserver").copied(), 1)
            });
            row("CPU of the controller, s", &|p| {
                opt(p.cpu.per_process.get(crate::procs::CONTROLLER).copied(), 1)
            });
            row("API requests per object, all clients", &|p| {
                format!("{:.1}", p.apiserver_requests_per_object)
            });
            row("controller RSS at the end, MiB", &|p| {
                opt(p.controller_rss_end_mib, 1)
            });
            row("of which live heap, MiB", &|p| {
                opt(p.controller_heap_end_mib, 1)
            });
            out.push('\n');
        }
        (!out.is_empty()).then_some(out)
    }
}
