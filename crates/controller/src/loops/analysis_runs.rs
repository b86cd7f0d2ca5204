//! The AnalysisRun controller: for each run, the engine says which measurements are due
//! ([`next_tasks`]); the providers take them; the engine judges the results ([`assess`]); the
//! status is written with the resourceVersion it was decided on. Finished runs are deleted
//! once their `ttlStrategy` says so. What a run keeps and what goes (the measurement a task
//! continues, the measurements kept, the run's deletion) is the engine's decision; this loop
//! carries it out.
//!
//! Secret argument values are read at measuring time and never leave this module unredacted:
//! the providers redact measurements, and errors are redacted before they are logged.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::join_all;
use jiff::Timestamp;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use sluice_analysis::secrets::KubeSecrets;
use sluice_analysis::{Providers, ResolvedArgs, RunContext, resolve_args, resolve_metric};
use sluice_api::analysis::{AnalysisRun, Measurement, Metric};
use sluice_api::common::AnalysisPhase;
use sluice_engine::analysis::{
    Disposal, MetricTask, TaskKind, assess, in_flight_measurement, measurements_kept, next_tasks,
};
use tracing::{debug, info, warn};

use crate::args::Args;
use crate::cluster::{ClusterAccess, KubeCluster, WriteError};
use crate::loops::apply::merge_diff;
use crate::loops::rollouts::instance_selector;
use crate::runtime::Hooks;

/// Longest time between two looks at a running run, whatever it waits for.
const MAX_REQUEUE: Duration = Duration::from_secs(300);

struct Context {
    writer: KubeCluster,
    providers: Providers,
    /// Secrets for `secretKeyRef` arguments, read when measuring.
    secrets: KubeSecrets,
    hooks: Hooks,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("write failed: {0}")]
    Write(#[from] WriteError),
}

/// Runs the AnalysisRun controller until `hooks` say stop; writes only while the gate is open.
pub async fn run_with(client: Client, args: &Args, hooks: Hooks) -> anyhow::Result<()> {
    let providers = Providers::for_cluster(client.clone())
        .map_err(|e| anyhow::anyhow!("metric providers: {e}"))?;
    let runs: Api<AnalysisRun> = if args.namespaced {
        let ns = args
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        Api::namespaced(client.clone(), &ns)
    } else {
        Api::all(client.clone())
    };
    let ctx = Arc::new(Context {
        secrets: KubeSecrets::new(client.clone()),
        writer: KubeCluster::with_gate(client, hooks.gate.clone()),
        providers,
        hooks: hooks.clone(),
    });
    let controller = Controller::new(
        runs,
        watcher::Config::default().labels(&instance_selector(&args.instance_id)),
    )
    .with_config(ControllerConfig::default().concurrency(args.analysis_threads.max(1)))
    .reconcile_all_on(hooks.gate.acquisitions());
    let controller = hooks.with_shutdown(controller);
    hooks.watch_run_cache(controller.store());
    controller
        .run(observed_reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(analysisrun = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "analysis run reconcile failed"),
            }
        })
        .await;
    info!("analysis run controller stopped");
    Ok(())
}

fn error_policy(run: Arc<AnalysisRun>, err: &RunError, _ctx: Arc<Context>) -> Action {
    warn!(analysisrun = %run.name_any(), namespace = run.namespace().unwrap_or_default(), error = %err, "analysis run reconcile failed, retrying");
    Action::requeue(Duration::from_secs(5))
}

/// [`reconcile`], timed and counted for the metrics (only when it may act).
async fn observed_reconcile(run: Arc<AnalysisRun>, ctx: Arc<Context>) -> Result<Action, RunError> {
    if !ctx.hooks.gate.is_open() {
        return reconcile(run, ctx).await;
    }
    let started = std::time::Instant::now();
    let result = reconcile(run.clone(), ctx.clone()).await;
    ctx.hooks
        .observe_run_reconcile(&run, started.elapsed(), result.is_err());
    result
}

async fn reconcile(run: Arc<AnalysisRun>, ctx: Arc<Context>) -> Result<Action, RunError> {
    if run.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let Some(term) = ctx.hooks.gate.term() else {
        return Ok(Action::await_change());
    };
    let ns = run.namespace().unwrap_or_default();
    let name = run.name_any();
    let now = Timestamp::now();
    let writer = ctx.writer.for_term(term);

    let tasks = next_tasks(&run, now);
    let started: Vec<String> = tasks
        .iter()
        .filter(|t| t.kind == TaskKind::Start)
        .map(|t| t.metric.clone())
        .collect();
    let results = if tasks.is_empty() {
        Vec::new()
    } else {
        measure(&ctx, &run, tasks).await
    };
    let assessment = assess(&run, results, now);

    let old = serde_json::to_value(run.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new = serde_json::to_value(&assessment.status).unwrap_or(Value::Null);
    if let Some(diff) = merge_diff(&old, &new) {
        let patch = json!({
            "metadata": { "resourceVersion": run.metadata.resource_version },
            "status": diff,
        });
        // AnalysisRun has no status subresource (as in Argo's CRD): status is written through
        // the object itself, guarded by the resourceVersion.
        let written = match writer.may_write() {
            Ok(()) => writer.patch_analysis_run(&ns, &name, &patch).await,
            Err(e) => Err(e),
        };
        if let Some(action) = settle_write(written)? {
            return Ok(action);
        }
        let phase_changed =
            run.status.as_ref().and_then(|s| s.phase.as_ref()) != assessment.status.phase.as_ref();
        if phase_changed && let Some(phase) = &assessment.status.phase {
            info!(analysisrun = %name, namespace = %ns, phase = phase.as_str(), message = assessment.status.message.as_deref().unwrap_or_default(), "analysis run phase changed");
        }
    }

    collect_garbage(&ctx, &run, &assessment.status, &started).await;

    match assessment.disposal(now) {
        Disposal::DeleteNow => {
            let deleted = match writer.may_write() {
                Ok(()) => {
                    writer
                        .delete_analysis_run(&ns, &name, run.metadata.uid.as_deref())
                        .await
                }
                Err(e) => Err(e),
            };
            if let Some(action) = settle_write(deleted)? {
                return Ok(action);
            }
            info!(analysisrun = %name, namespace = %ns, "deleted after its ttlStrategy");
            Ok(Action::await_change())
        }
        Disposal::DeleteAfter(wait) => Ok(Action::requeue(
            wait.clamp(Duration::from_secs(1), MAX_REQUEUE),
        )),
        Disposal::Keep => Ok(match assessment.requeue_after {
            Some(d) => Action::requeue(d.clamp(Duration::from_millis(200), MAX_REQUEUE)),
            None => Action::await_change(),
        }),
    }
}

/// `None` when the write was made; otherwise what this reconcile does next (see
/// [`WriteError::expected_outcome`]), or the error.
fn settle_write(result: Result<(), WriteError>) -> Result<Option<Action>, RunError> {
    match result {
        Ok(()) => Ok(None),
        Err(e) => match e.expected_outcome() {
            Some(action) => Ok(Some(action)),
            None => Err(e.into()),
        },
    }
}

/// Runs the due tasks with the providers, concurrently. Arguments (Secrets included) are read
/// once per pass; a failure to resolve them is an Error measurement for each started metric.
async fn measure(
    ctx: &Context,
    run: &AnalysisRun,
    tasks: Vec<MetricTask>,
) -> Vec<(String, TaskKind, Measurement)> {
    let ns = run.namespace().unwrap_or_default();
    let args = resolve_args(
        run.spec.args.as_deref().unwrap_or_default(),
        &ns,
        &ctx.secrets,
    )
    .await;
    let args: Result<ResolvedArgs, String> = args.map_err(|e| e.to_string());
    let run_ctx = RunContext::for_run(run).with_redactor(
        args.as_ref()
            .map(|a| a.redactor().clone())
            .unwrap_or_default(),
    );
    let metrics = run.spec.metrics.as_deref().unwrap_or_default();
    let jobs = tasks.into_iter().map(|task| {
        let run_ctx = &run_ctx;
        let args = &args;
        async move {
            let metric = metrics
                .iter()
                .find(|m| m.name.as_deref() == Some(task.metric.as_str()));
            let measurement = match (metric, args) {
                (None, _) => error_measurement(format!("metric {:?} not found", task.metric)),
                (Some(_), Err(e)) => error_measurement(e.clone()),
                (Some(metric), Ok(args)) => match resolve_metric(metric, args) {
                    Err(e) => error_measurement(run_ctx.redactor.redact(&e.to_string())),
                    Ok(metric) => take(ctx, run_ctx, run, &metric, &task).await,
                },
            };
            (task.metric, task.kind, measurement)
        }
    });
    join_all(jobs).await
}

async fn take(
    ctx: &Context,
    run_ctx: &RunContext,
    run: &AnalysisRun,
    metric: &Metric,
    task: &MetricTask,
) -> Measurement {
    match task.kind {
        TaskKind::Start => ctx.providers.measure(run_ctx, metric).await,
        TaskKind::Resume | TaskKind::Terminate => {
            let Some(in_flight) = in_flight_measurement(run, &task.metric) else {
                return error_measurement(format!("metric {:?} has no measurement", task.metric));
            };
            if task.kind == TaskKind::Resume {
                ctx.providers.resume(run_ctx, metric, in_flight).await
            } else {
                ctx.providers.terminate(run_ctx, metric, in_flight).await
            }
        }
    }
}

fn error_measurement(message: String) -> Measurement {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now());
    Measurement {
        phase: Some(AnalysisPhase::Error),
        message: Some(message),
        started_at: Some(now.clone()),
        finished_at: Some(now),
        ..Default::default()
    }
}

/// What old measurements of the metrics just measured left behind (Jobs) goes, keeping as many
/// as the status keeps measurements.
async fn collect_garbage(
    ctx: &Context,
    run: &AnalysisRun,
    status: &sluice_api::analysis::AnalysisRunStatus,
    started: &[String],
) {
    let run_ctx = RunContext::for_run(run);
    for name in started {
        let Some(metric) = run
            .spec
            .metrics
            .iter()
            .flatten()
            .find(|m| m.name.as_deref() == Some(name.as_str()))
        else {
            continue;
        };
        if metric.provider.as_ref().is_none_or(|p| p.job.is_none()) {
            continue;
        }
        let kept = measurements_kept(status, name);
        if let Err(e) = ctx.providers.garbage_collect(&run_ctx, metric, kept).await {
            debug!(analysisrun = %run.name_any(), metric = %name, error = %e, "could not delete old measurement jobs");
        }
    }
}
