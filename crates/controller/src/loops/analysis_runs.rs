//! The AnalysisRun controller: watches runs and has the shared [`analysis_run_driver`] reconcile
//! each one (due measurements, judged status written with its resourceVersion, deletion after
//! `ttlStrategy`), with the metric providers as its measurer. What a run keeps and what goes
//! is the engine's decision; the driver carries it out, this loop supplies the providers,
//! the leadership term and the clock.
//!
//! Secret argument values are read at measuring time and never leave this module unredacted:
//! the providers redact measurements, and errors are redacted before they are logged.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::cache::TouchedWhenCached as _;
use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};
use sluice_analysis::providers::ANALYSIS_RUN_UID_LABEL;
use sluice_analysis::secrets::KubeSecrets;
use sluice_analysis::{Providers, ResolvedArgs, RunContext, resolve_args, resolve_metric};
use sluice_api::analysis::{AnalysisRun, Measurement, Metric};
use sluice_api::common::AnalysisPhase;
use sluice_engine::analysis::{MetricTask, TaskKind, in_flight_measurement};
use tracing::{debug, info};

use crate::args::Args;
use crate::cluster::{KubeCluster, WriteError};
use crate::loops::Hooks;
use crate::loops::analysis_run_driver::{self, MeasurementResult, Measurer};
use crate::loops::harness::{self, Reconciler};
use crate::loops::scope::{api_in, instance_selector, watched_namespace};
use crate::serve::metrics::Queue;

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
    let mut providers = Providers::for_cluster(client.clone())
        .map_err(|e| anyhow::anyhow!("metric providers: {e}"))?;
    if let Some(plugins) = &hooks.plugins {
        providers = providers.with_plugins(plugins.clone());
    }
    let namespace = watched_namespace(&client, args);
    let runs: Api<AnalysisRun> = api_in(&client, namespace.as_deref());
    let job_metadata: Api<PartialObjectMeta<Job>> = api_in(&client, namespace.as_deref());
    let ctx = Arc::new(Context {
        secrets: KubeSecrets::new(client.clone()),
        writer: KubeCluster::with_gate(client, hooks.gate.clone()),
        providers,
        hooks: hooks.clone(),
    });
    // The cache is made here rather than by the Controller, to keep managedFields out of it.
    let (cache, writer) = reflector::store();
    let stream = crate::cache::watch(
        runs,
        watcher::Config::default().labels(&instance_selector(&args.instance_id)),
    )
    .default_backoff()
    .modify(crate::cache::drop_managed_fields)
    .reflect(writer)
    .applied_when_cached(cache.clone());
    // A Job metric's measurement ends when its Job does: as Argo, the run is looked at when
    // one of its Jobs changes, not at the next poll. Only the Jobs' metadata is kept.
    let jobs = crate::cache::watch(
        job_metadata,
        watcher::Config::default().labels(ANALYSIS_RUN_UID_LABEL),
    )
    .default_backoff()
    .applied_objects();
    let controller = Controller::for_stream(stream, cache)
        .owns_stream(jobs)
        .with_config(ControllerConfig::default().concurrency(args.analysis_threads.max(1)));
    hooks.watch_run_cache(controller.store());
    harness::run(controller, ctx).await;
    Ok(())
}

impl Reconciler for Context {
    type Object = AnalysisRun;
    type Error = RunError;
    const QUEUE: Queue = Queue::AnalysisRuns;
    const RETRY: Duration = Duration::from_secs(5);

    fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    fn reconcile(
        self: Arc<Self>,
        run: Arc<AnalysisRun>,
    ) -> impl Future<Output = Result<Action, RunError>> + Send {
        reconcile(run, self)
    }
}

/// One run through the shared [`analysis_run_driver`], measuring with the providers, pinned to
/// the leadership term it was decided in.
async fn reconcile(run: Arc<AnalysisRun>, ctx: Arc<Context>) -> Result<Action, RunError> {
    let Some(term) = ctx.hooks.gate.term() else {
        return Ok(Action::await_change());
    };
    let writer = ctx.writer.for_term(term);
    let measurer = ProviderMeasurer { ctx: &ctx };
    let result = analysis_run_driver::reconcile(&writer, &measurer, &run, Timestamp::now()).await;
    let name = run.name_any();
    let ns = run.namespace().unwrap_or_default();
    if let Ok(done) = &result {
        if let Some((phase, message)) = done.phase_change(&run) {
            info!(analysisrun = %name, namespace = %ns, phase, message, "analysis run phase changed");
        }
        if done.deleted {
            info!(analysisrun = %name, namespace = %ns, "deleted after its ttlStrategy");
        }
    }
    let requeue = analysis_run_driver::requeue(&result);
    match result {
        // A stale view or a lost leadership is expected: the requeue policy covers it.
        Err(e) if e.expected_outcome().is_none() => Err(e.into()),
        _ => Ok(requeue.into()),
    }
}

/// The metric providers, as the driver's [`Measurer`].
struct ProviderMeasurer<'a> {
    ctx: &'a Context,
}

impl Measurer for ProviderMeasurer<'_> {
    async fn measure(&self, run: &AnalysisRun, tasks: Vec<MetricTask>) -> Vec<MeasurementResult> {
        measure(self.ctx, run, tasks).await
    }

    async fn collect_garbage(&self, run: &AnalysisRun, metric: &str, kept: usize) {
        collect_garbage(self.ctx, run, metric, kept).await;
    }
}

/// Runs the due tasks with the providers, concurrently. Arguments (Secrets included) are read
/// once per pass; a failure to resolve them is an Error measurement for each started metric.
async fn measure(
    ctx: &Context,
    run: &AnalysisRun,
    tasks: Vec<MetricTask>,
) -> Vec<MeasurementResult> {
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

/// What old measurements of `name` left behind (Jobs) goes, keeping as many as the status
/// keeps measurements; the metric's provider knows whether it leaves anything.
async fn collect_garbage(ctx: &Context, run: &AnalysisRun, name: &str, kept: usize) {
    let Some(metric) = run
        .spec
        .metrics
        .iter()
        .flatten()
        .find(|m| m.name.as_deref() == Some(name))
    else {
        return;
    };
    let run_ctx = RunContext::for_run(run);
    if let Err(e) = ctx.providers.garbage_collect(&run_ctx, metric, kept).await {
        debug!(analysisrun = %run.name_any(), metric = %name, error = %e, "could not delete old measurement jobs");
    }
}
