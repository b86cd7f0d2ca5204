//! Prometheus metrics, with Argo Rollouts' names and labels where the same thing is measured:
//!
//! | metric | labels |
//! |---|---|
//! | `rollout_info` (gauge, 1) | namespace, name, strategy, traffic_router, phase |
//! | `rollout_info_replicas_{available,unavailable,desired,updated}` | namespace, name |
//! | `rollout_reconcile` (histogram, seconds) | namespace, name |
//! | `rollout_reconcile_error` | namespace, name |
//! | `rollout_events_total` | namespace, name, type, reason |
//! | `controller_clientset_k8s_request_total` | kind, namespace, name, verb, status_code |
//! | `argo_rollouts_controller_info` (gauge, 1) | version |
//! | `sluice_leader` (gauge, 1 while this replica may write) | |
//!
//! Rollout gauges are read from the watch cache at scrape time, as Argo does, so they vanish
//! with the Rollout. Counters and histograms of a Rollout are dropped at the first scrape after
//! it left the cache, together with the request series of the objects named after it (its
//! ReplicaSets `<name>-<hash>`, pods, events `<name>.<id>`): cardinality follows what exists.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, Request, Response, Uri};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use sluice_api::Rollout;
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::RolloutConditionType;
use tower::{BoxError, Layer, Service};

/// Argo Rollouts' buckets for reconcile durations (seconds).
const RECONCILE_BUCKETS: [f64; 5] = [0.01, 0.15, 0.25, 0.5, 1.0];

/// Backstop on request series whatever their names: the least recently used go first.
const MAX_REQUEST_SERIES: usize = 10_000;

/// Content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type RolloutKey = (String, String);

#[derive(Debug)]
struct RolloutSeries {
    reconcile: Histogram,
    errors: u64,
    /// (type, reason) -> count
    events: BTreeMap<(String, String), u64>,
}

impl RolloutSeries {
    fn new() -> RolloutSeries {
        RolloutSeries {
            reconcile: Histogram::new(RECONCILE_BUCKETS),
            errors: 0,
            events: BTreeMap::new(),
        }
    }
}

/// One API request, as labelled by `controller_clientset_k8s_request_total`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestInfo {
    /// The resource (plural), e.g. `replicasets`.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `Get`, `List`, `Watch`, `Create`, `Update`, `Patch`, `Delete`, `DeleteCollection`.
    pub verb: String,
}

impl RequestInfo {
    /// Labels for a request to `uri` (API paths `/api/v1/...` and `/apis/<group>/<version>/...`).
    pub fn parse(method: &Method, uri: &Uri) -> RequestInfo {
        let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let rest: &[&str] = match segments.as_slice() {
            ["api", _version, rest @ ..] => rest,
            ["apis", _group, _version, rest @ ..] => rest,
            _ => &[],
        };
        // namespaces/<ns>/<resource>/... is namespaced; namespaces/<ns> is the namespace itself.
        let (namespace, rest) = match rest {
            ["namespaces", ns, resource, tail @ ..] => (*ns, [&[*resource][..], tail].concat()),
            other => ("", other.to_vec()),
        };
        let (kind, name) = match rest.as_slice() {
            [resource] => (*resource, None),
            [resource, name, ..] => (*resource, Some(*name)),
            _ => ("Unknown", None),
        };
        let watch = uri
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
        let verb = match (method, name) {
            (&Method::GET, _) if watch => "Watch",
            (&Method::GET, Some(_)) => "Get",
            (&Method::GET, None) => "List",
            (&Method::POST, _) => "Create",
            (&Method::PUT, _) => "Update",
            (&Method::PATCH, _) => "Patch",
            (&Method::DELETE, Some(_)) => "Delete",
            (&Method::DELETE, None) => "DeleteCollection",
            _ => "Unknown",
        };
        // Argo labels collection requests "N/A" and watches "".
        let name = match (verb, name) {
            ("Watch", _) => String::new(),
            // POST to a subresource (an eviction) names its object; a plain create does not.
            (_, Some(n)) => n.to_string(),
            (_, None) => "N/A".to_string(),
        };
        RequestInfo {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name,
            verb: verb.to_string(),
        }
    }
}

#[derive(Debug)]
struct RequestSeries {
    count: u64,
    last_used: u64,
}

/// The controller's metrics; shared by the reconciler, the HTTP client layers and the server.
#[derive(Debug)]
pub struct Metrics {
    version: String,
    leader: AtomicBool,
    /// The Rollout cache, once it has synced.
    rollouts: OnceLock<Store<Rollout>>,
    /// The AnalysisRun cache, once it has synced.
    analysis_runs: OnceLock<Store<AnalysisRun>>,
    per_run: Mutex<BTreeMap<RolloutKey, RolloutSeries>>,
    per_rollout: Mutex<BTreeMap<RolloutKey, RolloutSeries>>,
    requests: Mutex<BTreeMap<(RequestInfo, String), RequestSeries>>,
    request_clock: AtomicU64,
    registry: OnceLock<Registry>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a metrics lock leaves plain counters behind: keep using them.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Metrics {
    pub fn new(version: &str) -> Arc<Metrics> {
        let metrics = Arc::new(Metrics {
            version: version.to_string(),
            leader: AtomicBool::new(false),
            rollouts: OnceLock::new(),
            analysis_runs: OnceLock::new(),
            per_run: Mutex::new(BTreeMap::new()),
            per_rollout: Mutex::new(BTreeMap::new()),
            requests: Mutex::new(BTreeMap::new()),
            request_clock: AtomicU64::new(0),
            registry: OnceLock::new(),
        });
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Exposition(Arc::downgrade(&metrics))));
        let _ = metrics.registry.set(registry);
        metrics
    }

    /// Rollout gauges come from this cache; call once it has synced.
    pub fn use_rollout_cache(&self, store: Store<Rollout>) {
        let _ = self.rollouts.set(store);
    }

    /// AnalysisRun gauges come from this cache; call once it has synced.
    pub fn use_analysis_run_cache(&self, store: Store<AnalysisRun>) {
        let _ = self.analysis_runs.set(store);
    }

    /// Records one AnalysisRun reconcile (`analysis_run_reconcile`, `..._error`).
    pub fn observe_run_reconcile(&self, namespace: &str, name: &str, took: Duration, failed: bool) {
        let mut map = lock(&self.per_run);
        let series = map
            .entry((namespace.to_string(), name.to_string()))
            .or_insert_with(RolloutSeries::new);
        series.reconcile.observe(took.as_secs_f64());
        if failed {
            series.errors += 1;
        }
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.store(leading, Ordering::Relaxed);
    }

    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    pub fn observe_reconcile(&self, namespace: &str, name: &str, took: Duration, failed: bool) {
        let mut map = lock(&self.per_rollout);
        let series = map
            .entry((namespace.to_string(), name.to_string()))
            .or_insert_with(RolloutSeries::new);
        series.reconcile.observe(took.as_secs_f64());
        if failed {
            series.errors += 1;
        }
    }

    pub fn count_event(&self, namespace: &str, name: &str, type_: &str, reason: &str) {
        let mut map = lock(&self.per_rollout);
        let series = map
            .entry((namespace.to_string(), name.to_string()))
            .or_insert_with(RolloutSeries::new);
        *series
            .events
            .entry((type_.to_string(), reason.to_string()))
            .or_default() += 1;
    }

    /// Counts a request that got a response with `status` (or `"error"` when none came back).
    pub fn count_request(&self, info: RequestInfo, status: &str) {
        let now = self.request_clock.fetch_add(1, Ordering::Relaxed);
        let mut map = lock(&self.requests);
        let series = map
            .entry((info, status.to_string()))
            .or_insert(RequestSeries {
                count: 0,
                last_used: now,
            });
        series.count += 1;
        series.last_used = now;
        if map.len() > MAX_REQUEST_SERIES
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
    }

    /// Total of the request counter over series matching `filter`; for tests and diagnostics.
    pub fn requests_matching(&self, filter: impl Fn(&RequestInfo, &str) -> bool) -> u64 {
        lock(&self.requests)
            .iter()
            .filter(|((info, status), _)| filter(info, status))
            .map(|(_, s)| s.count)
            .sum()
    }

    /// The exposition in the OpenMetrics text format, after dropping deleted Rollouts' series.
    pub fn render(&self) -> String {
        self.prune();
        let mut out = String::new();
        if let Some(registry) = self.registry.get()
            && prometheus_client::encoding::text::encode(&mut out, registry).is_err()
        {
            out.clear();
            let _ = writeln!(out, "# EOF");
        }
        out
    }

    fn live_rollouts(&self) -> Option<Vec<Arc<Rollout>>> {
        self.rollouts.get().map(Store::state)
    }

    fn live_analysis_runs(&self) -> Vec<Arc<AnalysisRun>> {
        self.analysis_runs
            .get()
            .map(Store::state)
            .unwrap_or_default()
    }

    fn prune(&self) {
        if let Some(store) = self.analysis_runs.get() {
            let live: BTreeSet<RolloutKey> = store
                .state()
                .iter()
                .map(|r| (r.namespace().unwrap_or_default(), r.name_any()))
                .collect();
            lock(&self.per_run).retain(|key, _| live.contains(key));
        }
        let Some(live) = self.live_rollouts() else {
            return;
        };
        let live: BTreeSet<RolloutKey> = live
            .iter()
            .map(|ro| (ro.namespace().unwrap_or_default(), ro.name_any()))
            .collect();
        let mut gone = BTreeSet::new();
        lock(&self.per_rollout).retain(|key, _| {
            let keep = live.contains(key);
            if !keep {
                gone.insert(key.clone());
            }
            keep
        });
        if gone.is_empty() {
            return;
        }
        lock(&self.requests).retain(|(info, _), _| {
            // The object belongs to the Rollout with the longest name it derives from.
            let owner = live
                .iter()
                .chain(gone.iter())
                .filter(|(ns, name)| *ns == info.namespace && derives_from(&info.name, name))
                .max_by_key(|(_, name)| name.len());
            !owner.is_some_and(|key| gone.contains(key))
        });
    }
}

/// Whether an object name is the Rollout's own or one made from it.
fn derives_from(object: &str, rollout: &str) -> bool {
    object == rollout
        || object
            .strip_prefix(rollout)
            .is_some_and(|rest| rest.starts_with('-') || rest.starts_with('.'))
}

/// Argo's `rollout_info` phase: from the Progressing and InvalidSpec conditions.
pub fn info_phase(ro: &Rollout) -> &'static str {
    let conditions = ro
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let reason_of = |t: RolloutConditionType| {
        conditions
            .iter()
            .find(|c| c.type_.as_ref() == Some(&t))
            .map(|c| c.reason.as_deref().unwrap_or_default())
    };
    if reason_of(RolloutConditionType::InvalidSpec).is_some() {
        return "InvalidSpec";
    }
    match reason_of(RolloutConditionType::Progressing) {
        Some("NewReplicaSetAvailable") => "Completed",
        Some("RolloutPaused") => "Paused",
        Some("ReplicaSetCreateError") => "Error",
        Some("ProgressDeadlineExceeded") => "Timeout",
        Some("RolloutAborted") => "Abort",
        _ => "Progressing",
    }
}

/// Argo's `strategy` and `traffic_router` labels.
pub fn strategy_labels(ro: &Rollout) -> (&'static str, &'static str) {
    let Some(strategy) = ro.spec.strategy.as_ref() else {
        return ("none", "");
    };
    if strategy.blue_green.is_some() {
        return ("blueGreen", "");
    }
    let Some(canary) = strategy.canary.as_ref() else {
        return ("none", "");
    };
    let router = canary.traffic_routing.as_ref().map_or("", |t| {
        [
            (t.app_mesh.is_some(), "AppMesh"),
            (t.smi.is_some(), "SMI"),
            (t.nginx.is_some(), "Nginx"),
            (t.istio.is_some(), "Istio"),
            (t.ambassador.is_some(), "Ambassador"),
            (t.alb.is_some(), "ALB"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
        .unwrap_or("")
    });
    ("canary", router)
}

type Labels = Vec<(&'static str, String)>;

/// Every phase an AnalysisRun or metric can be in, for the one-hot `*_phase` gauges.
const ANALYSIS_PHASES: [&str; 6] = [
    "Pending",
    "Running",
    "Successful",
    "Failed",
    "Error",
    "Inconclusive",
];

/// The AnalysisRun series Argo exports: `analysis_run_info`, `analysis_run_phase` (one-hot),
/// `analysis_run_metric_type` and `analysis_run_metric_phase` (one-hot).
#[derive(Debug, Default, PartialEq)]
pub struct AnalysisRunSeries {
    pub info: Vec<(Labels, i64)>,
    pub phase: Vec<(Labels, i64)>,
    pub metric_type: Vec<(Labels, i64)>,
    pub metric_phase: Vec<(Labels, i64)>,
}

impl AnalysisRunSeries {
    pub fn add(&mut self, run: &AnalysisRun) {
        let labels = rollout_labels(&run.namespace().unwrap_or_default(), &run.name_any());
        let status = run.status.as_ref();
        let phase = status
            .and_then(|s| s.phase.as_ref())
            .map_or("Pending", |p| p.as_str());
        let mut info = labels.clone();
        info.push(("phase", phase.to_string()));
        self.info.push((info, 1));
        for p in ANALYSIS_PHASES {
            let mut l = labels.clone();
            l.push(("phase", p.to_string()));
            self.phase.push((l, i64::from(p == phase)));
        }
        let dry_run: BTreeSet<&str> = status
            .and_then(|s| s.metric_results.as_ref())
            .into_iter()
            .flatten()
            .filter(|r| r.dry_run == Some(true))
            .filter_map(|r| r.name.as_deref())
            .collect();
        for metric in run.spec.metrics.iter().flatten() {
            let name = metric.name.clone().unwrap_or_default();
            let type_ = metric
                .provider
                .as_ref()
                .and_then(|p| p.kind())
                .map_or("", |k| k.type_name());
            let mut l = labels.clone();
            l.push(("metric", name.clone()));
            l.push(("type", type_.to_string()));
            self.metric_type.push((l.clone(), 1));
            let metric_phase = status
                .and_then(|s| s.metric_results.as_ref())
                .and_then(|r| r.iter().find(|r| r.name.as_deref() == Some(name.as_str())))
                .and_then(|r| r.phase.as_ref())
                .map_or("Pending", |p| p.as_str());
            l.push(("dry_run", dry_run.contains(name.as_str()).to_string()));
            for p in ANALYSIS_PHASES {
                let mut l = l.clone();
                l.push(("phase", p.to_string()));
                self.metric_phase.push((l, i64::from(p == metric_phase)));
            }
        }
    }
}

fn rollout_labels(namespace: &str, name: &str) -> Labels {
    vec![
        ("namespace", namespace.to_string()),
        ("name", name.to_string()),
    ]
}

/// Encodes [`Metrics`] at scrape time. Holds a weak reference so the registry inside
/// `Metrics` does not keep it alive.
#[derive(Debug)]
struct Exposition(std::sync::Weak<Metrics>);

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
        {
            let per_run = lock(&m.per_run);
            let mut family = encoder.encode_descriptor(
                "analysis_run_reconcile",
                "Analysis Run reconciliation performance.",
                None,
                MetricType::Histogram,
            )?;
            for ((ns, name), series) in per_run.iter() {
                series
                    .reconcile
                    .encode(family.encode_family(&rollout_labels(ns, name))?)?;
            }
            let mut family = encoder.encode_descriptor(
                "analysis_run_reconcile_error",
                "Error occurring during the analysis run",
                None,
                MetricType::Unknown,
            )?;
            for ((ns, name), series) in per_run.iter() {
                family
                    .encode_family(&rollout_labels(ns, name))?
                    .encode_gauge(&i64::try_from(series.errors).unwrap_or(i64::MAX))?;
            }
        }

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

/// Tower layer counting every API request by its Argo labels and response status.
#[derive(Clone)]
pub struct RequestMetricsLayer {
    metrics: Arc<Metrics>,
}

impl RequestMetricsLayer {
    pub fn new(metrics: Arc<Metrics>) -> RequestMetricsLayer {
        RequestMetricsLayer { metrics }
    }
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RequestMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, RB> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let info = RequestInfo::parse(request.method(), request.uri());
        let metrics = self.metrics.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await.map_err(Into::into);
            let status = match &result {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            metrics.count_request(info, &status);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().unwrap())
    }

    fn req(kind: &str, ns: &str, name: &str, verb: &str) -> RequestInfo {
        RequestInfo {
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
            verb: verb.into(),
        }
    }

    #[test]
    fn requests_get_argo_labels() {
        assert_eq!(
            info(
                Method::GET,
                "/apis/apps/v1/namespaces/a/replicasets?labelSelector=x"
            ),
            req("replicasets", "a", "N/A", "List")
        );
        assert_eq!(
            info(
                Method::GET,
                "/apis/argoproj.io/v1alpha1/rollouts?watch=true&resourceVersion=5"
            ),
            req("rollouts", "", "", "Watch")
        );
        assert_eq!(
            info(
                Method::PATCH,
                "/apis/argoproj.io/v1alpha1/namespaces/a/rollouts/web/status"
            ),
            req("rollouts", "a", "web", "Patch")
        );
        assert_eq!(
            info(Method::POST, "/api/v1/namespaces/a/pods/web-1/eviction"),
            req("pods", "a", "web-1", "Create")
        );
        assert_eq!(
            info(Method::POST, "/apis/apps/v1/namespaces/a/replicasets"),
            req("replicasets", "a", "N/A", "Create")
        );
        assert_eq!(
            info(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/argo-rollouts/leases/argo-rollouts-controller-lock"
            ),
            req(
                "leases",
                "argo-rollouts",
                "argo-rollouts-controller-lock",
                "Update"
            )
        );
        assert_eq!(
            info(
                Method::DELETE,
                "/apis/apps/v1/namespaces/a/replicasets/web-abc"
            ),
            req("replicasets", "a", "web-abc", "Delete")
        );
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces/a"),
            req("namespaces", "", "a", "Get")
        );
        assert_eq!(info(Method::GET, "/version").kind, "Unknown");
    }

    fn rollout(ns: &str, name: &str, extra: serde_json::Value) -> Rollout {
        let mut v = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 3, "strategy": {"canary": {"steps": []}}},
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in e {
                o.insert(k.clone(), val.clone());
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn series_lines(text: &str, metric: &str) -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && l.starts_with(metric))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn exposition_has_argo_names_and_drops_deleted_rollouts() {
        let m = Metrics::new("v0.1.0");
        let (reader, mut writer) = reflector::store::<Rollout>();
        let web = rollout(
            "a",
            "web",
            json!({"status": {"replicas": 4, "availableReplicas": 3, "updatedReplicas": 1,
                "conditions": [{"type": "Progressing", "status": "True", "reason": "RolloutPaused"}]}}),
        );
        let api = rollout("a", "web-api", json!({}));
        writer.apply_watcher_event(&Event::Apply(web.clone()));
        writer.apply_watcher_event(&Event::Apply(api.clone()));
        m.use_rollout_cache(reader);
        m.observe_reconcile("a", "web", Duration::from_millis(20), false);
        m.observe_reconcile("a", "web", Duration::from_millis(300), true);
        m.observe_reconcile("a", "web-api", Duration::from_millis(1), false);
        m.count_event("a", "web", "Normal", "RolloutPaused");
        m.count_request(req("replicasets", "a", "web-6d4f", "Patch"), "200");
        m.count_request(req("replicasets", "a", "web-api-77aa", "Patch"), "200");
        m.count_request(req("rollouts", "a", "web", "Patch"), "409");
        m.set_leader(true);

        let text = m.render();
        assert!(text.contains(
            r#"rollout_info{namespace="a",name="web",strategy="canary",traffic_router="",phase="Paused"} 1"#
        ), "{text}");
        assert!(text.contains(r#"rollout_info_replicas_available{namespace="a",name="web"} 3"#));
        assert!(text.contains(r#"rollout_info_replicas_unavailable{namespace="a",name="web"} 1"#));
        assert!(text.contains(r#"rollout_info_replicas_desired{namespace="a",name="web"} 3"#));
        assert!(text.contains(r#"rollout_info_replicas_updated{namespace="a",name="web"} 1"#));
        assert!(text.contains(r#"rollout_reconcile_count{namespace="a",name="web"} 2"#));
        assert!(
            text.contains(r#"rollout_reconcile_bucket{le="0.01",namespace="a",name="web"} 0"#)
                || text
                    .contains(r#"rollout_reconcile_bucket{namespace="a",name="web",le="0.01"} 0"#),
            "{text}"
        );
        assert!(text.contains(r#"rollout_reconcile_error{namespace="a",name="web"} 1"#));
        assert!(text.contains(
            r#"rollout_events_total{namespace="a",name="web",type="Normal",reason="RolloutPaused"} 1"#
        ));
        assert!(text.contains(
            r#"controller_clientset_k8s_request_total{kind="rollouts",namespace="a",name="web",verb="Patch",status_code="409"} 1"#
        ));
        assert!(text.contains(r#"argo_rollouts_controller_info{version="v0.1.0"} 1"#));
        assert!(text.contains("sluice_leader 1"));
        assert!(text.ends_with("# EOF\n"));

        // `web` is deleted: its series go, those of `web-api` (a longer name) stay.
        writer.apply_watcher_event(&Event::Delete(web));
        let text = m.render();
        for metric in [
            "rollout_info",
            "rollout_reconcile",
            "rollout_events",
            "controller_clientset",
        ] {
            assert!(
                series_lines(&text, metric)
                    .iter()
                    .all(|l| !l.contains(r#"name="web""#) && !l.contains("web-6d4f")),
                "{metric} still has web: {text}"
            );
        }
        assert!(text.contains(r#"rollout_reconcile_count{namespace="a",name="web-api"} 1"#));
        assert!(text.contains(r#"name="web-api-77aa""#));
        assert_eq!(series_lines(&text, "rollout_info{").len(), 1);
    }

    #[test]
    fn phase_and_strategy_labels_follow_argo() {
        let ro = |status: serde_json::Value, strategy: serde_json::Value| {
            let mut r = rollout("a", "r", json!({"status": status}));
            r.spec.strategy = serde_json::from_value(strategy).unwrap();
            r
        };
        let cond = |t: &str, reason: &str| json!({"conditions": [{"type": t, "status": "True", "reason": reason}]});
        let canary = json!({"canary": {}});
        assert_eq!(info_phase(&ro(json!({}), canary.clone())), "Progressing");
        assert_eq!(
            info_phase(&ro(
                cond("Progressing", "NewReplicaSetAvailable"),
                canary.clone()
            )),
            "Completed"
        );
        assert_eq!(
            info_phase(&ro(
                cond("Progressing", "ProgressDeadlineExceeded"),
                canary.clone()
            )),
            "Timeout"
        );
        assert_eq!(
            info_phase(&ro(cond("Progressing", "RolloutAborted"), canary.clone())),
            "Abort"
        );
        assert_eq!(
            info_phase(&ro(cond("InvalidSpec", "InvalidSpec"), canary.clone())),
            "InvalidSpec"
        );
        assert_eq!(strategy_labels(&ro(json!({}), canary)), ("canary", ""));
        assert_eq!(
            strategy_labels(&ro(
                json!({}),
                json!({"canary": {"trafficRouting": {"smi": {}}}})
            )),
            ("canary", "SMI")
        );
        assert_eq!(
            strategy_labels(&ro(json!({}), json!({"blueGreen": {"activeService": "x"}}))),
            ("blueGreen", "")
        );
    }

    #[test]
    fn request_series_are_bounded() {
        let m = Metrics::new("v");
        for i in 0..(MAX_REQUEST_SERIES + 10) {
            m.count_request(req("pods", "a", &format!("p{i}"), "Get"), "200");
        }
        assert_eq!(lock(&m.requests).len(), MAX_REQUEST_SERIES);
        assert_eq!(
            m.requests_matching(|i, _| i.name == "p0"),
            0,
            "oldest evicted"
        );
    }

    #[test]
    fn analysis_run_series_follow_argo() {
        let run: AnalysisRun = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-abc-2", "namespace": "shop"},
            "spec": {"metrics": [
                {"name": "rate", "provider": {"prometheus": {"query": "up"}}},
                {"name": "probe", "provider": {"web": {"url": "http://x"}}}
            ]},
            "status": {"phase": "Inconclusive", "metricResults": [
                {"name": "rate", "phase": "Inconclusive"},
                {"name": "probe", "phase": "Successful", "dryRun": true}
            ]}
        }))
        .unwrap();
        let mut series = AnalysisRunSeries::default();
        series.add(&run);
        let l = |pairs: &[(&'static str, &str)]| -> Labels {
            pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
        };
        assert_eq!(
            series.info,
            vec![(
                l(&[
                    ("namespace", "shop"),
                    ("name", "demo-abc-2"),
                    ("phase", "Inconclusive")
                ]),
                1
            )]
        );
        assert_eq!(series.phase.len(), 6);
        assert_eq!(series.phase.iter().map(|(_, v)| v).sum::<i64>(), 1);
        assert_eq!(
            series.metric_type[0].0,
            l(&[
                ("namespace", "shop"),
                ("name", "demo-abc-2"),
                ("metric", "rate"),
                ("type", "Prometheus")
            ])
        );
        let on: Vec<&Labels> = series
            .metric_phase
            .iter()
            .filter(|(_, v)| *v == 1)
            .map(|(l, _)| l)
            .collect();
        assert_eq!(
            on,
            vec![
                &l(&[
                    ("namespace", "shop"),
                    ("name", "demo-abc-2"),
                    ("metric", "rate"),
                    ("type", "Prometheus"),
                    ("dry_run", "false"),
                    ("phase", "Inconclusive")
                ]),
                &l(&[
                    ("namespace", "shop"),
                    ("name", "demo-abc-2"),
                    ("metric", "probe"),
                    ("type", "Web"),
                    ("dry_run", "true"),
                    ("phase", "Successful")
                ]),
            ]
        );
    }
}
