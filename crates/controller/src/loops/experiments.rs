//! The Experiment controller: watches Experiments and the AnalysisRuns they own, hears of
//! their ReplicaSets' changes from the Rollout loop's ReplicaSet watch, gathers each one's world, lets the engine decide
//! ([`sluice_engine::experiment::reconcile_experiment`]) and applies the plan: ReplicaSets and
//! Services per template, AnalysisRuns, then the status as a merge patch carrying the
//! resourceVersion it was decided on. A write that fails is reported back to the engine,
//! which amends the status and events as Argo would.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_engine::EventType;
use sluice_engine::experiment::{
    ExperimentAction, ExperimentObserved, ExperimentPlan, WriteFailure, analysis_template_refs,
    echo_on_rollout, reconcile_experiment, record_write_failure,
};
use tracing::{debug, info, warn};

use crate::args::Args;
use crate::cluster::{ClusterAccess, KubeCluster, WriteError};
use crate::loops::Hooks;
use crate::loops::apply::{annotations_patch, merge_diff};
use crate::loops::events::EventPublisher;
use crate::loops::observe::fetch_templates;
use crate::loops::rollouts::instance_selector;

struct Context {
    client: Client,
    writer: KubeCluster,
    events: EventPublisher,
    resync: Duration,
    hooks: Hooks,
}

#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("write failed: {0}")]
    Write(#[from] WriteError),
    #[error("{0}")]
    Undecidable(String),
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
        client,
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

/// One Experiment: observe, decide, apply, publish.
async fn reconcile(exp: Arc<Experiment>, ctx: Arc<Context>) -> Result<Action, ExperimentError> {
    let Some(term) = ctx.hooks.gate.term() else {
        return Ok(Action::await_change());
    };
    let writer = ctx.writer.for_term(term);
    let observed = observe(&ctx, &exp).await?;
    let mut plan = reconcile_experiment(&observed);
    if let Some(err) = plan.error.take() {
        return Err(ExperimentError::Undecidable(err));
    }
    let ns = exp.namespace().unwrap_or_default();
    let name = exp.name_any();
    let actions = std::mem::take(&mut plan.actions);
    for action in &actions {
        if let Err(e) = apply(&writer, &ns, action).await {
            let failure = match &e {
                WriteError::NotLeader => return Ok(Action::await_change()),
                WriteError::Conflict => match action {
                    ExperimentAction::CreateReplicaSet(_)
                    | ExperimentAction::CreateService(_)
                    | ExperimentAction::CreateAnalysisRun(_) => WriteFailure::AlreadyExists,
                    _ => WriteFailure::Conflict,
                },
                WriteError::NotFound => WriteFailure::Conflict,
                WriteError::Api(message) => WriteFailure::Other(message.clone()),
            };
            debug!(experiment = %name, namespace = %ns, error = %e, "experiment write failed");
            record_write_failure(&observed, &mut plan, action, &failure);
        }
    }
    write_status(&writer, &exp, &plan).await?;
    publish(&ctx, &exp, &plan).await;
    let after = plan.requeue_after.unwrap_or(ctx.resync).min(ctx.resync);
    Ok(Action::requeue(after))
}

/// The Experiment's world: the ReplicaSets, Services and AnalysisRuns it controls or whose
/// names it would use, and the templates its analyses name.
async fn observe(ctx: &Context, exp: &Experiment) -> Result<ExperimentObserved, WriteError> {
    let ns = exp.namespace().unwrap_or_default();
    let uid = exp.uid().unwrap_or_default();
    let name = exp.name_any();
    let prefix = format!("{name}-");
    let ours = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        let controlled = meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.uid == uid);
        controlled || meta.name.as_deref().is_some_and(|n| n.starts_with(&prefix))
    };
    let list = kube::api::ListParams::default();
    let replica_sets: Vec<ReplicaSet> = Api::<ReplicaSet>::namespaced(ctx.client.clone(), &ns)
        .list(&list)
        .await?
        .items
        .into_iter()
        .filter(|rs| ours(&rs.metadata))
        .collect();
    let service_names: Vec<String> = exp
        .spec
        .templates
        .iter()
        .flatten()
        .filter_map(|t| t.service.as_ref().and_then(|s| s.name.clone()))
        .collect();
    let services: Vec<Service> = ctx
        .writer
        .list_services(&ns)
        .await?
        .into_iter()
        .filter(|s| {
            ours(&s.metadata)
                || s.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| service_names.contains(n))
        })
        .collect();
    // Not `list_analysis_runs`: that one lists a Rollout's runs (by their rollout-type label),
    // which an Experiment's runs do not carry.
    let analysis_runs: Vec<AnalysisRun> = Api::<AnalysisRun>::namespaced(ctx.client.clone(), &ns)
        .list(&list)
        .await?
        .items
        .into_iter()
        .filter(|r| ours(&r.metadata))
        .collect();
    let analysis_templates = fetch_templates(&ctx.writer, &ns, analysis_template_refs(exp)).await?;
    Ok(ExperimentObserved {
        experiment: exp.clone(),
        replica_sets,
        services,
        analysis_runs,
        analysis_templates,
        now: sluice_api::time::whole_seconds(Timestamp::now()),
    })
}

/// One write of the plan.
async fn apply(
    writer: &KubeCluster,
    ns: &str,
    action: &ExperimentAction,
) -> Result<(), WriteError> {
    writer.may_write()?;
    match action {
        ExperimentAction::CreateReplicaSet(rs) => writer.create_replica_set(ns, rs).await,
        ExperimentAction::ScaleReplicaSet {
            name,
            resource_version,
            to,
            annotations,
            ..
        } => {
            let mut patch = annotations_patch(resource_version.as_deref(), annotations);
            patch["spec"] = json!({ "replicas": to });
            writer.patch_replica_set(ns, name, &patch).await
        }
        ExperimentAction::AnnotateReplicaSet {
            name,
            resource_version,
            annotations,
        } => {
            let patch = annotations_patch(resource_version.as_deref(), annotations);
            writer.patch_replica_set(ns, name, &patch).await
        }
        ExperimentAction::CreateService(svc) => writer.create_service(ns, svc).await,
        ExperimentAction::DeleteService { name, uid } => {
            writer.delete_service(ns, name, uid.as_deref()).await
        }
        ExperimentAction::CreateAnalysisRun(run) => writer.create_analysis_run(ns, run).await,
        ExperimentAction::TerminateAnalysisRun { name } => {
            let patch = json!({ "spec": { "terminate": true } });
            match writer.patch_analysis_run(ns, name, &patch).await {
                // Gone meanwhile: nothing left to stop.
                Err(WriteError::NotFound) => Ok(()),
                other => other,
            }
        }
    }
}

/// The status, when it changed: only the difference, with the resourceVersion it was decided
/// on, so that a newer Experiment (a `terminate` set meanwhile) is decided on afresh.
async fn write_status(
    writer: &KubeCluster,
    exp: &Experiment,
    plan: &ExperimentPlan,
) -> Result<(), WriteError> {
    let old = serde_json::to_value(exp.status.clone().unwrap_or_default()).unwrap_or_default();
    let new = serde_json::to_value(&plan.status).unwrap_or_default();
    let Some(diff) = merge_diff(&old, &new) else {
        return Ok(());
    };
    writer.may_write()?;
    let patch = json!({
        "metadata": { "resourceVersion": exp.resource_version() },
        "status": diff,
    });
    let ns = exp.namespace().unwrap_or_default();
    writer.patch_experiment(&ns, &exp.name_any(), &patch).await
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
