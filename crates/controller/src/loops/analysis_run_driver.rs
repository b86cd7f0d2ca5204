//! One reconcile of an AnalysisRun, free of kube's runtime types: the engine says which
//! measurements are due ([`next_tasks`]), a [`Measurer`] takes them, the engine judges the
//! results ([`assess`]), the status is written with the resourceVersion it was decided on,
//! what old measurements left behind is collected, and a finished run is deleted once its
//! `ttlStrategy` says so. The controller's AnalysisRun loop (measuring with the metric
//! providers) and the simulator (measuring with a scripted measurer) both run exactly this.

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};
use sluice_api::analysis::{AnalysisRun, Measurement};
use sluice_engine::analysis::{
    Disposal, MetricTask, RunAssessment, TaskKind, assess, measurements_kept, next_tasks,
};

use super::apply::merge_diff;
use super::driver::{Requeue, requeue_after_error};
use crate::cluster::{ClusterAccess, WriteError};

/// Longest time between two looks at a running run, whatever it waits for.
pub const MAX_REQUEUE: Duration = Duration::from_secs(300);
/// Shortest wait before a run that still measures is looked at again: a run that is stopping
/// asks to come back at once, and each pass is a status write.
pub const MIN_REQUEUE: Duration = Duration::from_millis(200);
/// Shortest wait before a finished run is looked at again for deletion.
pub const MIN_DELETE_WAIT: Duration = Duration::from_secs(1);

/// One measurement result: the metric, what was asked of the provider, what it reported.
pub type MeasurementResult = (String, TaskKind, Measurement);

/// What takes measurements: the metric providers in the controller, a scripted stand-in for
/// them in the simulator.
pub trait Measurer: Sync {
    /// Runs the due `tasks` of `run`: one result per task.
    fn measure(
        &self,
        run: &AnalysisRun,
        tasks: Vec<MetricTask>,
    ) -> impl Future<Output = Vec<MeasurementResult>> + Send;

    /// Deletes what older measurements of `metric` left behind (measurement Jobs), keeping
    /// the newest `kept`. Best effort: a failure leaves them for the next pass.
    fn collect_garbage(
        &self,
        run: &AnalysisRun,
        metric: &str,
        kept: usize,
    ) -> impl Future<Output = ()> + Send;
}

/// What one reconcile of a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReconciled {
    /// The engine's judgement; `None` when the run was left alone (it is being deleted).
    pub assessment: Option<RunAssessment>,
    /// Whether the status was written.
    pub status_written: bool,
    /// Whether the run was deleted after its `ttlStrategy`.
    pub deleted: bool,
    /// When to look at the run again.
    pub requeue: Requeue,
}

impl RunReconciled {
    /// The phase and message the run moved to in this reconcile, if its phase changed.
    pub fn phase_change<'a>(&'a self, before: &AnalysisRun) -> Option<(&'a str, &'a str)> {
        let status = &self.assessment.as_ref()?.status;
        let old = before.status.as_ref().and_then(|s| s.phase.as_ref());
        let new = status.phase.as_ref()?;
        (self.status_written && old != Some(new))
            .then(|| (new.as_str(), status.message.as_deref().unwrap_or_default()))
    }
}

/// Reconciles `run` as observed at `now`: measures what is due with `measurer`, writes the
/// judged status through `cluster` (a merge patch carrying the run's resourceVersion, so a
/// run changed since it was observed is refused with a conflict rather than written over),
/// collects garbage for the metrics just measured, and deletes the run when its
/// `ttlStrategy` says so (by uid, never a namesake). A failed write ends the reconcile with
/// its error; [`requeue`] says when to come back.
pub async fn reconcile<C, M>(
    cluster: &C,
    measurer: &M,
    run: &AnalysisRun,
    now: Timestamp,
) -> Result<RunReconciled, WriteError>
where
    C: ClusterAccess,
    M: Measurer,
{
    if run.metadata.deletion_timestamp.is_some() {
        return Ok(RunReconciled {
            assessment: None,
            status_written: false,
            deleted: false,
            requeue: Requeue::AwaitChange,
        });
    }
    let ns = run.metadata.namespace.clone().unwrap_or_default();
    let name = run.metadata.name.clone().unwrap_or_default();

    let tasks = next_tasks(run, now);
    let started: Vec<String> = tasks
        .iter()
        .filter(|t| t.kind == TaskKind::Start)
        .map(|t| t.metric.clone())
        .collect();
    let results = if tasks.is_empty() {
        Vec::new()
    } else {
        measurer.measure(run, tasks).await
    };
    let assessment = assess(run, results, now);

    let mut status_written = false;
    if let Some(patch) = status_patch(run, &assessment) {
        // AnalysisRun has no status subresource (as in Argo's CRD): status is written through
        // the object itself, guarded by the resourceVersion.
        cluster.may_write()?;
        cluster.patch_analysis_run(&ns, &name, &patch).await?;
        status_written = true;
    }

    for metric in &started {
        let kept = measurements_kept(&assessment.status, metric);
        measurer.collect_garbage(run, metric, kept).await;
    }

    let (deleted, requeue) = match assessment.disposal(now) {
        Disposal::DeleteNow => {
            cluster.may_write()?;
            cluster
                .delete_analysis_run(&ns, &name, run.metadata.uid.as_deref())
                .await?;
            (true, Requeue::AwaitChange)
        }
        Disposal::DeleteAfter(wait) => (
            false,
            Requeue::After(wait.clamp(MIN_DELETE_WAIT, MAX_REQUEUE)),
        ),
        Disposal::Keep => (
            false,
            match assessment.requeue_after {
                Some(d) => Requeue::After(d.clamp(MIN_REQUEUE, MAX_REQUEUE)),
                None => Requeue::AwaitChange,
            },
        ),
    };
    Ok(RunReconciled {
        assessment: Some(assessment),
        status_written,
        deleted,
        requeue,
    })
}

/// The merge patch from the run's observed status to the assessed one, pinned to the observed
/// resourceVersion; `None` when nothing changed.
pub fn status_patch(run: &AnalysisRun, assessment: &RunAssessment) -> Option<Value> {
    let old = serde_json::to_value(run.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&assessment.status).unwrap_or(Value::Null);
    let diff = merge_diff(&old, &new)?;
    Some(json!({
        "metadata": { "resourceVersion": run.metadata.resource_version },
        "status": diff,
    }))
}

/// The requeue policy of a run: as the reconcile said, or as [`requeue_after_error`] says
/// after a failed write (a stale view is observed again shortly).
pub fn requeue(result: &Result<RunReconciled, WriteError>) -> Requeue {
    match result {
        Ok(done) => done.requeue,
        Err(e) => requeue_after_error(e),
    }
}

#[cfg(test)]
mod tests;
