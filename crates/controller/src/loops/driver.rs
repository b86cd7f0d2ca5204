//! One reconcile of a Rollout, free of kube's runtime types: which ReplicaSets are the
//! Rollout's, observe → decide → apply, and when to look at the Rollout again. The controller's
//! Rollout loop and the simulator both run exactly this; only their plumbing differs (caches,
//! clocks, the client behind [`ClusterAccess`]).

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::Rollout;
use sluice_engine::{Plan, Settings, StepPluginAnswer, StepPluginCall};

use super::apply::Applied;
use super::observe::observe;
use crate::cluster::{ClusterAccess, WriteError};
// The requeue policy of a write that failed belongs to the cluster access; the Rollout
// loop and the simulator name it through the driver.
pub use crate::cluster::requeue::{ERROR_RETRY, Requeue, STALE_RETRY, requeue_after_error};

/// Whether `rs` belongs to `rollout`: the Rollout is its controller owner (by uid, which also
/// tells apart a namesake created since) in the same namespace.
pub fn owns(rollout: &Rollout, rs: &ReplicaSet) -> bool {
    controls(rollout, &rs.metadata)
}

/// [`owns`], for an object of which only the metadata is at hand.
pub fn controls(rollout: &Rollout, object: &ObjectMeta) -> bool {
    let uid = rollout.metadata.uid.as_deref();
    object.namespace == rollout.metadata.namespace
        && object
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
}

/// What makes the calls of canary `plugin` steps: Argo's step plugins through the plugin host
/// in the controller, a stand-in in the simulator.
pub trait StepPlugins: Send + Sync {
    /// Makes `call` of the plugin for `rollout`. A call that gets no answer is an answer of
    /// phase Error saying why.
    fn call(
        &self,
        rollout: &Rollout,
        call: &StepPluginCall,
    ) -> impl Future<Output = StepPluginAnswer> + Send;
}

/// Rounds of step plugin calls within one reconcile: a step that completes may lead to the
/// next plugin step (or to an abort's calls) at once, but never without bound.
const PLUGIN_ROUNDS: usize = 4;

/// Observes the Rollout's world through `cluster` (its `replica_sets` come from a cache),
/// lets the engine decide with `settings` and what `held` remembers of the Rollout, makes the
/// step plugin calls the decision asks for through `plugins` (deciding again with their
/// answers), and has `apply` execute the plan. Returns the plan and what applying it did.
#[allow(clippy::too_many_arguments)]
pub async fn reconcile<C, P, A, F>(
    cluster: &C,
    plugins: &P,
    rollout: &Rollout,
    replica_sets: Vec<ReplicaSet>,
    now: Timestamp,
    settings: &Settings,
    held: &HeldProgress,
    apply: A,
) -> Result<(Plan, Applied), WriteError>
where
    C: ClusterAccess,
    P: StepPlugins,
    A: FnOnce(Plan) -> F,
    F: Future<Output = Result<Applied, WriteError>>,
{
    let mut observed = observe(cluster, rollout, replica_sets, now).await?;
    let uid = rollout.metadata.uid.as_deref().unwrap_or_default();
    observed.progress_held_since = held.since(uid);
    let mut plan = sluice_engine::reconcile_with(&observed, settings);
    for _ in 0..PLUGIN_ROUNDS {
        if plan.step_plugin_calls.is_empty() {
            break;
        }
        for call in &plan.step_plugin_calls {
            let answer = plugins.call(rollout, call).await;
            observed.step_plugin_answers.push(answer);
        }
        plan = sluice_engine::reconcile_with(&observed, settings);
    }
    if !plan.step_plugin_calls.is_empty() {
        // Left for the next reconcile, at once.
        plan.requeue_after = Some(Duration::from_secs(1));
    }
    held.record(uid, plan.progress_held, now);
    let applied = apply(plan.clone()).await?;
    Ok((plan, applied))
}

/// Since when each Rollout has had a status change that only reports progress held back
/// (`Plan::progress_held`), by uid: the one thing the engine is told that the cluster does not
/// show. An entry goes when the Rollout's status is next written or found up to date; entries
/// of Rollouts deleted meanwhile are swept once they are older than any hold can be.
#[derive(Debug, Default)]
pub struct HeldProgress {
    since: std::sync::Mutex<HeldEntries>,
}

#[derive(Debug, Default)]
struct HeldEntries {
    by_uid: std::collections::HashMap<String, Timestamp>,
    swept: Option<Timestamp>,
}

/// How old an entry may grow before a sweep takes it: far beyond any status write interval,
/// so only a Rollout that is gone (never reconciled again) loses one.
const HELD_ENTRY_LIFETIME: jiff::SignedDuration = jiff::SignedDuration::from_secs(600);

impl HeldProgress {
    /// When the Rollout with `uid` first had progress held back, if it still has.
    pub fn since(&self, uid: &str) -> Option<Timestamp> {
        self.lock().by_uid.get(uid).copied()
    }

    /// Notes a plan's outcome at `now`: held back (kept from the first hold), or not.
    pub fn record(&self, uid: &str, held: bool, now: Timestamp) {
        let mut entries = self.lock();
        if !held {
            entries.by_uid.remove(uid);
            return;
        }
        entries.by_uid.entry(uid.to_string()).or_insert(now);
        let due = entries
            .swept
            .is_none_or(|at| now.duration_since(at) > HELD_ENTRY_LIFETIME);
        if due {
            entries
                .by_uid
                .retain(|_, since| now.duration_since(*since) <= HELD_ENTRY_LIFETIME);
            entries.swept = Some(now);
        }
    }

    /// How many Rollouts have progress held back.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().by_uid.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HeldEntries> {
        self.since.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The Rollouts whose last reconcile met a stale view (a 409, or an object gone), by uid: the
/// next reconcile of each reads the Rollout's ReplicaSets from the API server rather than
/// from the cache, which may lag the write that beat it by seconds. Without it a Rollout
/// whose ReplicaSet kept changing under it (a tool annotating it, an HPA) retried from the
/// same stale copy until the watch caught up, and lost the next race the same way.
///
/// The Rollout itself still comes from its cache: a decision on a Rollout newer than the one
/// the next reconcile finds there could be undone by it (a revision counted twice), while a
/// ReplicaSet view that goes back only meets more conflicts, as every write derived from a
/// ReplicaSet carries its resourceVersion.
#[derive(Debug, Default)]
pub struct StaleViews {
    uids: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl StaleViews {
    /// Notes how the reconcile of the Rollout with `uid` ended.
    pub fn note<T>(&self, uid: &str, result: &Result<T, WriteError>) {
        if matches!(result, Err(WriteError::Conflict | WriteError::NotFound)) {
            self.lock().insert(uid.to_string());
        }
    }

    /// Whether the next reconcile of the Rollout with `uid` reads afresh; asking forgets.
    pub fn take(&self, uid: &str) -> bool {
        self.lock().remove(uid)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.uids.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The ReplicaSets `rollout` owns as the API server has them now, not as a cache does:
/// listed by the Rollout's selector (which every one of them matches), kept by owner.
pub async fn read_replica_sets_afresh<C: ClusterAccess>(
    cluster: &C,
    rollout: &Rollout,
) -> Result<Vec<ReplicaSet>, WriteError> {
    let namespace = rollout.metadata.namespace.as_deref().unwrap_or_default();
    let selector = rollout
        .spec
        .selector
        .as_ref()
        .map(sluice_api::label_selector::format_selector)
        .unwrap_or_default();
    Ok(cluster
        .list_replica_sets_matching(namespace, &selector)
        .await?
        .into_iter()
        .filter(|rs| owns(rollout, rs))
        .collect())
}

/// The ReplicaSets a reconcile decides on: `cached` (those the cache shows the Rollout
/// owning), or with `afresh` (its last reconcile met a stale view, [`StaleViews::take`])
/// those the API server has now; the cached ones again if that read fails.
pub async fn replica_sets_to_decide_on<C: ClusterAccess>(
    cluster: &C,
    rollout: &Rollout,
    cached: Vec<ReplicaSet>,
    afresh: bool,
) -> Vec<ReplicaSet> {
    if !afresh {
        return cached;
    }
    match read_replica_sets_afresh(cluster, rollout).await {
        Ok(fresh) => fresh,
        Err(e) => {
            tracing::debug!(
                rollout = rollout.metadata.name.as_deref().unwrap_or_default(),
                error = %e,
                "cannot list ReplicaSets afresh; deciding from the cache"
            );
            cached
        }
    }
}

/// The requeue policy: after a plan, when it asks (a pause or deadline expiring) or at the
/// resync period at the latest; after a failure, as [`requeue_after_error`] says.
pub fn requeue(result: &Result<Plan, WriteError>, resync: Duration) -> Requeue {
    match result {
        Ok(plan) => Requeue::After(plan.requeue_after.map_or(resync, |d| d.min(resync))),
        Err(e) => requeue_after_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(namespace: &str, owner_uid: &str, controller: bool) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "r-1", "namespace": namespace, "ownerReferences": [{
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "r",
                "uid": owner_uid, "controller": controller
            }]}
        }))
        .unwrap()
    }

    #[test]
    fn a_rollout_owns_what_it_controls_by_uid_in_its_namespace() {
        let ro: Rollout = serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "r", "namespace": "a", "uid": "u1"},
            "spec": {}
        }))
        .unwrap();
        assert!(owns(&ro, &rs("a", "u1", true)));
        assert!(!owns(&ro, &rs("a", "u2", true)), "a namesake's");
        assert!(!owns(&ro, &rs("a", "u1", false)), "not the controller");
        assert!(!owns(&ro, &rs("b", "u1", true)), "another namespace");
    }

    #[test]
    fn held_progress_is_remembered_from_the_first_hold_until_a_plan_holds_nothing() {
        let held = HeldProgress::default();
        let t = |s: i64| Timestamp::from_second(1_800_000_000 + s).unwrap();
        assert_eq!(held.since("u1"), None);
        held.record("u1", true, t(0));
        held.record("u1", true, t(3));
        assert_eq!(held.since("u1"), Some(t(0)), "kept from the first hold");
        held.record("u2", true, t(3));
        held.record("u1", false, t(5));
        assert_eq!(held.since("u1"), None, "written");
        assert_eq!(held.since("u2"), Some(t(3)));
        // A Rollout deleted while it had progress held is swept once its entry is old.
        held.record("u3", true, t(2000));
        assert_eq!(held.since("u2"), None);
        assert_eq!(held.len(), 1);
    }

    #[test]
    fn a_stale_view_has_the_next_reconcile_read_afresh_once() {
        let stale = StaleViews::default();
        stale.note("u1", &Ok::<(), WriteError>(()));
        stale.note("u2", &Err::<(), _>(WriteError::Api("boom".into())));
        stale.note("u3", &Err::<(), _>(WriteError::NotLeader));
        assert!(!stale.take("u1") && !stale.take("u2") && !stale.take("u3"));
        stale.note("u1", &Err::<(), _>(WriteError::Conflict));
        stale.note("u2", &Err::<(), _>(WriteError::NotFound));
        assert!(stale.take("u1") && stale.take("u2"));
        assert!(!stale.take("u1"), "asking forgets");
    }

    /// Read afresh through the real client: the ReplicaSets by the selector's labels (not
    /// every ReplicaSet of the namespace), only those the Rollout owns kept.
    #[tokio::test]
    async fn reading_afresh_lists_the_replica_sets_by_label() {
        use crate::cluster::KubeCluster;
        use std::sync::{Arc, Mutex};
        let sent = Arc::new(Mutex::new(Vec::<String>::new()));
        let record = sent.clone();
        let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            record
                .lock()
                .unwrap()
                .push(format!("{} {}", req.method(), req.uri()));
            let mut other = rs("a", "u2", true);
            other.metadata.name = Some("r-2".into());
            let body = json!({"apiVersion": "apps/v1", "kind": "ReplicaSetList",
                              "metadata": {}, "items": [rs("a", "u1", true), other]});
            async move {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(body.to_string().into_bytes()))
                        .unwrap(),
                )
            }
        });
        let cluster = KubeCluster::new(kube::Client::new(service, "default"));
        let ro: Rollout = serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "r", "namespace": "a", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "r"}}}
        }))
        .unwrap();
        let owned = read_replica_sets_afresh(&cluster, &ro).await.unwrap();
        let names: Vec<_> = owned.iter().map(|rs| rs.metadata.name.clone()).collect();
        assert_eq!(names, [Some("r-1".to_string())]);
        let sent = sent.lock().unwrap();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(
            sent[0].starts_with("GET /apis/apps/v1/namespaces/a/replicasets?")
                && sent[0].contains("labelSelector=app%3Dr"),
            "{sent:?}"
        );
    }

    #[test]
    fn requeue_policy() {
        let resync = Duration::from_secs(900);
        let plan = |after: Option<u64>| Plan {
            requeue_after: after.map(Duration::from_secs),
            ..Default::default()
        };
        assert_eq!(requeue(&Ok(plan(None)), resync), Requeue::After(resync));
        assert_eq!(
            requeue(&Ok(plan(Some(3))), resync),
            Requeue::After(Duration::from_secs(3))
        );
        assert_eq!(
            requeue(&Ok(plan(Some(5000))), resync),
            Requeue::After(resync)
        );
        assert_eq!(
            requeue(&Err(WriteError::Conflict), resync),
            Requeue::After(STALE_RETRY)
        );
        assert_eq!(
            requeue(&Err(WriteError::NotFound), resync),
            Requeue::After(STALE_RETRY)
        );
        assert_eq!(
            requeue(&Err(WriteError::NotLeader), resync),
            Requeue::AwaitChange
        );
        assert_eq!(
            requeue(&Err(WriteError::Api("boom".into())), resync),
            Requeue::After(ERROR_RETRY)
        );
    }

    /// A canary Rollout with a stable and a canary Service and background analysis, as it is
    /// once its first revision is out: its ReplicaSet fully available, both Services
    /// selecting it, and the status the reconciles before it wrote.
    mod settled {
        use super::*;
        use crate::cache::{Caches, controller_uids, listed, managed_by_keys};
        use crate::cluster::KubeCluster;
        use crate::cluster::tests::recording_client;
        use crate::loops::apply::apply_plan;
        use crate::loops::observe::observe;
        use k8s_openapi::api::core::v1::Service;
        use kube::runtime::reflector;
        use kube::runtime::watcher;
        use sluice_api::analysis::AnalysisTemplate;
        use sluice_engine::Action;
        use sluice_engine::labels::{MANAGED_BY, POD_TEMPLATE_HASH};

        fn rollout() -> Rollout {
            serde_json::from_value(json!({
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                "metadata": {"name": "web", "namespace": "ns", "uid": "uid-web",
                             "generation": 1, "resourceVersion": "10"},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "app", "image": "app:v1"}]}
                    },
                    "strategy": {"canary": {
                        "stableService": "web-stable", "canaryService": "web-canary",
                        "analysis": {"templates": [{"templateName": "success-rate"}]},
                        "steps": [{"setWeight": 50}, {"pause": {}}]
                    }}
                }
            }))
            .unwrap()
        }

        fn available(mut rs: ReplicaSet) -> ReplicaSet {
            let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            rs.metadata.generation = Some(1);
            rs.metadata.resource_version = Some("20".into());
            rs.metadata.uid = Some("uid-rs".into());
            rs.status = Some(
                serde_json::from_value(json!({
                    "replicas": replicas, "readyReplicas": replicas,
                    "availableReplicas": replicas, "observedGeneration": 1
                }))
                .unwrap(),
            );
            rs
        }

        fn service(name: &str, hash: &str) -> Service {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "30",
                             "annotations": {MANAGED_BY: "web"}},
                "spec": {"selector": {"app": "web", POD_TEMPLATE_HASH: hash}}
            }))
            .unwrap()
        }

        fn caches(hash: &str) -> Caches {
            let template: AnalysisTemplate = serde_json::from_value(json!({
                "metadata": {"name": "success-rate", "namespace": "ns"},
                "spec": {"metrics": [{"name": "m", "provider": {"web": {"url": "http://x"}}}]}
            }))
            .unwrap();
            let (templates, mut writer) = reflector::store();
            for event in [
                watcher::Event::Init,
                watcher::Event::InitApply(template),
                watcher::Event::InitDone,
            ] {
                writer.apply_watcher_event(&event);
            }
            let (cluster_templates, mut writer) = reflector::store();
            writer.apply_watcher_event(&watcher::Event::Init);
            writer.apply_watcher_event(&watcher::Event::InitDone);
            Caches {
                services: listed(
                    managed_by_keys,
                    vec![service("web-stable", hash), service("web-canary", hash)],
                ),
                analysis_runs: listed(controller_uids, Vec::new()),
                analysis_templates: templates,
                cluster_analysis_templates: Some(cluster_templates),
                experiments: listed(controller_uids, Vec::new()),
            }
        }

        #[tokio::test]
        async fn a_reconcile_that_changes_nothing_sends_no_request() {
            let now = Timestamp::from_second(1_800_000_000).unwrap();
            let mut ro = rollout();
            let hash = sluice_engine::pod_hash::template_hash(&ro).unwrap();
            let replica_sets = vec![available(sluice_engine::replicaset::build(
                &ro, &hash, 1, 3, None,
            ))];
            let (client, sent) = recording_client();
            let cluster = KubeCluster::new(client).with_caches(caches(&hash));

            // The reconciles that brought it there: what they wrote to the Rollout, taken as
            // the API server would have (the ReplicaSet and Services are already as wanted).
            let mut settled = false;
            for _ in 0..5 {
                let observed = observe(&cluster, &ro, replica_sets.clone(), now)
                    .await
                    .unwrap();
                let plan = sluice_engine::reconcile(&observed);
                for action in &plan.actions {
                    let Action::AnnotateRollout { annotations, .. } = action else {
                        panic!("unexpected {action:?}");
                    };
                    let ours = ro.metadata.annotations.get_or_insert_with(Default::default);
                    for (k, v) in annotations {
                        match v {
                            Some(v) => ours.insert(k.clone(), v.clone()),
                            None => ours.remove(k),
                        };
                    }
                }
                let status = Some(plan.status.clone());
                settled = plan.actions.is_empty() && status == ro.status;
                if settled {
                    break;
                }
                ro.status = status;
            }
            assert!(settled, "did not settle: {:#?}", ro.status);
            let status = ro.status.as_ref().unwrap();
            assert_eq!(status.stable_rs.as_deref(), Some(hash.as_str()));
            assert_eq!(
                status.phase,
                Some(sluice_api::rollout::RolloutPhase::Healthy),
                "{status:#?}"
            );

            let settings = Settings::default();
            let held = HeldProgress::default();
            let apply = |plan: Plan| {
                let (cluster, ro) = (&cluster, &ro);
                async move { apply_plan(cluster, ro, &plan).await }
            };
            let disabled = Default::default();
            let plugins = crate::loops::step_plugins::HostStepPlugins {
                host: None,
                disabled: &disabled,
            };
            let (plan, applied) = reconcile(
                &cluster,
                &plugins,
                &ro,
                replica_sets,
                now,
                &settings,
                &held,
                apply,
            )
            .await
            .unwrap();
            assert!(plan.actions.is_empty(), "{:?}", plan.actions);
            assert_eq!(applied, Applied::default(), "no write, not even the status");
            assert!(
                sent.lock().unwrap().is_empty(),
                "requests sent: {:?}",
                sent.lock().unwrap()
            );
        }
    }
}
