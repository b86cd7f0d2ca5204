//! The Rollout reconciler: watches and caches, then for one Rollout the shared [`driver`]
//! (observe its world, let the engine decide, apply the plan), and events. Conflicts are
//! expected under concurrency and lead to a quick, quiet retry with fresh state.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::experiment::Experiment;
use sluice_engine::labels::{CONTROLLER_INSTANCE_ID, MANAGED_BY, POD_TEMPLATE_HASH};
use sluice_engine::observed::TemplateKey;
use sluice_engine::{EventType, Observed, Plan};
use tracing::{debug, info, warn};

use crate::args::Args;
use crate::cache::{self, CachedReplicaSet, Caches, IndexedStore};
use crate::cluster::{KubeCluster, WriteError};
use crate::loops::Hooks;
use crate::loops::apply::apply_plan_counting;
use crate::loops::driver;
use crate::loops::events::EventPublisher;

pub struct Context {
    writer: KubeCluster,
    /// The cached ReplicaSets, by their controller's uid.
    replica_sets: IndexedStore<CachedReplicaSet>,
    /// The other caches the writer reads from.
    caches: Caches,
    events: EventPublisher,
    /// Hands the published events to the notifications loop.
    notifier: crate::loops::notifications::Notifier,
    rollouts: Store<Rollout>,
    /// Rollouts already announced with `RolloutAddedToInformer` by this process.
    announced: Mutex<Announced>,
    resync: Duration,
    settings: sluice_engine::Settings,
    /// Since when each Rollout has progress held back (`--status-write-interval`).
    held: driver::HeldProgress,
    hooks: Hooks,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("write failed: {0}")]
    Write(#[from] WriteError),
    /// A cached ReplicaSet whose text is no ReplicaSet (the API server stores none such).
    #[error("cannot decode the cached ReplicaSet {name}: {source}")]
    CachedReplicaSet {
        name: String,
        source: serde_json::Error,
    },
}

/// Label selector for the objects this instance manages (Argo's rule: without an instance id,
/// objects that carry one belong to somebody else).
pub fn instance_selector(instance_id: &str) -> String {
    if instance_id.is_empty() {
        format!("!{CONTROLLER_INSTANCE_ID}")
    } else {
        format!("{CONTROLLER_INSTANCE_ID}={instance_id}")
    }
}

/// Where the Rollout loop's ReplicaSet watch sends the Experiments whose ReplicaSets changed
/// (the Experiment loop reconciles them).
pub type ExperimentTriggers = futures::channel::mpsc::UnboundedSender<ObjectRef<Experiment>>;

/// Tells the Experiment loop of a changed ReplicaSet that an Experiment controls.
fn tell_experiments(to_experiments: &ExperimentTriggers, rs: &CachedReplicaSet) {
    let Some(ns) = rs.meta().namespace.as_deref() else {
        return;
    };
    for owner in rs.meta().owner_references.iter().flatten() {
        if owner.controller == Some(true)
            && owner.kind == "Experiment"
            && owner.api_version.starts_with("argoproj.io/")
        {
            // Only a stopped Experiment loop closes the channel: nothing to tell then.
            let _ = to_experiments.unbounded_send(ObjectRef::new(&owner.name).within(ns));
        }
    }
}

/// Runs the reconciler alone: it always writes and stops on SIGINT/SIGTERM.
pub async fn run(client: Client, args: &Args) -> anyhow::Result<()> {
    crate::loops::run_all(client, args, Hooks::standalone()).await
}

/// Runs the reconciler inside the controller process: writes only
/// while `hooks.gate` is open, reports metrics and readiness, stops on `hooks.stop`. Changes of
/// ReplicaSets an Experiment owns go to `to_experiments`.
pub async fn run_with(
    client: Client,
    args: &Args,
    hooks: Hooks,
    to_experiments: ExperimentTriggers,
) -> anyhow::Result<()> {
    let namespace = args.namespaced.then(|| {
        args.namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string())
    });
    if let Some(ns) = &namespace {
        info!(namespace = %ns, "watching one namespace");
    }
    let ns = namespace.as_deref();

    // Only ReplicaSets that carry the pod-template-hash label can belong to a Rollout: caching
    // just those keeps memory proportional to what we manage. They are kept in their cached
    // form (compact JSON, no managed fields) and decoded when a reconcile reads them.
    let (rs_cache, rs_writer) = cache::indexed(cache::controller_uids);
    let rs_stream = cache::reflect(
        watcher(
            api_in::<CachedReplicaSet>(&client, ns),
            watcher::Config::default().labels(POD_TEMPLATE_HASH),
        )
        .default_backoff(),
        rs_writer,
    )
    .touched_objects()
    .inspect_ok(move |rs| tell_experiments(&to_experiments, rs));

    // The Rollout cache is made here, not by the Controller, so that changes of the Services
    // and templates a Rollout names can be mapped to it.
    let (ro_cache, ro_writer) = cache::indexed(rollout_keys);
    let ro_stream = cache::reflect(
        watcher(
            api_in::<Rollout>(&client, ns),
            watcher::Config::default().labels(&instance_selector(&args.instance_id)),
        )
        .default_backoff()
        .modify(cache::drop_managed_fields),
        ro_writer,
    )
    .touched_objects();
    let ro_reader = ro_cache.store().clone();

    // What a reconcile reads besides ReplicaSets, each from one watch that both fills its
    // cache and triggers the Rollouts concerned.
    let (svc_cache, svc_writer) = cache::indexed(cache::managed_by_keys);
    let svc_stream = cache::reflect(
        watcher(api_in::<Service>(&client, ns), watcher::Config::default())
            .default_backoff()
            .modify(cache::drop_unread_metadata),
        svc_writer,
    )
    .touched_objects();
    // Only runs a Rollout made (they carry rollout-type).
    let (run_cache, run_writer) = cache::indexed(cache::controller_uids);
    let run_stream = cache::reflect(
        watcher(
            api_in::<AnalysisRun>(&client, ns),
            watcher::Config::default().labels(sluice_engine::analysis::ROLLOUT_TYPE),
        )
        .default_backoff()
        .modify(cache::drop_managed_fields),
        run_writer,
    )
    .touched_objects();
    let (exp_cache, exp_writer) = cache::indexed(cache::controller_uids);
    let exp_stream = cache::reflect(
        watcher(
            api_in::<Experiment>(&client, ns),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(cache::drop_managed_fields),
        exp_writer,
    )
    .touched_objects();
    let (template_cache, template_writer) = reflector::store();
    let template_stream = watcher(
        api_in::<AnalysisTemplate>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(cache::drop_unread_metadata)
    .reflect(template_writer)
    .touched_objects();
    // Argo starts no ClusterAnalysisTemplate informer in namespaced mode (nor may a namespaced
    // install list them).
    let cluster_templates = namespace.is_none().then(|| {
        let (cache, writer) = reflector::store();
        let stream = watcher(
            Api::<ClusterAnalysisTemplate>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(cache::drop_unread_metadata)
        .reflect(writer)
        .touched_objects();
        (cache, stream)
    });
    let caches = Caches {
        services: svc_cache,
        analysis_runs: run_cache,
        analysis_templates: template_cache,
        cluster_analysis_templates: cluster_templates.as_ref().map(|(c, _)| c.clone()),
        experiments: exp_cache,
    };
    hooks.watch_template_caches(
        caches.analysis_templates.clone(),
        caches.cluster_analysis_templates.clone(),
    );

    // Notifications read their configuration from the controller's namespace (the watched one
    // with --namespaced), and with --self-service-notification-enabled also from each
    // Rollout's namespace, as Argo does.
    let (notifier, notifications) = crate::loops::notifications::start(
        client.clone(),
        namespace
            .clone()
            .unwrap_or_else(crate::config::controller_namespace),
        hooks.gate.clone(),
        hooks.metrics.clone(),
        ro_reader.clone(),
        // With --namespaced the watched namespace's configuration is the Rollouts' own already
        // (and other namespaces may not be readable).
        args.argo.self_service_notification_enabled && namespace.is_none(),
    );
    let ctx = Arc::new(Context {
        writer: KubeCluster::with_gate(client.clone(), hooks.gate.clone())
            .with_router_versions(args.router_versions())
            .with_caches(caches.clone()),
        replica_sets: rs_cache,
        caches,
        events: EventPublisher::new(client.clone(), std::env::var("POD_NAME").ok()),
        notifier,
        rollouts: ro_reader.clone(),
        announced: Mutex::default(),
        resync: args.resync(),
        settings: args.engine_settings(),
        held: driver::HeldProgress::default(),
        hooks: hooks.clone(),
    });

    let controller = Controller::for_stream(ro_stream, ro_reader.clone())
        .owns_stream(rs_stream)
        // A template that appears or changes re-evaluates the Rollouts that name it at once (a
        // Rollout waiting for a missing template is InvalidSpec until then).
        .watches_stream(
            template_stream,
            referencing_rollouts::<AnalysisTemplate>(ro_cache.clone(), false),
        )
        // A run's verdict moves its Rollout on, and so does an experiment step's.
        .owns_stream(run_stream)
        .owns_stream(exp_stream)
        // A Service that appears or changes re-evaluates the Rollouts that name it or whose
        // managed-by annotation it carries.
        .watches_stream(svc_stream, rollouts_of_service(ro_cache.clone()))
        .with_config(ControllerConfig::default().concurrency(args.rollout_threads))
        // A new leader reconciles everything: as a follower it decided nothing.
        .reconcile_all_on(hooks.gate.acquisitions());
    let controller = match cluster_templates {
        Some((_, stream)) => controller.watches_stream(
            stream,
            referencing_rollouts::<ClusterAnalysisTemplate>(ro_cache, true),
        ),
        None => controller,
    };
    let controller = hooks.with_shutdown(controller);
    hooks.watch_caches(controller.store(), ctx.replica_sets.store().clone());

    let reconciles = controller
        .run(observed_reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(rollout = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile failed"),
            }
        });
    // The notifications loop runs as long as the reconciles do.
    tokio::select! {
        () = reconciles => {}
        () = notifications => {}
    }
    info!("controller stopped");
    Ok(())
}

/// An `Api` of one namespace, or of all.
fn api_in<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The keys a Rollout is filed under in the Rollout cache: the Services ([`service_key`]) and
/// analysis templates ([`template_key`]) it names, so that a change of one finds the Rollouts
/// to reconcile without looking at every Rollout.
fn rollout_keys(ro: &Rollout) -> Vec<String> {
    let ns = ro.metadata.namespace.as_deref().unwrap_or_default();
    let services = Observed::service_names(ro);
    let templates = Observed::analysis_template_refs(ro);
    services
        .iter()
        .map(|name| service_key(ns, name))
        .chain(templates.iter().map(|key| template_key(ns, key)))
        .collect()
}

/// The key of the Rollouts naming a template: an AnalysisTemplate of `namespace`, or a
/// ClusterAnalysisTemplate (whatever the namespace).
fn template_key(namespace: &str, key: &TemplateKey) -> String {
    if key.cluster_scope {
        format!("ClusterAnalysisTemplate/{}", key.name)
    } else {
        format!("AnalysisTemplate/{namespace}/{}", key.name)
    }
}

/// The key of the Rollouts naming Service `name` of `namespace`.
fn service_key(namespace: &str, name: &str) -> String {
    format!("Service/{namespace}/{name}")
}

/// Maps a Service to the Rollouts that name it and to the one its managed-by annotation names
/// (which may have to give it back).
fn rollouts_of_service(
    rollouts: IndexedStore<Rollout>,
) -> impl Fn(Service) -> Vec<ObjectRef<Rollout>> + Send + Sync + 'static {
    move |svc: Service| {
        let ns = svc.namespace().unwrap_or_default();
        let mut found = rollouts.refs(&service_key(&ns, &svc.name_any()));
        let managed_by = svc.annotations().get(MANAGED_BY);
        if let Some(owner) = managed_by.filter(|o| !o.is_empty()) {
            found.push(ObjectRef::new(owner).within(&ns));
        }
        found
    }
}

/// Maps a template to the Rollouts that name it: in its namespace for an AnalysisTemplate,
/// in every namespace for a ClusterAnalysisTemplate.
fn referencing_rollouts<T>(
    rollouts: IndexedStore<Rollout>,
    cluster_scope: bool,
) -> impl Fn(T) -> Vec<ObjectRef<Rollout>> + Send + Sync + 'static
where
    T: Resource,
{
    move |template: T| {
        let key = TemplateKey {
            cluster_scope,
            name: template.name_any(),
        };
        let namespace = template.namespace().unwrap_or_default();
        rollouts.refs(&template_key(&namespace, &key))
    }
}

/// The Rollout's ReplicaSets, found by its uid rather than by a scan of every cached one, and
/// decoded whole from their cached form.
fn owned_replica_sets(
    cache: &IndexedStore<CachedReplicaSet>,
    ro: &Rollout,
) -> Result<Vec<ReplicaSet>, ReconcileError> {
    let Some(uid) = ro.metadata.uid.as_deref() else {
        return Ok(Vec::new());
    };
    cache
        .find(uid)
        .into_iter()
        .filter(|rs| driver::controls(ro, rs.meta()))
        .map(|rs| {
            rs.to_replica_set()
                .map_err(|source| ReconcileError::CachedReplicaSet {
                    name: rs.name_any(),
                    source,
                })
        })
        .collect()
}

/// [`reconcile`], timed and counted for the metrics (only when it may act).
async fn observed_reconcile(ro: Arc<Rollout>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if !ctx.hooks.gate.is_open() {
        return reconcile(ro, ctx).await;
    }
    let _work = ctx.hooks.begin_work(crate::serve::metrics::Queue::Rollouts);
    let started = std::time::Instant::now();
    let result = reconcile(ro.clone(), ctx.clone()).await;
    ctx.hooks
        .observe_reconcile(&ro, started.elapsed(), result.is_err());
    result
}

async fn reconcile(ro: Arc<Rollout>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if ro.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // A follower keeps its caches warm but decides nothing; it reconciles everything when it
    // becomes the leader. The plan is pinned to this term: if leadership is lost (or lost and
    // regained) meanwhile, its remaining writes are refused.
    let Some(term) = ctx.hooks.gate.term() else {
        return Ok(Action::await_change());
    };
    // Deciding on a half-filled ReplicaSet cache could mistake a running update for a first
    // deploy (and a half-filled Service or template cache a valid spec for an invalid one), so
    // nothing is decided before every cache has listed everything once.
    if !crate::cache::store_ready(ctx.replica_sets.store()).await || !ctx.caches.ready().await {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    announce(&ctx, &ro).await;
    let replica_sets = owned_replica_sets(&ctx.replica_sets, &ro)?;
    let pinned = ctx.writer.for_term(term);
    let rollout: &Rollout = &ro;
    // What a plan that stops at its status patch has written, so that the events of those
    // writes are not lost with it.
    let actions_done = AtomicUsize::new(0);
    let stopped_plan = Mutex::new(None::<Plan>);
    let apply = |plan: Plan| {
        let (done, stopped) = (&actions_done, &stopped_plan);
        async move {
            let result = apply_plan_counting(&pinned, rollout, &plan, done).await;
            if result.is_err() {
                *stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(plan);
            }
            result
        }
    };
    let now = Timestamp::now();
    let result = driver::reconcile(
        &ctx.writer,
        &ro,
        replica_sets,
        now,
        &ctx.settings,
        &ctx.held,
        apply,
    )
    .await;
    match result {
        Ok((plan, applied)) => {
            if applied.writes > 0 {
                debug!(rollout = %ro.name_any(), writes = applied.writes, "applied plan");
            }
            publish_events(&ctx, &ro, plan.events.iter()).await;
            Ok(driver::requeue(&Ok(plan), ctx.resync).into())
        }
        Err(e) => {
            let stopped = stopped_plan
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(plan) = stopped
                && actions_done.load(Ordering::Relaxed) == plan.actions.len()
            {
                let writes = plan.events.iter().filter(|e| e.reports_a_write());
                publish_events(&ctx, &ro, writes).await;
            }
            stopped_outcome(&ro, e)
        }
    }
}

/// Publishes a reconcile's events on the Rollout (and counts them for the metrics).
async fn publish_events<'a>(
    ctx: &Context,
    ro: &Rollout,
    events: impl Iterator<Item = &'a sluice_engine::Event>,
) {
    let reference = ro.object_ref(&());
    for ev in events {
        info!(rollout = %ro.name_any(), namespace = ro.namespace().unwrap_or_default(), reason = ev.reason, "{}", ev.message);
        let type_name = match ev.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        ctx.hooks.count_event(ro, type_name, ev.reason);
        if let Err(e) = ctx
            .events
            .publish(&reference, ev.type_, ev.reason, &ev.message)
            .await
        {
            debug!(error = %e, "could not publish event");
        }
        ctx.notifier.fired(ro, ev.type_, ev.reason, &ev.message);
    }
}

/// How a reconcile whose plan stopped goes on.
fn stopped_outcome(ro: &Rollout, e: WriteError) -> Result<Action, ReconcileError> {
    match e.expected_outcome() {
        Some(action) => {
            debug!(rollout = %ro.name_any(), reason = %e, "plan stopped; the rollout is looked at again");
            Ok(action)
        }
        None => Err(e.into()),
    }
}

/// Argo announces every Rollout its informer adds (at creation, and for every Rollout when a
/// controller starts leading) with `RolloutAddedToInformer`; so does the first reconcile of a
/// Rollout in this process.
async fn announce(ctx: &Context, ro: &Rollout) {
    let Some(uid) = ro.metadata.uid.clone() else {
        return;
    };
    if ctx
        .announced
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .uids
        .contains(&uid)
    {
        return;
    }
    let message = format!(
        "Rollout resource added to informer: {}/{}",
        ro.namespace().unwrap_or_default(),
        ro.name_any()
    );
    let published = ctx
        .events
        .publish(
            &ro.object_ref(&()),
            EventType::Normal,
            ADDED_TO_INFORMER,
            &message,
        )
        .await;
    if let Err(e) = published {
        debug!(error = %e, "could not publish event");
        return;
    }
    ctx.hooks.count_event(ro, "Normal", ADDED_TO_INFORMER);
    let mut announced = ctx.announced.lock().unwrap_or_else(|p| p.into_inner());
    announced.uids.insert(uid);
    // Forget deleted Rollouts once the set has doubled since it was last pruned: it stays
    // about the size of the cache, at a constant cost per announcement (reading the whole
    // cache on every one would cost the square of the Rollouts).
    if announced.uids.len() > announced.prune_at {
        let live = ctx.rollouts.state();
        let uids: HashSet<&str> = live
            .iter()
            .filter_map(|r| r.metadata.uid.as_deref())
            .collect();
        announced.uids.retain(|u| uids.contains(u.as_str()));
        announced.prune_at = 2 * announced.uids.len() + 64;
    }
}

/// The Rollouts this process has announced, by uid, and the size at which the deleted ones
/// are next forgotten.
#[derive(Debug, Default)]
struct Announced {
    uids: HashSet<String>,
    prune_at: usize,
}

/// The reason of the event announcing a Rollout the controller has started to follow.
pub const ADDED_TO_INFORMER: &str = "RolloutAddedToInformer";

fn error_policy(ro: Arc<Rollout>, err: &ReconcileError, _ctx: Arc<Context>) -> Action {
    warn!(rollout = %ro.name_any(), namespace = ro.namespace().unwrap_or_default(), error = %err, "reconcile failed, retrying");
    Action::requeue(driver::ERROR_RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_replica_set_change_is_told_to_the_experiment_that_controls_it() {
        let rs = |owners: serde_json::Value| {
            let rs: ReplicaSet = serde_json::from_value(json!({
                "metadata": {"name": "rs", "namespace": "ns", "ownerReferences": owners}
            }))
            .unwrap();
            CachedReplicaSet::from_replica_set(&rs).unwrap()
        };
        let owner = |kind: &str, name: &str, controller: bool| {
            json!({"apiVersion": "argoproj.io/v1alpha1", "kind": kind, "name": name,
                   "uid": "u", "controller": controller})
        };
        let (tx, mut rx) = futures::channel::mpsc::unbounded();
        tell_experiments(&tx, &rs(json!([owner("Experiment", "exp", true)])));
        tell_experiments(&tx, &rs(json!([owner("Rollout", "ro", true)])));
        tell_experiments(
            &tx,
            &rs(json!([owner("Experiment", "not-controller", false)])),
        );
        drop(tx);
        let told: Vec<_> = futures::executor::block_on_stream(&mut rx).collect();
        assert_eq!(told, [ObjectRef::<Experiment>::new("exp").within("ns")]);
    }

    fn rollout(ns: &str, name: &str, strategy: serde_json::Value) -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": name, "namespace": ns, "uid": format!("{ns}-{name}")},
            "spec": {"strategy": strategy}
        }))
        .unwrap()
    }

    fn service(ns: &str, name: &str, managed_by: Option<&str>) -> Service {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns,
            "annotations": managed_by.map(|m| json!({MANAGED_BY: m}))}}))
        .unwrap()
    }

    fn names(mut refs: Vec<ObjectRef<Rollout>>) -> Vec<String> {
        refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        refs.into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
            .collect()
    }

    #[test]
    fn a_service_change_reaches_the_rollouts_that_name_or_manage_it() {
        let rollouts = cache::listed(
            rollout_keys,
            vec![
                rollout(
                    "a",
                    "bg",
                    json!({"blueGreen": {"activeService": "web", "previewService": "web-preview"}}),
                ),
                rollout(
                    "a",
                    "canary",
                    json!({"canary": {"stableService": "web", "canaryService": "web-canary"}}),
                ),
                rollout("b", "bg", json!({"blueGreen": {"activeService": "web"}})),
                rollout("a", "plain", json!({"canary": {}})),
            ],
        );
        let map = rollouts_of_service(rollouts);
        assert_eq!(names(map(service("a", "web", None))), ["a/bg", "a/canary"]);
        assert_eq!(names(map(service("a", "web-canary", None))), ["a/canary"]);
        assert_eq!(names(map(service("b", "web", None))), ["b/bg"]);
        assert!(map(service("a", "unnamed", None)).is_empty());
        // A Service a Rollout no longer names, still carrying its managed-by annotation.
        assert_eq!(names(map(service("a", "old-active", Some("bg")))), ["a/bg"]);
    }

    #[test]
    fn a_template_change_reaches_the_rollouts_that_name_it() {
        let analysis = |name: &str, kind: Option<&str>| {
            json!({"canary": {"analysis": {"templates": [
                {"templateName": name, "clusterScope": kind == Some("cluster")}
            ]}}})
        };
        let rollouts = cache::listed(
            rollout_keys,
            vec![
                rollout("a", "uses-t", analysis("t", None)),
                rollout("b", "uses-t", analysis("t", None)),
                rollout("a", "uses-cluster-t", analysis("t", Some("cluster"))),
                rollout("b", "uses-cluster-t", analysis("t", Some("cluster"))),
                rollout(
                    "a",
                    "in-a-step",
                    json!({"canary": {"steps": [{"analysis": {"templates": [{"templateName": "t"}]}}]}}),
                ),
                rollout("a", "none", json!({"canary": {}})),
            ],
        );
        let template: AnalysisTemplate = serde_json::from_value(
            json!({"metadata": {"name": "t", "namespace": "a"}, "spec": {}}),
        )
        .unwrap();
        let map = referencing_rollouts::<AnalysisTemplate>(rollouts.clone(), false);
        assert_eq!(names(map(template)), ["a/in-a-step", "a/uses-t"]);
        let cluster_template: ClusterAnalysisTemplate =
            serde_json::from_value(json!({"metadata": {"name": "t"}, "spec": {}})).unwrap();
        let map = referencing_rollouts::<ClusterAnalysisTemplate>(rollouts, true);
        assert_eq!(
            names(map(cluster_template)),
            ["a/uses-cluster-t", "b/uses-cluster-t"]
        );
    }

    #[test]
    fn a_rollout_is_filed_again_when_the_services_it_names_change() {
        let (store, writer) = cache::indexed(rollout_keys);
        let before = rollout("a", "bg", json!({"blueGreen": {"activeService": "old"}}));
        let after = rollout("a", "bg", json!({"blueGreen": {"activeService": "new"}}));
        let events = futures::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(before)),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(after)),
        ]);
        let _: Vec<_> = futures::executor::block_on(cache::reflect(events, writer).collect());
        let map = rollouts_of_service(store);
        assert!(map(service("a", "old", None)).is_empty());
        assert_eq!(names(map(service("a", "new", None))), ["a/bg"]);
    }
}
