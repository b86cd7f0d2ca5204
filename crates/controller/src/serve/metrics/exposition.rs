//! The exposition encoder: [`Metrics`] as OpenMetrics text at scrape time, Rollout gauges read
//! from the watch cache, counters and histograms from the metrics' own state.

use kube::ResourceExt;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::argo::{
    AnalysisRunSeries, ExperimentSeries, Labels, info_phase, rollout_labels, strategy_labels,
};
use super::{Metrics, lock};
use super::{RolloutKey, RolloutSeries};

/// Encodes [`Metrics`] at scrape time. Holds a weak reference so the registry inside
/// `Metrics` does not keep it alive.
#[derive(Debug)]
pub(super) struct Exposition(pub(super) std::sync::Weak<Metrics>);

fn gauge_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Labels, i64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    if let [(labels, value)] = series
        && labels.is_empty()
    {
        // A single unlabelled series: no `{}` after the name.
        return ConstGauge::new(*value).encode(family);
    }
    for (labels, value) in series {
        ConstGauge::new(*value).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// A reconcile histogram and its error count, per object, under Argo's names. The error count
/// has no `_total` suffix in Argo, which an OpenMetrics counter must have: it is exposed
/// untyped so that existing queries and alerts keep working.
fn reconcile_families(
    encoder: &mut DescriptorEncoder,
    per_object: &std::collections::BTreeMap<RolloutKey, RolloutSeries>,
    (histogram, histogram_help): (&str, &str),
    (errors, errors_help): (&str, &str),
) -> Result<(), std::fmt::Error> {
    let mut family =
        encoder.encode_descriptor(histogram, histogram_help, None, MetricType::Histogram)?;
    for ((ns, name), series) in per_object {
        series
            .reconcile
            .encode(family.encode_family(&rollout_labels(ns, name))?)?;
    }
    let mut family = encoder.encode_descriptor(errors, errors_help, None, MetricType::Unknown)?;
    for ((ns, name), series) in per_object {
        family
            .encode_family(&rollout_labels(ns, name))?
            .encode_gauge(&i64::try_from(series.errors).unwrap_or(i64::MAX))?;
    }
    Ok(())
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(m) = self.0.upgrade() else {
            return Ok(());
        };

        let rollouts = m.live_rollouts().unwrap_or_default();
        let mut info = Vec::new();
        let mut available = Vec::new();
        let mut unavailable = Vec::new();
        let mut desired = Vec::new();
        let mut updated = Vec::new();
        for ro in &rollouts {
            let (ns, name) = (ro.namespace().unwrap_or_default(), ro.name_any());
            let (strategy, router) = strategy_labels(ro);
            let mut labels = rollout_labels(&ns, &name);
            labels.push(("strategy", strategy.to_string()));
            labels.push(("traffic_router", router.to_string()));
            labels.push(("phase", info_phase(ro).to_string()));
            info.push((labels, 1));
            let status = ro.status.clone().unwrap_or_default();
            let avail = i64::from(status.available_replicas.unwrap_or(0));
            let labels = rollout_labels(&ns, &name);
            available.push((labels.clone(), avail));
            unavailable.push((
                labels.clone(),
                i64::from(status.replicas.unwrap_or(0)) - avail,
            ));
            desired.push((labels.clone(), i64::from(ro.spec.replicas.unwrap_or(1))));
            updated.push((labels, i64::from(status.updated_replicas.unwrap_or(0))));
        }
        gauge_family(
            &mut encoder,
            "rollout_info",
            "Information about rollout.",
            &info,
        )?;
        gauge_family(
            &mut encoder,
            "rollout_info_replicas_available",
            "The number of available replicas per rollout.",
            &available,
        )?;
        gauge_family(
            &mut encoder,
            "rollout_info_replicas_unavailable",
            "The number of unavailable replicas per rollout.",
            &unavailable,
        )?;
        gauge_family(
            &mut encoder,
            "rollout_info_replicas_desired",
            "The number of desired replicas per rollout.",
            &desired,
        )?;
        gauge_family(
            &mut encoder,
            "rollout_info_replicas_updated",
            "The number of updated replicas per rollout.",
            &updated,
        )?;

        {
            let per_rollout = lock(&m.per_rollout);
            let mut family = encoder.encode_descriptor(
                "rollout_reconcile",
                "Rollout reconciliation performance.",
                None,
                MetricType::Histogram,
            )?;
            for ((ns, name), series) in per_rollout.iter() {
                let labels = rollout_labels(ns, name);
                series.reconcile.encode(family.encode_family(&labels)?)?;
            }
            // Argo's name has no `_total` suffix, which an OpenMetrics counter must have; it is
            // exposed untyped so that existing queries and alerts keep working.
            let mut family = encoder.encode_descriptor(
                "rollout_reconcile_error",
                "Error occurring during the rollout",
                None,
                MetricType::Unknown,
            )?;
            for ((ns, name), series) in per_rollout.iter() {
                let labels = rollout_labels(ns, name);
                family
                    .encode_family(&labels)?
                    .encode_gauge(&i64::try_from(series.errors).unwrap_or(i64::MAX))?;
            }
            let mut family = encoder.encode_descriptor(
                "rollout_events",
                "Count of rollout events",
                None,
                MetricType::Counter,
            )?;
            for ((ns, name), series) in per_rollout.iter() {
                for ((type_, reason), count) in &series.events {
                    let mut labels = rollout_labels(ns, name);
                    labels.push(("type", type_.clone()));
                    labels.push(("reason", reason.clone()));
                    family
                        .encode_family(&labels)?
                        .encode_counter::<Labels, _, f64>(count, None)?;
                }
            }
        }

        {
            let requests = lock(&m.requests);
            let mut family = encoder.encode_descriptor(
                "controller_clientset_k8s_request",
                "Number of kubernetes requests executed during application reconciliation.",
                None,
                MetricType::Counter,
            )?;
            for ((info, status), series) in requests.iter() {
                let labels: Labels = vec![
                    ("kind", info.kind.clone()),
                    ("namespace", info.namespace.clone()),
                    ("name", info.name.clone()),
                    ("verb", info.verb.clone()),
                    ("status_code", status.clone()),
                ];
                family
                    .encode_family(&labels)?
                    .encode_counter::<Labels, _, f64>(&series.count, None)?;
            }
        }

        {
            let family = encoder.encode_descriptor(
                "sluice_rollout_reconcile_seconds",
                "Duration of every Rollout reconcile, all Rollouts together.",
                None,
                MetricType::Histogram,
            )?;
            m.reconcile_all.encode(family)?;
            let mut family = encoder.encode_descriptor(
                "sluice_k8s_requests",
                "Kubernetes API requests of the controller, all objects together.",
                None,
                MetricType::Counter,
            )?;
            for ((kind, verb, status), count) in lock(&m.request_totals).iter() {
                let labels: Labels = vec![
                    ("kind", kind.clone()),
                    ("verb", verb.clone()),
                    ("status_code", status.clone()),
                ];
                family
                    .encode_family(&labels)?
                    .encode_counter::<Labels, _, f64>(count, None)?;
            }
        }

        let mut runs = AnalysisRunSeries::default();
        for run in m.live_analysis_runs() {
            runs.add(&run);
        }
        gauge_family(
            &mut encoder,
            "analysis_run_info",
            "Information about analysis run.",
            &runs.info,
        )?;
        gauge_family(
            &mut encoder,
            "analysis_run_phase",
            "Information on the state of the Analysis Run (DEPRECATED - use analysis_run_info)",
            &runs.phase,
        )?;
        gauge_family(
            &mut encoder,
            "analysis_run_metric_type",
            "Information on the type of a specific metric in the Analysis Runs.",
            &runs.metric_type,
        )?;
        gauge_family(
            &mut encoder,
            "analysis_run_metric_phase",
            "Information on the duration of a specific metric in the Analysis Run.",
            &runs.metric_phase,
        )?;
        reconcile_families(
            &mut encoder,
            &lock(&m.per_run),
            (
                "analysis_run_reconcile",
                "Analysis Run reconciliation performance.",
            ),
            (
                "analysis_run_reconcile_error",
                "Error occurring during the analysis run",
            ),
        )?;

        let mut experiments = ExperimentSeries::default();
        for exp in m.live_experiments() {
            experiments.add(&exp);
        }
        gauge_family(
            &mut encoder,
            "experiment_info",
            "Information about Experiment.",
            &experiments.info,
        )?;
        gauge_family(
            &mut encoder,
            "experiment_phase",
            "Information on the state of the experiment (DEPRECATED - use experiment_info)",
            &experiments.phase,
        )?;
        reconcile_families(
            &mut encoder,
            &lock(&m.per_experiment),
            (
                "experiment_reconcile",
                "Experiments reconciliation performance.",
            ),
            (
                "experiment_reconcile_error",
                "Error occurring during the experiment",
            ),
        )?;

        gauge_family(
            &mut encoder,
            "argo_rollouts_controller_info",
            "Running Argo-rollouts version",
            &[(vec![("version", m.version.clone())], 1)],
        )?;
        gauge_family(
            &mut encoder,
            "sluice_leader",
            "1 while this replica holds the leader lease and may write, else 0.",
            &[(Vec::new(), i64::from(m.is_leader()))],
        )?;
        Ok(())
    }
}
