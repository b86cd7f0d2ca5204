//! The Experiment controller: watches Experiments and the AnalysisRuns they own, hears of
//! their ReplicaSets' changes from the Rollout loop's ReplicaSet watch, and has the shared
//! [`experiment_driver`] reconcile each one (observe, let the engine decide, write the plan:
//! ReplicaSets and Services per template, AnalysisRuns, then the status carrying the
//! resourceVersion it was decided on). This loop supplies the leadership term and the clock,
//! and publishes the plan's events.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::cache::TouchedWhenCached as _;
use jiff::Timestamp;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_engine::EventType;
use sluice_engine::experiment::{ExperimentPlan, echo_on_rollout};
use tracing::{debug, info};

use crate::args::Args;
use crate::cluster::KubeCluster;
use crate::cluster::requeue::ERROR_RETRY;
use crate::loops::Hooks;
use crate::loops::events::EventPublisher;
use crate::loops::experiment_driver::{self, ExperimentError, Reconciled};
use crate::loops::harness::{self, Reconciler};
use crate::loops::scope::{api_in, instance_selector, watched_namespace};
use crate::serve::metrics::Queue;

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
    let namespace = watched_namespace(&client, args);
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
    let stream = crate::cache::watch(
        experiments,
        watcher::Config::default().labels(&instance_selector(&args.instance_id)),
    )
    .default_backoff()
    .modify(crate::cache::drop_managed_fields)
    .reflect(writer)
    .applied_when_cached(cache.clone());
    let controller = Controller::for_stream(stream, cache)
        .reconcile_on(replica_set_changes)
        .owns(runs, watcher::Config::default());
    hooks.watch_experiment_cache(controller.store());
    harness::run(controller, ctx).await;
    Ok(())
}

impl Reconciler for Context {
    type Object = Experiment;
    type Error = ExperimentError;
    const QUEUE: Queue = Queue::Experiments;
    const RETRY: Duration = ERROR_RETRY;

    fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    fn reconcile(
        self: Arc<Self>,
        exp: Arc<Experiment>,
    ) -> impl Future<Output = Result<Action, ExperimentError>> + Send {
        reconcile(exp, self)
    }
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
