//! The soak: N Rollouts whose images change again and again for a long time, the
//! controller's RSS sampled every minute, and the slope of a least-squares line through the
//! samples: a leak shows as a slope that stays above zero however long the run. With
//! `--dashboard`, `kubectl sluice dashboard` serves the same namespace to three open tabs the
//! whole time, and its RSS is sampled and judged the same way.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::PostParams;
use serde::Serialize;
use sluice_api::Rollout;

use crate::dashboard::Dashboard;
use crate::procs::{RssSampler, rss_mib};
use crate::progress::{Changes, wait_all_done};
use crate::run::{Setup, change_images, delete_namespace, for_each_object};
use crate::soak_faults::{self, CYCLE, FaultKit, FaultRound, ReplicaSetCheck, open_sockets};
use crate::workload::{self, Scenario};

#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    pub objects: usize,
    pub minutes: f64,
    pub updates: u64,
    /// Rounds of image changes before the measured time (not counted in `updates`).
    pub warm_up_rounds: u32,
    /// (minute, MiB) of every sample.
    pub rss_samples: Vec<(f64, f64)>,
    /// Slope of RSS over the run, MiB per hour.
    pub slope_mib_per_hour: Option<f64>,
    /// The same over the second half only (after warm-up).
    pub second_half_slope_mib_per_hour: Option<f64>,
    /// The dashboard's memory, when it ran.
    pub dashboard: Option<DashboardSoak>,
    /// With faults: every measured round, its fault and how long its updates took.
    pub fault_rounds: Vec<FaultRound>,
    /// With faults: slope of the controller's open sockets over the rounds, per hour.
    pub sockets_slope_per_hour: Option<f64>,
    /// With faults: the namespace's ReplicaSets at the end.
    pub replica_sets: Option<ReplicaSetCheck>,
    /// With faults: the controller process was the one started at every round's end.
    pub controller_never_exited: Option<bool>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DashboardSoak {
    /// RSS of the server before the tabs opened, MiB.
    pub rss_before_tabs_mib: f64,
    /// (minute, MiB) of every sample, from the tabs' opening.
    pub rss_samples: Vec<(f64, f64)>,
    pub slope_mib_per_hour: Option<f64>,
    pub second_half_slope_mib_per_hour: Option<f64>,
    /// What the tabs showed at each of their checks.
    pub tabs: Vec<String>,
}

/// What the soak runs beside the controller.
pub struct SoakOptions {
    pub length: Duration,
    /// A rest after each round of image changes.
    pub rest: Duration,
    /// Rounds of image changes before the measured time starts and the dashboard opens.
    pub warm_up_rounds: u32,
    /// The kubectl-sluice whose dashboard serves the soak's namespace (none: no dashboard).
    pub dashboard: Option<std::path::PathBuf>,
    /// Each measured round meets the next fault of [`CYCLE`] (none: no faults).
    pub faults: Option<FaultKit>,
}

/// (min, max) of the samples' MiB.
fn range(samples: &[(f64, f64)]) -> (f64, f64) {
    samples.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), s| {
        (lo.min(s.1), hi.max(s.1))
    })
}

impl SoakReport {
    pub fn markdown(&self) -> String {
        let first = self.rss_samples.first().map_or(0.0, |s| s.1);
        let last = self.rss_samples.last().map_or(0.0, |s| s.1);
        let slope = |s: Option<f64>| s.map_or_else(|| "–".into(), |s| format!("{s:+.1}"));
        let mut text = format!(
            "Soak: {} Rollouts, {} rounds of image changes to warm up, then {:.0} minutes, {} image \
             changes. Controller RSS {:.1} MiB at the first sample, {:.1} MiB at the last; slope \
             {} MiB/hour over the run, {} MiB/hour over its second half.\n",
            self.objects,
            self.warm_up_rounds,
            self.minutes,
            self.updates,
            first,
            last,
            slope(self.slope_mib_per_hour),
            slope(self.second_half_slope_mib_per_hour),
        );
        if let Some(d) = &self.dashboard {
            let (lo, hi) = range(&d.rss_samples);
            let at = |s: Option<&(f64, f64)>| s.map_or(0.0, |s| s.1);
            text.push_str(&format!(
                "Dashboard (three tabs open the whole run): RSS {:.1} MiB before the tabs, {:.1} MiB \
                 at the first sample, {:.1} MiB at the last, {:.1} to {:.1} MiB over {} samples; \
                 slope {} MiB/hour over the run, {} MiB/hour over its second half.\n",
                d.rss_before_tabs_mib,
                at(d.rss_samples.first()),
                at(d.rss_samples.last()),
                lo,
                hi,
                d.rss_samples.len(),
                slope(d.slope_mib_per_hour),
                slope(d.second_half_slope_mib_per_hour),
            ));
            for line in &d.tabs {
                text.push_str(&format!("- tabs at {line}\n"));
            }
        }
        if !self.fault_rounds.is_empty() {
            text.push_str(&self.faults_markdown());
        }
        text
    }

    /// The rounds under faults: per fault, how often and how long its updates took; the
    /// sockets' slope; the checks at the end.
    fn faults_markdown(&self) -> String {
        let mut text = String::from(
            "\n| fault | rounds | every update finished after, s (median / max) |\n|---|---|---|\n",
        );
        for fault in CYCLE {
            let mut seconds: Vec<f64> = self
                .fault_rounds
                .iter()
                .filter(|r| r.fault == fault)
                .map(|r| r.seconds_to_settle)
                .collect();
            if seconds.is_empty() {
                continue;
            }
            seconds.sort_by(f64::total_cmp);
            text.push_str(&format!(
                "| {} | {} | {:.0} / {:.0} |\n",
                fault.describe(),
                seconds.len(),
                seconds[(seconds.len() - 1) / 2],
                seconds[seconds.len() - 1]
            ));
        }
        let sockets: Vec<usize> = self.fault_rounds.iter().map(|r| r.sockets).collect();
        text.push_str(&format!(
            "\nController sockets open after each round: {} to {}, slope {} per hour. The \
             controller process {}.\n",
            sockets.iter().min().unwrap_or(&0),
            sockets.iter().max().unwrap_or(&0),
            self.sockets_slope_per_hour
                .map_or_else(|| "–".into(), |s| format!("{s:+.1}")),
            if self.controller_never_exited == Some(true) {
                "was the one started at every round's end"
            } else {
                "EXITED during the soak"
            },
        ));
        if let Some(check) = &self.replica_sets {
            text.push_str(&format!(
                "ReplicaSets at the end: {} of {} Rollouts; {}\n",
                check.replica_sets,
                check.rollouts,
                if check.violations.is_empty() {
                    "one per template, labels and revision annotations kept, only the stable one \
                     with pods"
                        .to_string()
                } else {
                    format!("VIOLATIONS: {}", check.violations.join("; "))
                }
            ));
        }
        text
    }
}

/// Least-squares slope of `points` (x, y); `None` for fewer than two distinct x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    Some(sxy / sxx)
}

/// Runs the soak for `options.length`, one round of image changes after another.
pub async fn soak(setup: &Setup, options: SoakOptions) -> anyhow::Result<SoakReport> {
    let length = options.length;
    let ns = "sluice-bench-soak";
    let scenario = Scenario::Plain;
    // Before anything is created: a missing browser part fails the soak now, not after the
    // warm-up.
    let ui_dir = sluice_testenv::browser::ui_dir();
    if options.dashboard.is_some() {
        sluice_testenv::browser::ensure_node_modules(&ui_dir).await?;
    }
    delete_namespace(&setup.client, ns).await?;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(setup.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    // Only the soak's namespace: other work on the same cluster (tests) is left alone.
    let (controller, _rss) = setup.start_controller_in(Some(ns)).await?;
    let pid = controller.pid().unwrap_or_default();
    let rollouts: Api<Rollout> = Api::namespaced(setup.client.clone(), ns);
    let services: Api<Service> = Api::namespaced(setup.client.clone(), ns);
    let n = setup.objects;
    for_each_object(n, |name| {
        let (rollouts, services) = (rollouts.clone(), services.clone());
        async move {
            for svc in workload::services(scenario, &name) {
                let svc: Service = serde_json::from_value(svc)?;
                services.create(&PostParams::default(), &svc).await?;
            }
            rollouts
                .create(&PostParams::default(), &workload::rollout(scenario, &name)?)
                .await?;
            Ok(())
        }
    })
    .await?;
    let unmarked = Changes::default();
    wait_all_done(
        rollouts.clone(),
        n,
        "Healthy",
        setup.phase_timeout,
        &unmarked,
        |ro| workload::rollout_done(ro, scenario, 1),
    )
    .await?;

    // The warm-up: the history of ReplicaSets grows to its limit before anything is measured.
    let mut revision = 1;
    for _ in 0..options.warm_up_rounds {
        revision += 1;
        round(setup, &rollouts, n, revision, None).await?;
        println!(
            "soak: warm-up round {} of {} done",
            revision - 1,
            options.warm_up_rounds
        );
    }

    let dashboard = match &options.dashboard {
        Some(binary) => {
            let watched = workload::workload_name(n / 2);
            let dashboard = Dashboard::start(
                binary,
                &setup.kubeconfig,
                ns,
                &watched,
                n,
                &setup.work_dir,
                &ui_dir,
            )
            .await?;
            println!("soak: the dashboard's three tabs are open on {ns} (one on {watched})");
            Some(dashboard)
        }
        None => None,
    };
    let dashboard_rss = dashboard
        .as_ref()
        .and_then(Dashboard::server_pid)
        .map(|pid| {
            (
                rss_mib(pid).unwrap_or(0.0),
                RssSampler::start(pid, Duration::from_secs(60)),
            )
        });

    let started = Instant::now();
    let minutes = RssSampler::start(pid, Duration::from_secs(60));
    let mut updates = 0;
    let mut fault_rounds = Vec::new();
    let mut alive = true;
    while started.elapsed() < length {
        revision += 1;
        let fault = options.faults.as_ref().map(|kit| {
            let fault = CYCLE[fault_rounds.len() % CYCLE.len()];
            println!("soak: round {} meets: {}", revision - 1, fault.describe());
            (kit, fault)
        });
        let (seconds, injected) = round(setup, &rollouts, n, revision, fault).await?;
        updates += n as u64;
        if let Some((_, fault)) = fault {
            let rss = rss_mib(pid);
            alive &= rss.is_some();
            let sockets = open_sockets(pid).unwrap_or(0);
            println!(
                "soak: after {}: every update finished in {seconds:.0} s ({injected}); {sockets} \
                 sockets open",
                fault.describe()
            );
            fault_rounds.push(FaultRound {
                round: revision - 1,
                minute: started.elapsed().as_secs_f64() / 60.0,
                fault,
                injected,
                seconds_to_settle: seconds,
                rss_mib: rss.unwrap_or(0.0),
                sockets,
            });
        }
        println!(
            "soak: round {} done at minute {:.1}, RSS {:.1} MiB{}",
            revision - 1,
            started.elapsed().as_secs_f64() / 60.0,
            rss_mib(pid).unwrap_or(0.0),
            dashboard
                .as_ref()
                .and_then(Dashboard::server_pid)
                .and_then(rss_mib)
                .map(|mib| format!(", dashboard RSS {mib:.1} MiB"))
                .unwrap_or_default()
        );
        if started.elapsed() < length {
            tokio::time::sleep(options.rest).await;
        }
    }
    let per_minute = |sampler: &RssSampler| -> Vec<(f64, f64)> {
        sampler
            .samples()
            .into_iter()
            .map(|(secs, mib)| (secs / 60.0, mib))
            .collect()
    };
    let samples = per_minute(&minutes);
    let per_hour = |s: Option<f64>| s.map(|s| s * 60.0);
    let dashboard = match (dashboard, dashboard_rss) {
        (Some(dashboard), Some((before, sampler))) => {
            let samples = per_minute(&sampler);
            let half = samples.len() / 2;
            let report = DashboardSoak {
                rss_before_tabs_mib: before,
                slope_mib_per_hour: per_hour(slope(&samples)),
                second_half_slope_mib_per_hour: per_hour(slope(&samples[half..])),
                rss_samples: samples,
                tabs: dashboard.tabs_report(),
            };
            dashboard.stop().await?;
            Some(report)
        }
        (Some(dashboard), None) => {
            dashboard.stop().await?;
            None
        }
        _ => None,
    };
    let replica_sets = match &options.faults {
        Some(_) => Some(soak_faults::check_replica_sets(&setup.client, ns).await?),
        None => None,
    };
    controller.stop().await?;
    // A control plane of the soak's own is thrown away whole.
    if options.faults.is_none() {
        delete_namespace(&setup.client, ns).await?;
    }
    let half = samples.len() / 2;
    let sockets: Vec<(f64, f64)> = fault_rounds
        .iter()
        .map(|r| (r.minute, r.sockets as f64))
        .collect();
    Ok(SoakReport {
        objects: n,
        minutes: started.elapsed().as_secs_f64() / 60.0,
        updates,
        warm_up_rounds: options.warm_up_rounds,
        slope_mib_per_hour: per_hour(slope(&samples)),
        second_half_slope_mib_per_hour: per_hour(slope(&samples[half..])),
        rss_samples: samples,
        dashboard,
        sockets_slope_per_hour: per_hour(slope(&sockets)),
        controller_never_exited: options.faults.as_ref().map(|_| alive),
        fault_rounds,
        replica_sets,
    })
}

/// One round: every Rollout's image changed to `revision`'s, and all Healthy again; with a
/// fault, the fault injected once the changes are sent. Returns the seconds from the changes
/// sent to all settled, and what the fault did.
async fn round(
    setup: &Setup,
    rollouts: &Api<Rollout>,
    n: usize,
    revision: u32,
    fault: Option<(&FaultKit, soak_faults::Fault)>,
) -> anyhow::Result<(f64, String)> {
    let timeout = setup.phase_timeout;
    let mut outcome = (0.0, String::new());
    let outcome_ref = &mut outcome;
    change_images(
        rollouts.clone(),
        n,
        revision,
        Changes::default(),
        |api, changes| async move {
            let sent = Instant::now();
            let settled = async {
                wait_all_done(api, n, "Healthy", timeout, &changes, move |ro| {
                    workload::rollout_done(ro, Scenario::Plain, revision)
                })
                .await
            };
            let injected = async {
                match fault {
                    Some((kit, fault)) => kit.inject(fault).await,
                    None => Ok(String::new()),
                }
            };
            let (settled, injected) = tokio::join!(settled, injected);
            settled?;
            *outcome_ref = (sent.elapsed().as_secs_f64(), injected?);
            Ok(())
        },
    )
    .await?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_and_of_too_few_points() {
        let line: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 + 0.5 * x as f64)).collect();
        assert!((slope(&line).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(slope(&line[..1]), None);
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }
}
