//! The Rollout reconciler: watches and caches, then for one Rollout the shared [`driver`]
//! (observe its world, let the engine decide, apply the plan), and events. Conflicts are
//! expected under concurrency and lead to a quick, quiet retry with fresh state.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt as _, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplate, Secret, Service};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::experiment::Experiment;
use sluice_engine::labels::POD_TEMPLATE_HASH;
use sluice_engine::workload::WorkloadKind;
use sluice_engine::{EventType, Plan};
use tracing::{debug, info};

use crate::args::Args;
use crate::cache::{
    self, CachedReplicaSet, CachedRollout, Caches, IndexedStore, TouchedWhenCached as _,
};
use crate::cluster::router_plugins::RouterPlugins;
use crate::cluster::{KubeCluster, WriteError};
use crate::loops::Hooks;
use crate::loops::harness::{self, Reconciler};
mod triggers;

pub use triggers::ExperimentTriggers;
use triggers::{
    referencing_rollouts, rollout_keys, rollouts_of_driven, rollouts_of_service,
    rollouts_of_workload, tell_experiments,
};

use crate::loops::apply::apply_plan_counting;
use crate::loops::driver;
use crate::loops::event_queue::EventQueue;
use crate::loops::events::EventPublisher;
use crate::loops::own_writes::{self, OwnWrites};
use crate::loops::scope::{api_in, instance_selector, watched_namespace};
use crate::loops::step_plugins::HostStepPlugins;
use crate::serve::metrics::Queue;

pub struct Context {
    writer: KubeCluster,
    /// The cached ReplicaSets, by their controller's uid.
    replica_sets: IndexedStore<CachedReplicaSet>,
    /// The other caches the writer reads from.
    caches: Caches,
    events: EventQueue,
    /// Hands the published events to the notifications loop.
    notifier: crate::loops::notifications::Notifier,
    rollouts: Store<CachedRollout>,
    /// Rollouts already announced with `RolloutAddedToInformer` by this process.
    announced: Mutex<Announced>,
    resync: Duration,
    settings: sluice_engine::Settings,
    /// Since when each Rollout has progress held back (`--status-write-interval`).
    held: driver::HeldProgress,
    /// The Rollouts written whose watch events have not come yet.
    own_writes: OwnWrites,
    /// The Rollouts whose next reconcile reads afresh.
    stale: driver::StaleViews,
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
    /// A cached Rollout whose template text is no pod template (it was written from one).
    #[error("cannot decode the cached Rollout's pod template: {0}")]
    CachedRollout(serde_json::Error),
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
    let namespace = watched_namespace(&client, args);
    if let Some(ns) = &namespace {
        info!(namespace = %ns, "watching one namespace");
    }
    let ns = namespace.as_deref();

    // Only ReplicaSets that carry the pod-template-hash label can belong to a Rollout: caching
    // just those keeps memory proportional to what we manage. They are kept in their cached
    // form (compact JSON, no managed fields) and decoded when a reconcile reads them.
    let (rs_cache, rs_writer) = cache::indexed(cache::controller_uids);
    let rs_stream = cache::reflect(
        cache::watch(
            api_in::<CachedReplicaSet>(&client, ns),
            watcher::Config::default().labels(POD_TEMPLATE_HASH),
        )
        .default_backoff(),
        rs_writer,
    )
    .touched_when_cached(rs_cache.store().clone())
    .inspect_ok(move |rs| tell_experiments(&to_experiments, rs));

    // Listed afresh every five minutes besides after errors: a user's change must not stay
    // unseen for longer, whatever a watch lost (a list of 1,000 Rollouts is a few MB).
    const ROLLOUT_RELIST: Duration = Duration::from_secs(300);
    // The Rollout cache is made here, not by the Controller, so that changes of the Services
    // and templates a Rollout names can be mapped to it.
    let (ro_cache, ro_writer) = cache::indexed(rollout_keys);
    let ro_stream = cache::reflect(
        cache::watch_relisting_every(
            // Cached with the pod template as text, decoded by each reconcile.
            api_in::<CachedRollout>(&client, ns),
            watcher::Config::default().labels(&instance_selector(&args.instance_id)),
            ROLLOUT_RELIST,
        )
        .default_backoff(),
        ro_writer,
    )
    .touched_when_cached(ro_cache.store().clone());
    let ro_reader = ro_cache.store().clone();

    // What a reconcile reads besides ReplicaSets, each from one watch that both fills its
    // cache and triggers the Rollouts concerned.
    let (svc_cache, svc_writer) = cache::indexed(cache::managed_by_keys);
    let svc_stream = cache::reflect(
        cache::watch(api_in::<Service>(&client, ns), watcher::Config::default())
            .default_backoff()
            .modify(cache::drop_unread_metadata),
        svc_writer,
    )
    .touched_when_cached(svc_cache.store().clone());
    // Only runs a Rollout made (they carry rollout-type).
    let (run_cache, run_writer) = cache::indexed(cache::controller_uids);
    let run_stream = cache::reflect(
        cache::watch(
            api_in::<AnalysisRun>(&client, ns),
            watcher::Config::default().labels(sluice_engine::analysis::ROLLOUT_TYPE),
        )
        .default_backoff()
        .modify(cache::drop_managed_fields),
        run_writer,
    )
    .touched_when_cached(run_cache.store().clone());
    let (exp_cache, exp_writer) = cache::indexed(cache::controller_uids);
    let exp_stream = cache::reflect(
        cache::watch(
            api_in::<Experiment>(&client, ns),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(cache::drop_managed_fields),
        exp_writer,
    )
    .touched_when_cached(exp_cache.store().clone());
    let (template_cache, template_writer) = reflector::store();
    let template_stream = cache::watch(
        api_in::<AnalysisTemplate>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(cache::drop_unread_metadata)
    .reflect(template_writer)
    .touched_when_cached(template_cache.clone());
    // Argo starts no ClusterAnalysisTemplate informer in namespaced mode (nor may a namespaced
    // install list them).
    let cluster_templates = namespace.is_none().then(|| {
        let (cache, writer) = reflector::store();
        let stream = cache::watch(
            Api::<ClusterAnalysisTemplate>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff()
        .modify(cache::drop_unread_metadata)
        .reflect(writer)
        .touched_when_cached(cache.clone());
        (cache, stream)
    });
    // The workloads a Rollout may take its template from (`workloadRef`): only their metadata
    // is watched, and nothing is kept; a Rollout reads its workload fresh when it reconciles.
    let deployment_stream = cache::watch(
        api_in::<PartialObjectMeta<Deployment>>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    let workload_rs_stream = cache::watch(
        api_in::<PartialObjectMeta<ReplicaSet>>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    let pod_template_stream = cache::watch(
        api_in::<PartialObjectMeta<PodTemplate>>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    // The StatefulSets Rollouts drive (`rollouts.sluice.dev/statefulset`): metadata only, as
    // for workloads; every change (a pod replaced or ready moves its status) wakes them.
    let stateful_set_stream = cache::watch(
        api_in::<PartialObjectMeta<StatefulSet>>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    // The DaemonSets Rollouts drive (`rollouts.sluice.dev/daemonset`), the same way.
    let daemon_set_stream = cache::watch(
        api_in::<PartialObjectMeta<DaemonSet>>(&client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    // With --config-rollouts, the ConfigMaps and Secrets the Rollouts that ask for config
    // rollouts reference: metadata only; a change wakes those Rollouts, which read them fresh.
    let config_map_stream = config_watch::<ConfigMap>(&client, ns, args.config_rollouts);
    let secret_stream = config_watch::<Secret>(&client, ns, args.config_rollouts);
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
        caches.clone(),
        // With --namespaced the watched namespace's configuration is the Rollouts' own already
        // (and other namespaces may not be readable).
        args.argo.self_service_notification_enabled && namespace.is_none(),
    );
    let ctx = Arc::new(Context {
        writer: KubeCluster::with_gate(client.clone(), hooks.gate.clone())
            .with_router_versions(router_versions(args, &hooks))
            .with_router_plugins(Arc::new(RouterPlugins::new(hooks.plugins.clone())))
            .with_config_rollouts(args.config_rollouts)
            .with_caches(caches.clone()),
        replica_sets: rs_cache,
        caches,
        events: EventQueue::start(EventPublisher::new(
            client.clone(),
            std::env::var("POD_NAME").ok(),
        )),
        notifier,
        rollouts: ro_reader.clone(),
        announced: Mutex::default(),
        resync: args.resync(),
        settings: args.engine_settings(),
        held: driver::HeldProgress::default(),
        own_writes: OwnWrites::default(),
        stale: driver::StaleViews::default(),
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
        .watches_stream(
            deployment_stream,
            rollouts_of_workload(ro_cache.clone(), WorkloadKind::Deployment),
        )
        .watches_stream(
            workload_rs_stream,
            rollouts_of_workload(ro_cache.clone(), WorkloadKind::ReplicaSet),
        )
        .watches_stream(
            pod_template_stream,
            rollouts_of_workload(ro_cache.clone(), WorkloadKind::PodTemplate),
        )
        .watches_stream(
            stateful_set_stream,
            rollouts_of_driven(ro_cache.clone(), "StatefulSet"),
        )
        .watches_stream(
            daemon_set_stream,
            rollouts_of_driven(ro_cache.clone(), "DaemonSet"),
        )
        .watches_stream(
            config_map_stream,
            rollouts_of_driven(ro_cache.clone(), "ConfigMap"),
        )
        .watches_stream(
            secret_stream,
            rollouts_of_driven(ro_cache.clone(), "Secret"),
        )
        .with_config(ControllerConfig::default().concurrency(args.rollout_threads));
    let controller = match cluster_templates {
        Some((_, stream)) => controller.watches_stream(
            stream,
            referencing_rollouts::<ClusterAnalysisTemplate>(ro_cache, true),
        ),
        None => controller,
    };
    hooks.watch_caches(controller.store(), ctx.replica_sets.store().clone());

    // The notifications loop runs as long as the reconciles do.
    tokio::select! {
        () = harness::run(controller, ctx) => {}
        () = notifications => {}
    }
    Ok(())
}

/// The metadata watch of ConfigMaps or Secrets for config rollouts; with the feature off, a
/// stream that never yields (nor lists: the controller may not be allowed to).
fn config_watch<K>(
    client: &Client,
    ns: Option<&str>,
    on: bool,
) -> BoxStream<'static, Result<PartialObjectMeta<K>, watcher::Error>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    if !on {
        return futures::stream::pending().boxed();
    }
    cache::watch(
        api_in::<PartialObjectMeta<K>>(client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects()
    .boxed()
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

impl Reconciler for Context {
    type Object = CachedRollout;
    type Error = ReconcileError;
    const QUEUE: Queue = Queue::Rollouts;
    const RETRY: Duration = driver::ERROR_RETRY;

    fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    fn reconcile(
        self: Arc<Self>,
        ro: Arc<CachedRollout>,
    ) -> impl Future<Output = Result<Action, ReconcileError>> + Send {
        reconcile(ro, self)
    }
}

async fn reconcile(
    cached: Arc<CachedRollout>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    if cached.meta().deletion_timestamp.is_some() {
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
    let uid = cached.meta().uid.as_deref().unwrap_or_default();
    let seen_at = cached.meta().resource_version.as_deref();
    if ctx
        .own_writes
        .is_replaced(uid, seen_at, std::time::Instant::now())
    {
        // The watch event of the last write reconciles it again, from what it wrote; this
        // requeue only covers a watch that never shows it.
        debug!(rollout = %cached.name_any(), "waiting for the watch to show the last write");
        return Ok(Action::requeue(own_writes::TRUSTED_FOR));
    }
    let ro = cached.to_rollout().map_err(ReconcileError::CachedRollout)?;
    announce(&ctx, &ro).await;
    let cached_replica_sets = owned_replica_sets(&ctx.replica_sets, &ro)?;
    let afresh = ctx.stale.take(uid);
    let replica_sets =
        driver::replica_sets_to_decide_on(&ctx.writer, &ro, cached_replica_sets, afresh).await;
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
    let plugins = HostStepPlugins {
        host: ctx.hooks.plugins.as_deref(),
        disabled: &ctx.hooks.disabled_step_plugins,
    };
    let result = driver::reconcile(
        &ctx.writer,
        &plugins,
        &ro,
        replica_sets,
        now,
        &ctx.settings,
        &ctx.held,
        apply,
    )
    .await;
    ctx.stale.note(uid, &result);
    match result {
        Ok((plan, applied)) => {
            if !applied.rollout_versions.is_empty() {
                let now = std::time::Instant::now();
                ctx.own_writes
                    .wrote(uid, seen_at, &applied.rollout_versions, now);
            }
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
        ctx.events
            .publish(&reference, ev.type_, ev.reason, &ev.message)
            .await;
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
    // Inline: a Rollout is announced once, so only an announcement that went out counts.
    let published = ctx
        .events
        .publisher()
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
            .filter_map(|r| r.meta().uid.as_deref())
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

/// The router API versions of the flags, and the built-in plugin routers the plugin host runs
/// as binaries instead (a Gateway API entry in `argo-rollouts-config`).
fn router_versions(args: &Args, hooks: &Hooks) -> sluice_routers::kinds::ApiVersions {
    let mut versions = args.router_versions();
    if let Some(host) = &hooks.plugins {
        let name = crate::config::BUILT_IN_TRAFFIC_ROUTER;
        if host.has(sluice_plugins::PluginKind::TrafficRouter, name) {
            versions.plugin_binaries.insert(name.to_owned());
        }
    }
    versions
}
