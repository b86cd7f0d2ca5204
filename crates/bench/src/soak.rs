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
        round(setup, &rollouts, n, revision).await?;
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
    while started.elapsed() < length {
        revision += 1;
        round(setup, &rollouts, n, revision).await?;
        updates += n as u64;
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
    controller.stop().await?;
    delete_namespace(&setup.client, ns).await?;
    let half = samples.len() / 2;
    Ok(SoakReport {
        objects: n,
        minutes: started.elapsed().as_secs_f64() / 60.0,
        updates,
        warm_up_rounds: options.warm_up_rounds,
        slope_mib_per_hour: per_hour(slope(&samples)),
        second_half_slope_mib_per_hour: per_hour(slope(&samples[half..])),
        rss_samples: samples,
        dashboard,
    })
}

/// One round: every Rollout's image changed to `revision`'s, and all Healthy again.
async fn round(
    setup: &Setup,
    rollouts: &Api<Rollout>,
    n: usize,
    revision: u32,
) -> anyhow::Result<()> {
    let timeout = setup.phase_timeout;
    change_images(
        rollouts.clone(),
        n,
        revision,
        Changes::default(),
        |api, changes| async move {
            wait_all_done(api, n, "Healthy", timeout, &changes, move |ro| {
                workload::rollout_done(ro, Scenario::Plain, revision)
            })
            .await
        },
    )
    .await
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
