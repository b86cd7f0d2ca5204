//! The exposition encoder: [`Metrics`] as OpenMetrics text at scrape time, Rollout gauges read
//! from the watch cache, counters and histograms from the metrics' own state.

use kube::ResourceExt;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::argo::{AnalysisRunSeries, ExperimentSeries, Labels, info_phase, rollout_labels};
use super::process::ProcessStats;
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

/// An unlabelled float gauge, or nothing when the value is unknown.
fn float_gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: Option<f64>,
) -> Result<(), std::fmt::Error> {
    match value {
        Some(v) => ConstGauge::new(v).encode(encoder.encode_descriptor(
            name,
            help,
            None,
            MetricType::Gauge,
        )?),
        None => Ok(()),
    }
}

/// An unlabelled float counter (`name` without its `_total`), or nothing when unknown.
fn float_counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: Option<f64>,
) -> Result<(), std::fmt::Error> {
    match value {
        Some(v) => ConstCounter::new(v).encode(encoder.encode_descriptor(
            name,
            help,
            None,
            MetricType::Counter,
        )?),
        None => Ok(()),
    }
}

/// Go's name for the architecture, as `build_info`'s `goarch` has it.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Argo's `rollout_phase` phases (InvalidSpec has none: all are 0).
const ROLLOUT_PHASES: [&str; 6] = [
    "Completed",
    "Progressing",
    "Paused",
    "Timeout",
    "Error",
    "Abort",
];

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
        let mut phases = Vec::new();
        for ro in &rollouts {
            let (ns, name) = (ro.namespace().unwrap_or_default(), ro.name_any());
            let (strategy, router) = ro.strategy_labels();
            let phase = info_phase(ro.status());
            let mut labels = rollout_labels(&ns, &name);
            labels.push(("strategy", strategy.to_string()));
            labels.push(("traffic_router", router.to_string()));
            labels.push(("phase", phase.to_string()));
            info.push((labels, 1));
            for p in ROLLOUT_PHASES {
                let mut labels = rollout_labels(&ns, &name);
                labels.push(("strategy", strategy.to_string()));
                labels.push(("phase", p.to_string()));
                phases.push((labels, i64::from(p == phase)));
            }
            let count = |of: fn(&sluice_api::RolloutStatus) -> Option<i32>| {
                i64::from(ro.status().and_then(of).unwrap_or(0))
            };
            let avail = count(|s| s.available_replicas);
            let labels = rollout_labels(&ns, &name);
            available.push((labels.clone(), avail));
            unavailable.push((labels.clone(), count(|s| s.replicas) - avail));
            desired.push((labels.clone(), i64::from(ro.replicas().unwrap_or(1))));
            updated.push((labels, count(|s| s.updated_replicas)));
        }
        gauge_family(
            &mut encoder,
            "rollout_info",
            "Information about rollout.",
            &info,
        )?;
        gauge_family(
            &mut encoder,
            "rollout_phase",
            "Information on the state of the rollout (DEPRECATED - use rollout_info)",
            &phases,
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
            let mut family = encoder.encode_descriptor(
                "notification_send",
                "Notification send performance.",
                None,
                MetricType::Histogram,
            )?;
            for ((ns, name), series) in per_rollout.iter() {
                if let Some(histogram) = &series.notification_send {
                    let labels = rollout_labels(ns, name);
                    histogram.encode(family.encode_family(&labels)?)?;
                }
            }
            // Argo's names have no `_total` suffix: exposed untyped, as `rollout_reconcile_error`.
            for (metric, help, sent) in [
                (
                    "notification_send_success",
                    "Notification send success.",
                    true,
                ),
                (
                    "notification_send_error",
                    "Error sending the notification",
                    false,
                ),
            ] {
                let mut family =
                    encoder.encode_descriptor(metric, help, None, MetricType::Unknown)?;
                for ((ns, name), series) in per_rollout.iter() {
                    for ((type_, reason, ok), count) in &series.notifications {
                        if *ok != sent {
                            continue;
                        }
                        let mut labels = rollout_labels(ns, name);
                        labels.push(("type", type_.clone()));
                        labels.push(("reason", reason.clone()));
                        family
                            .encode_family(&labels)?
                            .encode_gauge(&i64::try_from(*count).unwrap_or(i64::MAX))?;
                    }
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
            let mut family = encoder.encode_descriptor(
                "sluice_k8s_request_duration_seconds",
                "Duration of the controller's Kubernetes API requests, retries of 429, 503 and \
                 504 answers included.",
                None,
                MetricType::Histogram,
            )?;
            for (verb, histogram) in lock(&m.request_durations).iter() {
                let labels: Labels = vec![("verb", verb.clone())];
                histogram.encode(family.encode_family(&labels)?)?;
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

        let mut template_info = Vec::new();
        let mut template_metrics = Vec::new();
        for (ns, name, metrics) in m.live_templates() {
            template_info.push((rollout_labels(&ns, &name), 1));
            for metric in &metrics {
                let type_ = metric
                    .provider
                    .as_ref()
                    .and_then(|p| p.kind())
                    .map_or("", |k| k.type_name());
                let mut labels = rollout_labels(&ns, &name);
                labels.push(("type", type_.to_string()));
                labels.push(("metric", metric.name.clone().unwrap_or_default()));
                template_metrics.push((labels, 1));
            }
        }
        gauge_family(
            &mut encoder,
            "analysis_template_info",
            "Information about analysis templates.",
            &template_info,
        )?;
        gauge_family(
            &mut encoder,
            "analysis_template_metric_info",
            "Information on metrics in analysis templates.",
            &template_metrics,
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
            "build_info",
            "A metric with a constant '1' value labeled by version from which Argo-Rollouts was built.",
            &[(
                vec![
                    ("version", m.version.clone()),
                    ("goversion", String::new()),
                    ("goarch", go_arch().to_string()),
                    (
                        "commit",
                        option_env!("SLUICE_GIT_COMMIT").unwrap_or("").to_string(),
                    ),
                ],
                1,
            )],
        )?;

        encode_workqueues(&mut encoder, &m)?;
        encode_process(&mut encoder, &ProcessStats::read())?;

        gauge_family(
            &mut encoder,
            "sluice_leader",
            "1 while this replica holds the leader lease and may write, else 0.",
            &[(Vec::new(), i64::from(m.is_leader()))],
        )?;
        Ok(())
    }
}

/// The `workqueue_*` families, one series per Argo queue name.
fn encode_workqueues(encoder: &mut DescriptorEncoder, m: &Metrics) -> Result<(), std::fmt::Error> {
    let now = std::time::Instant::now();
    let label = |name: &str| -> Labels { vec![("name", name.to_string())] };
    let mut result = Ok(());
    let mut adds = Vec::new();
    let mut retries = Vec::new();
    let mut unfinished = Vec::new();
    let mut longest = Vec::new();
    m.queues.each(|name, series| {
        let (a, r, (u, l)) = series.map_or((0, 0, (0.0, 0.0)), |s| {
            (s.adds, s.retries, s.unfinished(now))
        });
        adds.push((label(name), a));
        retries.push((label(name), r));
        unfinished.push((label(name), u));
        longest.push((label(name), l));
    });
    for (family, help, values) in [
        (
            "workqueue_adds",
            "[ALPHA] Total number of adds handled by workqueue",
            &adds,
        ),
        (
            "workqueue_retries",
            "[ALPHA] Total number of retries handled by workqueue",
            &retries,
        ),
    ] {
        let mut f = encoder.encode_descriptor(family, help, None, MetricType::Counter)?;
        for (labels, v) in values {
            f.encode_family(labels)?
                .encode_counter::<Labels, _, f64>(v, None)?;
        }
    }
    for (family, help, values) in [
        (
            "workqueue_unfinished_work_seconds",
            "[ALPHA] How many seconds of work has done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads. One can deduce the \
             number of stuck threads by observing the rate at which this increases.",
            &unfinished,
        ),
        (
            "workqueue_longest_running_processor_seconds",
            "[ALPHA] How many seconds has the longest running processor for workqueue been running.",
            &longest,
        ),
    ] {
        let mut f = encoder.encode_descriptor(family, help, None, MetricType::Gauge)?;
        for (labels, v) in values {
            f.encode_family(labels)?.encode_gauge(v)?;
        }
    }
    let mut f = encoder.encode_descriptor(
        "workqueue_work_duration_seconds",
        "[ALPHA] How long in seconds processing an item from workqueue takes.",
        None,
        MetricType::Histogram,
    )?;
    let empty = prometheus_client::metrics::histogram::Histogram::new(super::workqueue::buckets());
    m.queues.each(|name, series| {
        if result.is_ok() {
            let histogram = series.map_or(&empty, |s| &s.work);
            result = f
                .encode_family(&label(name))
                .and_then(|enc| histogram.encode(enc));
        }
    });
    result
}

/// The process families of the Prometheus clients, and the heap gauge the dashboard reads.
fn encode_process(
    encoder: &mut DescriptorEncoder,
    p: &ProcessStats,
) -> Result<(), std::fmt::Error> {
    float_counter(
        encoder,
        "process_cpu_seconds",
        "Total user and system CPU time spent in seconds.",
        p.cpu_seconds,
    )?;
    float_gauge(
        encoder,
        "process_start_time_seconds",
        "Start time of the process since unix epoch in seconds.",
        p.start_time_seconds,
    )?;
    float_gauge(
        encoder,
        "process_resident_memory_bytes",
        "Resident memory size in bytes.",
        p.resident_memory_bytes,
    )?;
    float_gauge(
        encoder,
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes.",
        p.virtual_memory_bytes,
    )?;
    float_gauge(
        encoder,
        "process_virtual_memory_max_bytes",
        "Maximum amount of virtual memory available in bytes.",
        p.virtual_memory_max_bytes,
    )?;
    float_gauge(
        encoder,
        "process_open_fds",
        "Number of open file descriptors.",
        p.open_fds,
    )?;
    float_gauge(
        encoder,
        "process_max_fds",
        "Maximum number of open file descriptors.",
        p.max_fds,
    )?;
    float_counter(
        encoder,
        "process_network_receive_bytes",
        "Number of bytes received by the process over the network.",
        p.network_receive_bytes,
    )?;
    float_counter(
        encoder,
        "process_network_transmit_bytes",
        "Number of bytes sent by the process over the network.",
        p.network_transmit_bytes,
    )?;
    float_gauge(
        encoder,
        "go_memstats_heap_alloc_bytes",
        "Number of heap bytes allocated and currently in use (Sluice: the allocator's live heap \
         bytes; there is no Go runtime).",
        p.heap_alloc_bytes,
    )
}
