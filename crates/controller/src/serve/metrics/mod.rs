//! Prometheus metrics, with Argo Rollouts' names and labels where the same thing is measured:
//!
//! | metric | labels |
//! |---|---|
//! | `rollout_info` (gauge, 1) | namespace, name, strategy, traffic_router, phase |
//! | `rollout_phase` (gauge, 1 for the current phase, else 0; deprecated in Argo) | namespace, name, strategy, phase |
//! | `rollout_info_replicas_{available,unavailable,desired,updated}` | namespace, name |
//! | `rollout_reconcile` (histogram, seconds) | namespace, name |
//! | `rollout_reconcile_error` | namespace, name |
//! | `rollout_events_total` | namespace, name, type, reason |
//! | `notification_send_success`, `notification_send_error` (untyped, Argo's names have no `_total`) | namespace, name, type, reason |
//! | `notification_send` (histogram, seconds) | namespace, name |
//! | `analysis_run_info`, `analysis_run_phase`, `analysis_run_metric_type`, `analysis_run_metric_phase` (gauges) | namespace, name, phase / metric, type, dry_run |
//! | `analysis_run_reconcile` (histogram, seconds), `analysis_run_reconcile_error` | namespace, name |
//! | `analysis_template_info` (gauge, 1; ClusterAnalysisTemplates with an empty namespace) | namespace, name |
//! | `analysis_template_metric_info` (gauge, 1) | namespace, name, type, metric |
//! | `experiment_info` (gauge, 1) | namespace, name, phase |
//! | `experiment_phase` (gauge, 1 for the current phase, else 0) | namespace, name, phase |
//! | `experiment_reconcile` (histogram, seconds) | namespace, name |
//! | `experiment_reconcile_error` | namespace, name |
//! | `controller_clientset_k8s_request_total` | kind, namespace, name, verb, status_code |
//! | `argo_rollouts_controller_info` (gauge, 1) | version |
//! | `build_info` (gauge, 1; `goversion` is empty: there is no Go) | version, goversion, goarch, commit |
//! | `workqueue_adds_total`, `workqueue_retries_total`, `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds` | name (Rollouts, Experiments, AnalysisRuns, Services, Ingresses) |
//! | `process_cpu_seconds_total`, `process_start_time_seconds`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_virtual_memory_max_bytes`, `process_open_fds`, `process_max_fds`, `process_network_{receive,transmit}_bytes_total` | |
//! | `go_memstats_heap_alloc_bytes` (gauge: the allocator's live heap bytes) | |
//! | `sluice_leader` (gauge, 1 while this replica may write) | |
//! | `sluice_rollout_reconcile_seconds` (histogram, all Rollouts together) | |
//! | `sluice_k8s_requests_total` (all objects together) | kind, verb, status_code |
//! | `sluice_k8s_request_duration_seconds` (histogram, the client's own retries included) | verb |
//!
//! The two `sluice_` totals exist beside Argo's per-object series because those are bounded
//! and pruned (their sums drift once series are evicted) and Argo's reconcile buckets start
//! at 10 ms, too coarse to tell a 1 ms reconcile from a 9 ms one. The request durations show
//! what no status code does: kube's client retries 429, 503 and 504 answers itself, so a
//! throttled or stalled API server makes requests slow, not failed.
//!
//! Rollout, AnalysisRun and Experiment gauges are read from the watch caches at scrape time,
//! as Argo does, so they vanish with their object. Counters and histograms of a Rollout are dropped at the first scrape after
//! it left the cache, together with the request series of the objects named after it (its
//! ReplicaSets `<name>-<hash>`, pods, events `<name>.<id>`): cardinality follows what exists.
//!
//! The state lives here; `argo` holds Argo's label rules, `exposition` the encoder,
//! `requests` the layer that counts API requests, `workqueue` the loops' work and `process`
//! the process's figures.

mod argo;
mod exposition;
pub mod process;
mod requests;
pub mod workqueue;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::experiment::Experiment;

pub use argo::{AnalysisRunSeries, ExperimentSeries, RequestInfo, info_phase};
pub use requests::{RequestMetrics, RequestMetricsLayer};

use crate::cache::CachedRollout;
use argo::derives_from;
use exposition::Exposition;
pub use workqueue::{Queue, Queues, Work};

/// Argo Rollouts' buckets for reconcile durations (seconds).
const RECONCILE_BUCKETS: [f64; 5] = [0.01, 0.15, 0.25, 0.5, 1.0];

/// Buckets of `sluice_rollout_reconcile_seconds`: fine below 10 ms, where a reconcile that
/// only reads caches lands.
const FINE_RECONCILE_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// Buckets of `sluice_k8s_request_duration_seconds`: a healthy API server answers in
/// milliseconds; the upper ones are what throttling and a stalled etcd look like.
const REQUEST_BUCKETS: [f64; 10] = [0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

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
    /// Notifications sent (true) and failed (false): (type, reason, sent) -> count.
    notifications: BTreeMap<(String, String, bool), u64>,
    /// Time of each notification send (`notification_send`), once there was one.
    notification_send: Option<Histogram>,
}

impl RolloutSeries {
    fn new() -> RolloutSeries {
        RolloutSeries {
            reconcile: Histogram::new(RECONCILE_BUCKETS),
            errors: 0,
            events: BTreeMap::new(),
            notifications: BTreeMap::new(),
            notification_send: None,
        }
    }
}

#[derive(Debug)]
struct RequestSeries {
    count: u64,
    last_used: u64,
}

/// The request series by labels, and the same keys by when they were last used, so that the
/// least recently used one is evicted without a scan of every series (there is one per object
/// and verb: at ten thousand Rollouts the bound is reached, and every request evicts).
#[derive(Debug, Default)]
struct RequestSeriesMap {
    series: BTreeMap<(RequestInfo, String), RequestSeries>,
    by_use: BTreeMap<u64, (RequestInfo, String)>,
}

impl RequestSeriesMap {
    fn iter(&self) -> impl Iterator<Item = (&(RequestInfo, String), &RequestSeries)> {
        self.series.iter()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        debug_assert_eq!(self.series.len(), self.by_use.len());
        self.series.len()
    }

    /// Counts one request of `key` at tick `now`, evicting the least recently used series
    /// beyond `max`.
    fn count(&mut self, key: (RequestInfo, String), now: u64, max: usize) {
        match self.series.get_mut(&key) {
            Some(series) => {
                self.by_use.remove(&series.last_used);
                series.count += 1;
                series.last_used = now;
            }
            None => {
                self.series.insert(
                    key.clone(),
                    RequestSeries {
                        count: 1,
                        last_used: now,
                    },
                );
            }
        }
        self.by_use.insert(now, key);
        while self.series.len() > max {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.series.remove(&oldest);
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&(RequestInfo, String)) -> bool) {
        let by_use = &mut self.by_use;
        self.series.retain(|key, series| {
            let kept = keep(key);
            if !kept {
                by_use.remove(&series.last_used);
            }
            kept
        });
    }
}

/// The controller's metrics; shared by the reconciler, the HTTP client layers and the server.
#[derive(Debug)]
pub struct Metrics {
    version: String,
    leader: AtomicBool,
    /// The Rollout cache, once it has synced.
    rollouts: OnceLock<Store<CachedRollout>>,
    /// The AnalysisRun cache, once it has synced.
    analysis_runs: OnceLock<Store<AnalysisRun>>,
    /// The Experiment cache, once it has synced.
    experiments: OnceLock<Store<Experiment>>,
    /// The AnalysisTemplate cache, and the ClusterAnalysisTemplate one where it is watched.
    templates: OnceLock<(
        Store<AnalysisTemplate>,
        Option<Store<ClusterAnalysisTemplate>>,
    )>,
    queues: Arc<Queues>,
    per_run: Mutex<BTreeMap<RolloutKey, RolloutSeries>>,
    per_rollout: Mutex<BTreeMap<RolloutKey, RolloutSeries>>,
    per_experiment: Mutex<BTreeMap<RolloutKey, RolloutSeries>>,
    requests: Mutex<RequestSeriesMap>,
    /// (kind, verb, status) -> count, never pruned.
    request_totals: Mutex<BTreeMap<(String, String, String), u64>>,
    /// verb -> how long requests took, never pruned (a handful of verbs).
    request_durations: Mutex<BTreeMap<String, Histogram>>,
    /// Every Rollout reconcile, in [`FINE_RECONCILE_BUCKETS`].
    reconcile_all: Histogram,
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
            experiments: OnceLock::new(),
            templates: OnceLock::new(),
            queues: Arc::default(),
            per_run: Mutex::new(BTreeMap::new()),
            per_rollout: Mutex::new(BTreeMap::new()),
            per_experiment: Mutex::new(BTreeMap::new()),
            requests: Mutex::default(),
            request_totals: Mutex::new(BTreeMap::new()),
            request_durations: Mutex::new(BTreeMap::new()),
            reconcile_all: Histogram::new(FINE_RECONCILE_BUCKETS),
            request_clock: AtomicU64::new(0),
            registry: OnceLock::new(),
        });
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Exposition(Arc::downgrade(&metrics))));
        let _ = metrics.registry.set(registry);
        metrics
    }

    /// Rollout gauges come from this cache; call once it has synced.
    pub fn use_rollout_cache(&self, store: Store<CachedRollout>) {
        let _ = self.rollouts.set(store);
    }

    /// AnalysisRun gauges come from this cache; call once it has synced.
    pub fn use_analysis_run_cache(&self, store: Store<AnalysisRun>) {
        let _ = self.analysis_runs.set(store);
    }

    /// Experiment gauges come from this cache; call once it has synced.
    pub fn use_experiment_cache(&self, store: Store<Experiment>) {
        let _ = self.experiments.set(store);
    }

    /// Template gauges come from these caches; call once they have synced.
    pub fn use_template_caches(
        &self,
        templates: Store<AnalysisTemplate>,
        cluster_templates: Option<Store<ClusterAnalysisTemplate>>,
    ) {
        let _ = self.templates.set((templates, cluster_templates));
    }

    /// Records a reconcile of `queue` beginning (`workqueue_*`); it ends when the guard drops.
    pub fn begin_work(&self, queue: Queue) -> Work {
        self.queues.begin(queue)
    }

    /// Records one AnalysisRun reconcile (`analysis_run_reconcile`, `..._error`).
    pub fn observe_run_reconcile(&self, namespace: &str, name: &str, took: Duration, failed: bool) {
        self.queues.finish(Queue::AnalysisRuns, took, failed);
        observe(&self.per_run, namespace, name, took, failed);
    }

    /// Records one Experiment reconcile (`experiment_reconcile`, `..._error`).
    pub fn observe_experiment_reconcile(
        &self,
        namespace: &str,
        name: &str,
        took: Duration,
        failed: bool,
    ) {
        self.queues.finish(Queue::Experiments, took, failed);
        observe(&self.per_experiment, namespace, name, took, failed);
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.store(leading, Ordering::Relaxed);
    }

    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    pub fn observe_reconcile(&self, namespace: &str, name: &str, took: Duration, failed: bool) {
        self.reconcile_all.observe(took.as_secs_f64());
        self.queues.finish(Queue::Rollouts, took, failed);
        observe(&self.per_rollout, namespace, name, took, failed);
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

    /// Counts a notification sent (`notification_send_success`) or failed
    /// (`notification_send_error`) for an event of `type_` and `reason` of a Rollout.
    pub fn count_notification(
        &self,
        namespace: &str,
        name: &str,
        type_: &str,
        reason: &str,
        sent: bool,
    ) {
        let mut map = lock(&self.per_rollout);
        let series = map
            .entry((namespace.to_string(), name.to_string()))
            .or_insert_with(RolloutSeries::new);
        *series
            .notifications
            .entry((type_.to_string(), reason.to_string(), sent))
            .or_default() += 1;
    }

    /// Records how long a notification send took (`notification_send`, Argo's buckets).
    pub fn observe_notification_send(&self, namespace: &str, name: &str, took: Duration) {
        let mut map = lock(&self.per_rollout);
        let series = map
            .entry((namespace.to_string(), name.to_string()))
            .or_insert_with(RolloutSeries::new);
        series
            .notification_send
            .get_or_insert_with(|| Histogram::new(RECONCILE_BUCKETS))
            .observe(took.as_secs_f64());
    }

    /// Counts a request that got a response with `status` (or `"error"` when none came back).
    pub fn count_request(&self, info: RequestInfo, status: &str) {
        *lock(&self.request_totals)
            .entry((info.kind.clone(), info.verb.clone(), status.to_string()))
            .or_default() += 1;
        // Taken under the lock, so that ticks are in the order the series are touched.
        let mut map = lock(&self.requests);
        let now = self.request_clock.fetch_add(1, Ordering::Relaxed);
        map.count((info, status.to_string()), now, MAX_REQUEST_SERIES);
    }

    /// Records how long a request of `verb` took, to its answer (a watch: to its first bytes).
    pub fn observe_request_duration(&self, verb: &str, took: Duration) {
        lock(&self.request_durations)
            .entry(verb.to_string())
            .or_insert_with(|| Histogram::new(REQUEST_BUCKETS))
            .observe(took.as_secs_f64());
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

    fn live_rollouts(&self) -> Option<Vec<Arc<CachedRollout>>> {
        self.rollouts.get().map(Store::state)
    }

    fn live_analysis_runs(&self) -> Vec<Arc<AnalysisRun>> {
        self.analysis_runs
            .get()
            .map(Store::state)
            .unwrap_or_default()
    }

    /// Every AnalysisTemplate and ClusterAnalysisTemplate as (namespace, name, metrics); a
    /// ClusterAnalysisTemplate has no namespace.
    fn live_templates(&self) -> Vec<(String, String, Vec<sluice_api::analysis::Metric>)> {
        let Some((templates, cluster)) = self.templates.get() else {
            return Vec::new();
        };
        let mut out: Vec<_> = templates
            .state()
            .iter()
            .map(|t| {
                (
                    t.namespace().unwrap_or_default(),
                    t.name_any(),
                    t.spec.metrics.clone().unwrap_or_default(),
                )
            })
            .collect();
        for t in cluster.iter().flat_map(Store::state) {
            out.push((
                String::new(),
                t.name_any(),
                t.spec.metrics.clone().unwrap_or_default(),
            ));
        }
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    fn live_experiments(&self) -> Vec<Arc<Experiment>> {
        self.experiments.get().map(Store::state).unwrap_or_default()
    }

    fn prune(&self) {
        retain_live(self.analysis_runs.get(), &self.per_run);
        retain_live(self.experiments.get(), &self.per_experiment);
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
        lock(&self.requests).retain(|(info, _)| {
            // The object belongs to the Rollout with the longest name it derives from: its
            // name, or its name cut at a '-' or '.', looked up from the longest down (a
            // lookup per cut, not a scan of every Rollout per series).
            let known = |name: &str| {
                let key = (info.namespace.clone(), name.to_string());
                (live.contains(&key) || gone.contains(&key)).then_some(key)
            };
            let cuts = info
                .name
                .char_indices()
                .filter(|(_, c)| *c == '-' || *c == '.')
                .map(|(i, _)| &info.name[..i]);
            let owner = std::iter::once(info.name.as_str())
                .chain(cuts.rev())
                .find_map(known);
            debug_assert!(
                owner
                    .as_ref()
                    .is_none_or(|(_, name)| derives_from(&info.name, name))
            );
            !owner.is_some_and(|key| gone.contains(&key))
        });
    }
}

/// Adds one reconcile to the series of `namespace/name` in `map`.
fn observe(
    map: &Mutex<BTreeMap<RolloutKey, RolloutSeries>>,
    namespace: &str,
    name: &str,
    took: Duration,
    failed: bool,
) {
    let mut map = lock(map);
    let series = map
        .entry((namespace.to_string(), name.to_string()))
        .or_insert_with(RolloutSeries::new);
    series.reconcile.observe(took.as_secs_f64());
    if failed {
        series.errors += 1;
    }
}

/// Drops the series of objects no longer in `store` (nothing before the cache has synced).
fn retain_live<K>(store: Option<&Store<K>>, map: &Mutex<BTreeMap<RolloutKey, RolloutSeries>>)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let Some(store) = store else {
        return;
    };
    let live: BTreeSet<RolloutKey> = store
        .state()
        .iter()
        .map(|o| (o.namespace().unwrap_or_default(), o.name_any()))
        .collect();
    lock(map).retain(|key, _| live.contains(key));
}

#[cfg(test)]
mod tests;
