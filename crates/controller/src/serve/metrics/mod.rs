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
//!
//! The two `sluice_` totals exist beside Argo's per-object series because those are bounded
//! and pruned (their sums drift once series are evicted) and Argo's reconcile buckets start
//! at 10 ms, too coarse to tell a 1 ms reconcile from a 9 ms one.
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
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::experiment::Experiment;

pub use argo::{AnalysisRunSeries, ExperimentSeries, RequestInfo, info_phase, strategy_labels};
pub use requests::{RequestMetrics, RequestMetricsLayer};

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
    rollouts: OnceLock<Store<Rollout>>,
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
    pub fn use_rollout_cache(&self, store: Store<Rollout>) {
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
mod tests {
    use super::argo::tests::{req, rollout};
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

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
        m.count_notification("a", "web", "Normal", "RolloutPaused", true);
        m.observe_notification_send("a", "web", Duration::from_millis(200));
        m.count_notification("a", "web", "Normal", "RolloutCompleted", false);
        m.count_notification("a", "web", "Normal", "RolloutCompleted", false);
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
            r#"notification_send_success{namespace="a",name="web",type="Normal",reason="RolloutPaused"} 1"#
        ), "{text}");
        assert!(text.contains(
            r#"notification_send_error{namespace="a",name="web",type="Normal",reason="RolloutCompleted"} 2"#
        ), "{text}");
        assert!(
            text.contains(r#"notification_send_count{namespace="a",name="web"} 1"#),
            "{text}"
        );
        assert!(
            !text.contains(r#"notification_send_count{namespace="a",name="web-api"}"#),
            "{text}"
        );
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
        // The totals keep what the deleted Rollout's series counted.
        assert!(
            text.contains(r#"sluice_rollout_reconcile_seconds_count 3"#),
            "{text}"
        );
        assert!(text.contains(r#"sluice_rollout_reconcile_seconds_bucket{le="0.001"} 1"#));
        assert!(text.contains(
            r#"sluice_k8s_requests_total{kind="replicasets",verb="Patch",status_code="200"} 2"#
        ));
        assert!(text.contains(
            r#"sluice_k8s_requests_total{kind="rollouts",verb="Patch",status_code="409"} 1"#
        ));
    }

    #[test]
    fn experiments_are_exposed_with_argo_names_until_deleted() {
        let m = Metrics::new("v");
        let text = m.render();
        assert!(series_lines(&text, "experiment_").is_empty(), "{text}");

        let (reader, mut writer) = reflector::store::<Experiment>();
        let exp = |name: &str, status: serde_json::Value| -> Experiment {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "a"},
                "spec": {"templates": [{"name": "baseline"}]},
                "status": status
            }))
            .unwrap()
        };
        let running = exp("exp-1", json!({"phase": "Running"}));
        writer.apply_watcher_event(&Event::Apply(running.clone()));
        writer.apply_watcher_event(&Event::Apply(exp("exp-2", json!({}))));
        m.use_experiment_cache(reader);
        m.observe_experiment_reconcile("a", "exp-1", Duration::from_millis(20), false);
        m.observe_experiment_reconcile("a", "exp-1", Duration::from_millis(30), true);

        let text = m.render();
        assert!(
            text.contains(r#"experiment_info{namespace="a",name="exp-1",phase="Running"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"experiment_info{namespace="a",name="exp-2",phase="Pending"} 1"#));
        assert!(text.contains("# TYPE experiment_info gauge"));
        assert!(text.contains("# TYPE experiment_phase gauge"));
        assert!(text.contains(r#"experiment_phase{namespace="a",name="exp-1",phase="Running"} 1"#));
        assert!(
            text.contains(r#"experiment_phase{namespace="a",name="exp-1",phase="Successful"} 0"#)
        );
        assert_eq!(
            series_lines(&text, "experiment_phase{").len(),
            12,
            "six phases per Experiment: {text}"
        );
        assert!(text.contains(r#"experiment_reconcile_count{namespace="a",name="exp-1"} 2"#));
        assert!(text.contains(r#"experiment_reconcile_error{namespace="a",name="exp-1"} 1"#));

        writer.apply_watcher_event(&Event::Delete(running));
        let text = m.render();
        assert!(
            series_lines(&text, "experiment_")
                .iter()
                .all(|l| !l.contains(r#"name="exp-1""#)),
            "{text}"
        );
        assert_eq!(series_lines(&text, "experiment_info{").len(), 1);
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
        // A series used again is the newest: the next evictions take the ones after it.
        m.count_request(req("pods", "a", "p10", "Get"), "200");
        for i in 0..5 {
            m.count_request(req("pods", "b", &format!("q{i}"), "Get"), "200");
        }
        assert_eq!(lock(&m.requests).len(), MAX_REQUEST_SERIES);
        assert_eq!(m.requests_matching(|i, _| i.name == "p10"), 2);
        for i in 11..16 {
            assert_eq!(
                m.requests_matching(|i2, _| i2.name == format!("p{i}")),
                0,
                "p{i}"
            );
        }
        assert_eq!(m.requests_matching(|i, _| i.name == "p16"), 1);
    }

    #[test]
    fn argo_families_of_a_fresh_controller_are_served() {
        let m = Metrics::new("v1.2.3");
        let (reader, mut writer) = reflector::store::<AnalysisTemplate>();
        let template: AnalysisTemplate = serde_json::from_value(json!({
            "metadata": {"name": "rate", "namespace": "shop"},
            "spec": {"metrics": [{"name": "ok", "provider": {"web": {"url": "http://x"}}}]}
        }))
        .unwrap();
        writer.apply_watcher_event(&Event::Apply(template));
        m.use_template_caches(reader, None);
        let (ro_reader, mut ro_writer) = reflector::store::<Rollout>();
        ro_writer.apply_watcher_event(&Event::Apply(rollout(
            "a",
            "web",
            json!({"status": {"conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}}),
        )));
        m.use_rollout_cache(ro_reader);
        let work = m.begin_work(Queue::Rollouts);
        m.observe_reconcile("a", "web", Duration::from_millis(2), true);
        let text = m.render();
        for line in [
            r#"analysis_template_info{namespace="shop",name="rate"} 1"#,
            r#"analysis_template_metric_info{namespace="shop",name="rate",type="Web",metric="ok"} 1"#,
            r#"rollout_phase{namespace="a",name="web",strategy="canary",phase="Completed"} 1"#,
            r#"rollout_phase{namespace="a",name="web",strategy="canary",phase="Paused"} 0"#,
            r#"workqueue_adds_total{name="Rollouts"} 1"#,
            r#"workqueue_retries_total{name="Rollouts"} 1"#,
            r#"workqueue_adds_total{name="Ingresses"} 0"#,
            r#"workqueue_work_duration_seconds_count{name="Rollouts"} 1"#,
            r#"workqueue_work_duration_seconds_bucket{le="0.01",name="Rollouts"} 1"#,
            r#"workqueue_work_duration_seconds_count{name="Services"} 0"#,
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        assert!(text.contains(r#"build_info{version="v1.2.3",goversion="",goarch=""#));
        for name in [
            "workqueue_unfinished_work_seconds{name=\"Rollouts\"}",
            "workqueue_longest_running_processor_seconds{name=\"Rollouts\"}",
            "process_cpu_seconds_total ",
            "process_start_time_seconds ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_virtual_memory_max_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "go_memstats_heap_alloc_bytes ",
        ] {
            assert!(text.contains(name), "{name} missing:\n{text}");
        }
        drop(work);
    }
}
