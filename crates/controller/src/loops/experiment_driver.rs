//! One reconcile of an Experiment, free of kube's runtime types: observe what it controls,
//! let the engine decide ([`reconcile_experiment`]), make every write of the plan in order (a
//! failed one is reported back to the engine, [`record_write_failure`], and the others still
//! go), then write the status as a merge patch carrying the resourceVersion it was decided on.
//! The controller's Experiment loop and the simulator both run exactly this, through
//! [`ClusterAccess`]; events and the clock are theirs.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;
use sluice_api::experiment::Experiment;
use sluice_engine::experiment::{
    ExperimentAction, ExperimentObserved, ExperimentPlan, WriteFailure, analysis_template_refs,
    reconcile_experiment, record_write_failure,
};
use tracing::{Instrument, debug};

use super::apply::{annotations_patch, merge_diff};
use super::observe::fetch_templates;
use crate::cluster::requeue::{ERROR_RETRY, Requeue};
use crate::cluster::{ClusterAccess, WriteError};

/// Why an Experiment reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("write failed: {0}")]
    Write(#[from] WriteError),
    /// The engine could not decide (an invalid spec it cannot even report in the status).
    #[error("{0}")]
    Undecidable(String),
}

/// What one reconcile came to.
#[derive(Debug)]
pub enum Reconciled {
    /// Every write of the plan was made or reported back to the engine, and the status written.
    Applied {
        plan: Box<ExperimentPlan>,
        /// The writes that failed, as the engine was told of them.
        failed_writes: Vec<String>,
    },
    /// Leadership was lost in the middle of the plan: the rest is left to the new leader.
    LostLeadership,
}

/// The name of the span every reconcile runs in (its writes can be told apart by it).
pub const SPAN: &str = "experiment_reconcile";

/// One Experiment: observe, decide, apply, write the status when it changed.
pub async fn reconcile<C: ClusterAccess>(
    cluster: &C,
    exp: &Experiment,
    now: Timestamp,
) -> Result<Reconciled, ExperimentError> {
    let name = exp.metadata.name.as_deref().unwrap_or_default();
    let span = tracing::debug_span!(SPAN, experiment = name);
    reconcile_in_span(cluster, exp, now).instrument(span).await
}

async fn reconcile_in_span<C: ClusterAccess>(
    cluster: &C,
    exp: &Experiment,
    now: Timestamp,
) -> Result<Reconciled, ExperimentError> {
    let observed = observe(cluster, exp, now).await?;
    let mut plan = reconcile_experiment(&observed);
    if let Some(err) = plan.error.take() {
        return Err(ExperimentError::Undecidable(err));
    }
    let ns = exp.metadata.namespace.as_deref().unwrap_or_default();
    let mut failed_writes = Vec::new();
    for action in std::mem::take(&mut plan.actions) {
        if let Err(e) = apply(cluster, ns, &action).await {
            let Some(failure) = failure_of(&action, &e) else {
                return Ok(Reconciled::LostLeadership);
            };
            debug!(experiment = exp.metadata.name.as_deref().unwrap_or_default(), namespace = ns, error = %e, "experiment write failed");
            failed_writes.push(format!("{action:?}: {e}"));
            record_write_failure(&observed, &mut plan, &action, &failure);
        }
    }
    write_status(cluster, exp, &plan).await?;
    Ok(Reconciled::Applied {
        plan: Box::new(plan),
        failed_writes,
    })
}

/// When to reconcile the Experiment again: when the plan asks (a step or analysis due), at
/// the resync period at the latest; after a lost leadership only on a change; after a failure,
/// after [`ERROR_RETRY`].
pub fn requeue(result: &Result<Reconciled, ExperimentError>, resync: Duration) -> Requeue {
    match result {
        Ok(Reconciled::Applied { plan, .. }) => {
            Requeue::After(plan.requeue_after.unwrap_or(resync).min(resync))
        }
        Ok(Reconciled::LostLeadership) => Requeue::AwaitChange,
        Err(_) => Requeue::After(ERROR_RETRY),
    }
}

/// The Experiment's world: the ReplicaSets, Services and AnalysisRuns it controls or whose
/// names it would use, and the templates its analyses name.
pub async fn observe<C: ClusterAccess>(
    cluster: &C,
    exp: &Experiment,
    now: Timestamp,
) -> Result<ExperimentObserved, WriteError> {
    let ns = exp.metadata.namespace.as_deref().unwrap_or_default();
    let uid = exp.metadata.uid.clone().unwrap_or_default();
    let prefix = format!("{}-", exp.metadata.name.as_deref().unwrap_or_default());
    let ours = |meta: &ObjectMeta| {
        let controlled = meta
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.uid == uid);
        controlled || meta.name.as_deref().is_some_and(|n| n.starts_with(&prefix))
    };
    let replica_sets = cluster
        .list_replica_sets(ns)
        .await?
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
    let services = cluster
        .list_services(ns)
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
    let analysis_runs = cluster
        .list_every_analysis_run(ns)
        .await?
        .into_iter()
        .filter(|r| ours(&r.metadata))
        .collect();
    let analysis_templates = fetch_templates(cluster, ns, analysis_template_refs(exp)).await?;
    Ok(ExperimentObserved {
        experiment: exp.clone(),
        replica_sets,
        services,
        analysis_runs,
        analysis_templates,
        now: sluice_api::time::whole_seconds(now),
    })
}

/// One write of the plan.
async fn apply<C: ClusterAccess>(
    cluster: &C,
    ns: &str,
    action: &ExperimentAction,
) -> Result<(), WriteError> {
    cluster.may_write()?;
    match action {
        ExperimentAction::CreateReplicaSet(rs) => cluster.create_replica_set(ns, rs).await,
        ExperimentAction::ScaleReplicaSet {
            name,
            resource_version,
            to,
            annotations,
            ..
        } => {
            let mut patch = annotations_patch(resource_version.as_deref(), annotations);
            patch["spec"] = json!({ "replicas": to });
            cluster.patch_replica_set(ns, name, &patch).await
        }
        ExperimentAction::AnnotateReplicaSet {
            name,
            resource_version,
            annotations,
        } => {
            let patch = annotations_patch(resource_version.as_deref(), annotations);
            cluster.patch_replica_set(ns, name, &patch).await
        }
        ExperimentAction::CreateService(svc) => cluster.create_service(ns, svc).await,
        ExperimentAction::DeleteService { name, uid } => {
            cluster.delete_service(ns, name, uid.as_deref()).await
        }
        ExperimentAction::CreateAnalysisRun(run) => cluster.create_analysis_run(ns, run).await,
        ExperimentAction::TerminateAnalysisRun { name } => {
            let patch = json!({ "spec": { "terminate": true } });
            match cluster.patch_analysis_run(ns, name, &patch).await {
                // Gone meanwhile: nothing left to stop.
                Err(WriteError::NotFound) => Ok(()),
                other => other,
            }
        }
    }
}

/// How a failed write is reported to the engine, as Argo's controller would see it; `None`
/// when leadership was lost (nothing more is written, nothing reported).
fn failure_of(action: &ExperimentAction, e: &WriteError) -> Option<WriteFailure> {
    Some(match e {
        WriteError::NotLeader => return None,
        WriteError::Conflict => match action {
            ExperimentAction::CreateReplicaSet(_)
            | ExperimentAction::CreateService(_)
            | ExperimentAction::CreateAnalysisRun(_) => WriteFailure::AlreadyExists,
            _ => WriteFailure::Conflict,
        },
        WriteError::NotFound => WriteFailure::Conflict,
        WriteError::Api(message) => WriteFailure::Other(message.clone()),
    })
}

/// The status, when it changed: only the difference, with the resourceVersion it was decided
/// on, so that a newer Experiment (a `terminate` set meanwhile) is decided on afresh.
async fn write_status<C: ClusterAccess>(
    cluster: &C,
    exp: &Experiment,
    plan: &ExperimentPlan,
) -> Result<(), WriteError> {
    let old = serde_json::to_value(exp.status.clone().unwrap_or_default()).unwrap_or_default();
    let new = serde_json::to_value(&plan.status).unwrap_or_default();
    let Some(diff) = merge_diff(&old, &new) else {
        return Ok(());
    };
    cluster.may_write()?;
    let patch = json!({
        "metadata": { "resourceVersion": exp.metadata.resource_version },
        "status": diff,
    });
    let ns = exp.metadata.namespace.as_deref().unwrap_or_default();
    let name = exp.metadata.name.as_deref().unwrap_or_default();
    cluster.patch_experiment(ns, name, &patch).await
}

#[cfg(test)]
mod tests;
