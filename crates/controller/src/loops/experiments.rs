//! The Experiment controller: watches Experiments and the AnalysisRuns they own, hears of
//! their ReplicaSets' changes from the Rollout loop's ReplicaSet watch, and has the shared
//! [`experiment_driver`] reconcile each one (observe, let the engine decide, write the plan:
//! ReplicaSets and Services per template, AnalysisRuns, then the status carrying the
//! resourceVersion it was decided on). This loop supplies the leadership term and the clock,
//! and publishes the plan's events.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_engine::EventType;
use sluice_engine::experiment::{ExperimentPlan, echo_on_rollout};
use tracing::{debug, info, warn};

use crate::args::Args;
use crate::cluster::KubeCluster;
use crate::loops::Hooks;
use crate::loops::events::EventPublisher;
use crate::loops::experiment_driver::{self, ExperimentError, Reconciled};
use crate::loops::rollouts::instance_selector;

struct Context {
    writer: KubeCluster,
    events: EventPublisher,
    resync: Duration,
    hooks: Hooks,
}

/// Runs the Experiment controller until `hooks` say stop; writes only while the gate is open.
/// `replica_set_changes` names the Experiments whose ReplicaSets changed.
pub async fn run_with(
    client: Client,
    args: &Args,
    hooks: Hooks,
    replica_set_changes: impl futures::Stream<Item = ObjectRef<Experiment>> + Send + 'static,
) -> anyhow::Result<()> {
    let namespace = args.namespaced.then(|| {
        args.namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string())
    });
    let experiments: Api<Experiment> = api_in(&client, namespace.as_deref());
    let runs: Api<AnalysisRun> = api_in(&client, namespace.as_deref());
    let ctx = Arc::new(Context {
        writer: KubeCluster::with_gate(client.clone(), hooks.gate.clone()),
        events: EventPublisher::new(client.clone(), std::env::var("POD_NAME").ok()),
        resync: args.resync(),
        hooks: hooks.clone(),
    });
    // The cache is made here rather than by the Controller, to keep managedFields out of it.
    let (cache, writer) = reflector::store();
    let stream = watcher(
        experiments,
        watcher::Config::default().labels(&instance_selector(&args.instance_id)),
    )
    .default_backoff()
    .modify(crate::cache::drop_managed_fields)
    .reflect(writer)
    .applied_objects();
    let controller = Controller::for_stream(stream, cache)
        .reconcile_on(replica_set_changes)
        .owns(runs, watcher::Config::default())
        .reconcile_all_on(hooks.gate.acquisitions());
    let controller = hooks.with_shutdown(controller);
    hooks.watch_experiment_cache(controller.store());
    controller
        .run(observed_reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(experiment = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "experiment reconcile failed"),
            }
        })
        .await;
    info!("experiment controller stopped");
    Ok(())
}

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

fn error_policy(exp: Arc<Experiment>, err: &ExperimentError, _ctx: Arc<Context>) -> Action {
    warn!(experiment = %exp.name_any(), namespace = exp.namespace().unwrap_or_default(), error = %err, "experiment reconcile failed, retrying");
    Action::requeue(Duration::from_secs(5))
}

/// [`reconcile`], timed for `experiment_reconcile` while this replica leads (a follower only
/// waits, which says nothing of reconcile performance).
async fn observed_reconcile(
    exp: Arc<Experiment>,
    ctx: Arc<Context>,
) -> Result<Action, ExperimentError> {
    if !ctx.hooks.gate.is_open() {
        return reconcile(exp, ctx).await;
    }
    let _work = ctx
        .hooks
        .begin_work(crate::serve::metrics::Queue::Experiments);
    let started = std::time::Instant::now();
    let result = reconcile(exp.clone(), ctx.clone()).await;
    ctx.hooks
        .observe_experiment_reconcile(&exp, started.elapsed(), result.is_err());
    result
}

/// One Experiment through the shared [`experiment_driver`], pinned to the leadership term it
/// was decided in; then its events.
async fn reconcile(exp: Arc<Experiment>, ctx: Arc<Context>) -> Result<Action, ExperimentError> {
    let Some(term) = ctx.hooks.gate.term() else {
        return Ok(Action::await_change());
    };
    let writer = ctx.writer.for_term(term);
    let result = experiment_driver::reconcile(&writer, &exp, Timestamp::now()).await;
    if let Ok(Reconciled::Applied { plan, .. }) = &result {
        publish(&ctx, &exp, plan).await;
    }
    let requeue = experiment_driver::requeue(&result, ctx.resync);
    result.map(|_| requeue.into())
}

/// Publishes the plan's events on the Experiment, and the AnalysisRun ones also on the
/// Rollout that owns it, as Argo does.
async fn publish(ctx: &Context, exp: &Experiment, plan: &ExperimentPlan) {
    let reference = exp.object_ref(&());
    let owner = exp
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "Rollout")
        .map(|o| k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(o.api_version.clone()),
            kind: Some(o.kind.clone()),
            name: Some(o.name.clone()),
            namespace: exp.namespace(),
            uid: Some(o.uid.clone()),
            ..Default::default()
        });
    for ev in &plan.events {
        info!(experiment = %exp.name_any(), namespace = exp.namespace().unwrap_or_default(), reason = ev.reason, "{}", ev.message);
        if let Err(e) = ctx
            .events
            .publish(&reference, ev.type_, ev.reason, &ev.message)
            .await
        {
            debug!(error = %e, "could not publish event");
        }
        if let (Some(owner), Some(echo)) = (&owner, echo_on_rollout(ev)) {
            let _ = ctx
                .events
                .publish(owner, EventType::Warning, echo.reason, &echo.message)
                .await;
        }
    }
}
