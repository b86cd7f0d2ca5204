//! The Rollout reconciler: watches and caches, then for one Rollout the shared [`driver`]
//! (observe its world, let the engine decide, apply the plan), and events. Conflicts are
//! expected under concurrency and lead to a quick, quiet retry with fresh state.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_engine::labels::{CONTROLLER_INSTANCE_ID, POD_TEMPLATE_HASH};
use sluice_engine::observed::{TemplateKey, references_template};
use sluice_engine::{EventType, Plan};
use tracing::{debug, info, warn};

use crate::args::Args;
use crate::cache::{self, IndexedStore};
use crate::cluster::{KubeCluster, WriteError};
use crate::loops::apply::apply_plan_counting;
use crate::loops::driver;
use crate::loops::events::EventPublisher;
use crate::runtime::Hooks;

pub struct Context {
    writer: KubeCluster,
    /// The cached ReplicaSets, by their controller's uid.
    replica_sets: IndexedStore<ReplicaSet>,
    events: EventPublisher,
    rollouts: Store<Rollout>,
    /// Rollouts already announced with `RolloutAddedToInformer` by this process, by uid.
    announced: Mutex<HashSet<String>>,
    resync: Duration,
    hooks: Hooks,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("write failed: {0}")]
    Write(#[from] WriteError),
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

/// Runs the reconciler alone: it always writes and stops on SIGINT/SIGTERM.
pub async fn run(client: Client, args: &Args) -> anyhow::Result<()> {
    let hooks = Hooks::standalone();
    let (rollouts, runs, experiments) = tokio::join!(
        run_with(client.clone(), args, hooks.clone()),
        crate::loops::analysis_runs::run_with(client.clone(), args, hooks.clone()),
        crate::loops::experiments::run_with(client, args, hooks),
    );
    rollouts.and(runs).and(experiments)
}

/// Runs the reconciler inside the controller process ([`crate::runtime::start`]): writes only
/// while `hooks.gate` is open, reports metrics and readiness, stops on `hooks.stop`.
pub async fn run_with(client: Client, args: &Args, hooks: Hooks) -> anyhow::Result<()> {
    let (templates, cluster_templates): (
        Api<AnalysisTemplate>,
        Option<Api<ClusterAnalysisTemplate>>,
    ) = if args.namespaced {
        let ns = args
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        (Api::namespaced(client.clone(), &ns), None)
    } else {
        (Api::all(client.clone()), Some(Api::all(client.clone())))
    };
    let (rollouts, replica_sets, runs): (Api<Rollout>, Api<ReplicaSet>, Api<AnalysisRun>) =
        if args.namespaced {
            let ns = args
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string());
            info!(namespace = %ns, "watching one namespace");
            (
                Api::namespaced(client.clone(), &ns),
                Api::namespaced(client.clone(), &ns),
                Api::namespaced(client.clone(), &ns),
            )
        } else {
            (
                Api::all(client.clone()),
                Api::all(client.clone()),
                Api::all(client.clone()),
            )
        };

    // Only ReplicaSets that carry the pod-template-hash label can belong to a Rollout: caching
    // just those keeps memory proportional to what we manage.
    let (rs_cache, rs_writer) = cache::indexed(cache::controller_uids);
    let rs_stream = cache::reflect(
        watcher(
            replica_sets,
            watcher::Config::default().labels(POD_TEMPLATE_HASH),
        )
        .default_backoff(),
        rs_writer,
    )
    .touched_objects();

    // The Rollout cache is made here, not by the Controller, so that template changes can be
    // mapped to the Rollouts that name them.
    let (ro_reader, ro_writer) = reflector::store();
    let ro_stream = watcher(
        rollouts,
        watcher::Config::default().labels(&instance_selector(&args.instance_id)),
    )
    .default_backoff()
    .reflect(ro_writer)
    .touched_objects();

    let ctx = Arc::new(Context {
        writer: KubeCluster::with_gate(client.clone(), hooks.gate.clone())
            .with_router_versions(args.router_versions()),
        replica_sets: rs_cache,
        events: EventPublisher::new(client.clone(), std::env::var("POD_NAME").ok()),
        rollouts: ro_reader.clone(),
        announced: Mutex::new(HashSet::new()),
        resync: args.resync(),
        hooks: hooks.clone(),
    });

    let controller = Controller::for_stream(ro_stream, ro_reader.clone())
        .owns_stream(rs_stream)
        // A template that appears or changes re-evaluates the Rollouts that name it at once (a
        // Rollout waiting for a missing template is InvalidSpec until then).
        .watches(
            templates,
            watcher::Config::default(),
            referencing_rollouts::<AnalysisTemplate>(ro_reader.clone(), false),
        )
        // A run's verdict moves its Rollout on: only runs a Rollout made (they carry rollout-type).
        .owns(
            runs,
            watcher::Config::default().labels(sluice_engine::analysis::ROLLOUT_TYPE),
        )
        .with_config(ControllerConfig::default().concurrency(args.rollout_threads))
        // A new leader reconciles everything: as a follower it decided nothing.
        .reconcile_all_on(hooks.gate.acquisitions());
    // Argo starts no ClusterAnalysisTemplate informer in namespaced mode (nor may a namespaced
    // install list them).
    let controller = match cluster_templates {
        Some(cluster_templates) => controller.watches(
            cluster_templates,
            watcher::Config::default(),
            referencing_rollouts::<ClusterAnalysisTemplate>(ro_reader, true),
        ),
        None => controller,
    };
    let controller = hooks.with_shutdown(controller);
    hooks.watch_caches(controller.store(), ctx.replica_sets.store().clone());

    controller
        .run(observed_reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(rollout = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile failed"),
            }
        })
        .await;
    info!("controller stopped");
    Ok(())
}

/// Maps a template to the Rollouts that name it: in its namespace for an AnalysisTemplate,
/// in every namespace for a ClusterAnalysisTemplate.
fn referencing_rollouts<T>(
    rollouts: Store<Rollout>,
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
        let namespace = template.namespace();
        rollouts
            .state()
            .iter()
            .filter(|ro| cluster_scope || ro.namespace() == namespace)
            .filter(|ro| references_template(ro, &key))
            .map(|ro| ObjectRef::from_obj(ro.as_ref()))
            .collect()
    }
}

/// The Rollout's ReplicaSets, found by its uid rather than by a scan of every cached one.
fn owned_replica_sets(cache: &IndexedStore<ReplicaSet>, ro: &Rollout) -> Vec<ReplicaSet> {
    let Some(uid) = ro.metadata.uid.as_deref() else {
        return Vec::new();
    };
    cache
        .find(uid)
        .into_iter()
        .filter(|rs| driver::owns(ro, rs))
        .map(|rs| (*rs).clone())
        .collect()
}

/// [`reconcile`], timed and counted for the metrics (only when it may act).
async fn observed_reconcile(ro: Arc<Rollout>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if !ctx.hooks.gate.is_open() {
        return reconcile(ro, ctx).await;
    }
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
    // deploy, so nothing is decided before the cache has listed everything once.
    if !crate::runtime::store_ready(ctx.replica_sets.store()).await {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    announce(&ctx, &ro).await;
    let replica_sets = owned_replica_sets(&ctx.replica_sets, &ro);
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
    let result = driver::reconcile(&ctx.writer, &ro, replica_sets, Timestamp::now(), apply).await;
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
    announced.insert(uid);
    // Forget deleted Rollouts now and then, so the set stays the size of the cache.
    let live = ctx.rollouts.state();
    if announced.len() > 2 * live.len() + 64 {
        let uids: HashSet<&str> = live
            .iter()
            .filter_map(|r| r.metadata.uid.as_deref())
            .collect();
        announced.retain(|u| uids.contains(u.as_str()));
    }
}

/// The reason of the event announcing a Rollout the controller has started to follow.
pub const ADDED_TO_INFORMER: &str = "RolloutAddedToInformer";

fn error_policy(ro: Arc<Rollout>, err: &ReconcileError, _ctx: Arc<Context>) -> Action {
    warn!(rollout = %ro.name_any(), namespace = ro.namespace().unwrap_or_default(), error = %err, "reconcile failed, retrying");
    Action::requeue(driver::ERROR_RETRY)
}
