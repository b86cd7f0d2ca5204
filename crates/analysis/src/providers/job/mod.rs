//! Job: each measurement runs a `batch/v1` Job; Complete is Successful, Failed is Failed.
//!
//! The Job is named `<run uid>.<metric>.<n>` (n = measurements taken + 1), lives in the run's
//! namespace, carries the run's uid as a label (on its pods too) and its name, namespace and
//! metric as annotations, and is controlled by the AnalysisRun.
//!
//! As Argo 1.10 (its pull requests 4602 and 4692): a pod of the Job whose container cannot
//! start because its image cannot be pulled makes the measurement Inconclusive at once (the
//! Job would never finish on its own, and a person should look rather than the Rollout
//! aborting), and terminating a running measurement deletes the Job and counts it as
//! Inconclusive (1.9 said Successful: a Job that never finished proved nothing). While the Job
//! runs, the measurement is looked at again after a delay growing with the square root of its
//! age, since its pods change without the Job changing.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{DeleteParams, ListParams, PostParams};
use sluice_api::analysis::{JobMetric, Measurement, Metric, MetricProvider, ProviderKind};
use sluice_api::common::AnalysisPhase;

use super::outcome::{Outcome, mark_error, now};
use super::provider::{Env, Provider};
use super::{ProviderError, Providers, RunContext};
use crate::redact::Redactor;

/// Measurement metadata key holding the Job's name.
pub const JOB_NAME_KEY: &str = "job-name";
/// Measurement metadata key holding the Job's namespace.
pub const JOB_NAMESPACE_KEY: &str = "job-namespace";
/// Job label with the AnalysisRun's uid.
pub const ANALYSIS_RUN_UID_LABEL: &str = "analysisrun.argoproj.io/uid";
/// Job annotation with the AnalysisRun's name.
pub const ANALYSIS_RUN_NAME_ANNOTATION: &str = "analysisrun.argoproj.io/name";
/// Job annotation with the AnalysisRun's namespace.
pub const ANALYSIS_RUN_NAMESPACE_ANNOTATION: &str = "analysisrun.argoproj.io/namespace";
/// Job annotation with the metric's name.
pub const ANALYSIS_RUN_METRIC_ANNOTATION: &str = "analysisrun.argoproj.io/metric-name";

/// The name of the Job for the metric's next measurement.
pub fn job_name(ctx: &RunContext, metric_name: &str) -> String {
    format!(
        "{}.{}.{}",
        ctx.uid,
        metric_name,
        ctx.measurements_taken(metric_name) + 1
    )
}

/// The Job for the metric's next measurement: the provider's labels, annotations and spec, with
/// the run's identity added.
pub fn build_job(
    ctx: &RunContext,
    metric_name: &str,
    job: &JobMetric,
) -> Result<Job, ProviderError> {
    if metric_name.is_empty() {
        return Err(ProviderError::new("metric has no name"));
    }
    if ctx.uid.is_empty() {
        return Err(ProviderError::new(
            "the AnalysisRun has no uid to own its Job",
        ));
    }
    let spec = job
        .spec
        .clone()
        .ok_or_else(|| ProviderError::new("job provider has no spec"))?;
    let meta = job.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(ANALYSIS_RUN_UID_LABEL.to_owned(), ctx.uid.clone());
    let mut spec = spec;
    // Argo's pod informer selects the pods of analysis Jobs by this label.
    spec.template
        .metadata
        .get_or_insert_default()
        .labels
        .get_or_insert_default()
        .insert(ANALYSIS_RUN_UID_LABEL.to_owned(), ctx.uid.clone());
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(ANALYSIS_RUN_NAME_ANNOTATION.to_owned(), ctx.name.clone());
    annotations.insert(
        ANALYSIS_RUN_NAMESPACE_ANNOTATION.to_owned(),
        ctx.namespace.clone(),
    );
    annotations.insert(
        ANALYSIS_RUN_METRIC_ANNOTATION.to_owned(),
        metric_name.to_owned(),
    );
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name(ctx, metric_name)),
            namespace: Some(ctx.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: sluice_api::API_VERSION.to_owned(),
                kind: "AnalysisRun".to_owned(),
                name: ctx.name.clone(),
                uid: ctx.uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The measurement phase a Job's conditions give: Successful once `Complete` is true, Failed
/// once `Failed` is true (with the condition's reason and message, for the log), `None` while
/// it runs.
pub(crate) fn job_phase(job: &Job) -> Option<(AnalysisPhase, Option<String>)> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let holds = |kind: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "True")
    };
    if let Some(failed) = holds("Failed") {
        let message = match (failed.reason.as_deref(), failed.message.as_deref()) {
            (Some(r), Some(m)) => Some(format!("{r}: {m}")),
            (Some(t), None) | (None, Some(t)) => Some(t.to_owned()),
            (None, None) => None,
        };
        return Some((AnalysisPhase::Failed, message));
    }
    holds("Complete").map(|_| (AnalysisPhase::Successful, None))
}

/// Which of the run's Jobs for `metric` to delete so that the newest `keep` remain.
pub(crate) fn jobs_to_delete(mut jobs: Vec<Job>, metric: &str, keep: usize) -> Vec<String> {
    jobs.retain(|j| {
        j.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANALYSIS_RUN_METRIC_ANNOTATION))
            .is_some_and(|m| m == metric)
    });
    jobs.sort_by(|a, b| {
        let created = |j: &Job| j.metadata.creation_timestamp.clone();
        created(a)
            .cmp(&created(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let excess = jobs.len().saturating_sub(keep);
    jobs.into_iter()
        .take(excess)
        .filter_map(|j| j.metadata.name)
        .collect()
}

/// The Job provider (`provider.job`): a measurement is a Job, Running until it finishes.
pub(crate) struct JobProvider;

impl Provider for JobProvider {
    const KIND: ProviderKind = ProviderKind::Job;
    type Config = JobMetric;
    type Query<'a> = Job;

    fn config(provider: &MetricProvider) -> Option<&JobMetric> {
        provider.job.as_ref()
    }

    fn parse<'a>(env: Env<'a>, job: &'a JobMetric) -> Result<Job, ProviderError> {
        let metric_name = env.metric.name.as_deref().unwrap_or_default();
        build_job(env.run, metric_name, job)
    }

    async fn measure<'a>(
        env: Env<'a>,
        job: Job,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        create(env.providers, env.run, job).await
    }

    async fn resume<'a>(env: Env<'a>, measurement: Measurement) -> Measurement {
        resume(env.providers, env.run, measurement).await
    }

    async fn terminate<'a>(env: Env<'a>, measurement: Measurement) -> Measurement {
        terminate(env.providers, env.run, measurement).await
    }

    async fn garbage_collect<'a>(env: Env<'a>, keep: usize) -> Result<(), ProviderError> {
        garbage_collect(env.providers, env.run, env.metric, keep).await
    }
}

async fn create(
    providers: &Providers,
    ctx: &RunContext,
    job: Job,
) -> Result<Outcome, ProviderError> {
    let name = job.metadata.name.clone().unwrap_or_default();
    let api = jobs(providers, &ctx.namespace)?;
    match api.create(&PostParams::default(), &job).await {
        Ok(_) => {}
        // A retry after a lost response: the Job is ours if the run controls it.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = api.get(&name).await.map_err(|e| {
                ProviderError(format!("job {name} exists but could not be read: {e}"))
            })?;
            let owned = existing
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == ctx.uid);
            if !owned {
                return Err(ProviderError(format!(
                    "job {name} already exists and is not controlled by this AnalysisRun"
                )));
            }
        }
        Err(err) => return Err(ProviderError(format!("job create {name} failed: {err}"))),
    }
    tracing::info!(job = %name, namespace = %ctx.namespace, "analysis job created");
    let mut outcome = Outcome::running(BTreeMap::from([
        (JOB_NAME_KEY.to_owned(), name),
        (JOB_NAMESPACE_KEY.to_owned(), ctx.namespace.clone()),
    ]));
    // Looked at again at once: a short Job may be over before its first watch event.
    outcome.resume_at = Some(now());
    Ok(outcome)
}

async fn resume(providers: &Providers, ctx: &RunContext, measurement: Measurement) -> Measurement {
    let (namespace, name) = match job_ref(ctx, &measurement) {
        Ok(found) => found,
        Err(err) => return mark_error(measurement, err.0),
    };
    let api = match jobs(providers, &namespace) {
        Ok(api) => api,
        Err(err) => return mark_error(measurement, err.0),
    };
    let job = match api.get_opt(&name).await {
        Ok(Some(job)) => job,
        Ok(None) => return mark_error(measurement, format!("job {namespace}/{name} not found")),
        Err(err) => {
            return mark_error(
                measurement,
                format!("failed to read job {namespace}/{name}: {err}"),
            );
        }
    };
    let mut measurement = measurement;
    if let Some((phase, why)) = job_phase(&job) {
        // As Argo, the measurement carries no message: a run's message (and the Rollout's,
        // when it aborts) says the metric failed, the Job says why, and so does the log.
        let why = why.unwrap_or_default();
        tracing::info!(job = %name, namespace = %namespace, %phase, why, "analysis job finished");
        measurement.phase = Some(phase);
        measurement.finished_at = Some(now());
        return measurement;
    }
    let pods = match job_pods(providers, &namespace, &job).await {
        Ok(pods) => pods,
        Err(err) => return mark_error(measurement, err.0),
    };
    if let Some(message) = pods.iter().find_map(terminal_pod_error) {
        tracing::info!(job = %name, namespace = %namespace, message, "analysis job cannot run");
        measurement.phase = Some(AnalysisPhase::Inconclusive);
        measurement.message = Some(message);
        measurement.finished_at = Some(now());
        return measurement;
    }
    let started = measurement.started_at.as_ref().map(|t| t.0);
    measurement.resume_at = Some(next_look(started, jiff::Timestamp::now()));
    measurement
}

/// When to look at a running Job again: after sqrt(2 x its age in seconds) seconds, as Argo.
fn next_look(started: Option<jiff::Timestamp>, now: jiff::Timestamp) -> Time {
    let age = started.map_or(0.0, |s| (now - s).total(jiff::Unit::Second).unwrap_or(0.0));
    let delay = (2.0 * age.max(0.0)).sqrt();
    let delay = jiff::SignedDuration::try_from_secs_f64(delay).unwrap_or_default();
    Time(now.checked_add(delay).unwrap_or(now))
}

/// Waiting reasons after which a container never starts on its own.
const TERMINAL_WAITING_REASONS: [&str; 3] =
    ["ErrImagePull", "ImagePullBackOff", "InvalidImageName"];

/// Argo's message for the first (init, then main) container of `pod` waiting for good.
pub(crate) fn terminal_pod_error(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let statuses = status.init_container_statuses.iter().flatten();
    statuses
        .chain(status.container_statuses.iter().flatten())
        .find_map(|cs| {
            let waiting = cs.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            TERMINAL_WAITING_REASONS.contains(&reason).then(|| {
                format!(
                    "Pod {}, container {} has terminal error ({reason}): {}\n",
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    cs.name,
                    waiting.message.as_deref().unwrap_or_default()
                )
            })
        })
}

/// The pods the Job's selector selects.
async fn job_pods(
    providers: &Providers,
    namespace: &str,
    job: &Job,
) -> Result<Vec<Pod>, ProviderError> {
    let labels = job
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.match_labels.as_ref());
    let Some(labels) = labels.filter(|l| !l.is_empty()) else {
        // A Job the API server accepted always has a selector; without one, no pod is its.
        return Ok(Vec::new());
    };
    let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let api: kube::Api<Pod> = kube::Api::namespaced(providers.kube()?.clone(), namespace);
    api.list(&ListParams::default().labels(&selector.join(",")))
        .await
        .map(|list| list.items)
        .map_err(|e| {
            ProviderError(format!(
                "failed to list the pods of job {namespace}/{}: {e}",
                job.metadata.name.as_deref().unwrap_or_default()
            ))
        })
}

async fn terminate(
    providers: &Providers,
    ctx: &RunContext,
    measurement: Measurement,
) -> Measurement {
    let deleted = async {
        let (namespace, name) = job_ref(ctx, &measurement)?;
        delete(&jobs(providers, &namespace)?, &name).await
    };
    if let Err(err) = deleted.await {
        return mark_error(measurement, err.0);
    }
    let mut measurement = measurement;
    measurement.phase = Some(AnalysisPhase::Inconclusive);
    measurement.finished_at = Some(now());
    measurement
}

async fn garbage_collect(
    providers: &Providers,
    ctx: &RunContext,
    metric: &Metric,
    keep: usize,
) -> Result<(), ProviderError> {
    let api = jobs(providers, &ctx.namespace)?;
    let selector = format!("{ANALYSIS_RUN_UID_LABEL}={}", ctx.uid);
    let list = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| ProviderError(format!("failed to list analysis jobs: {e}")))?;
    let metric_name = metric.name.as_deref().unwrap_or_default();
    for name in jobs_to_delete(list.items, metric_name, keep) {
        delete(&api, &name).await?;
        tracing::info!(job = %name, namespace = %ctx.namespace, "analysis job garbage collected");
    }
    Ok(())
}

fn jobs(providers: &Providers, namespace: &str) -> Result<kube::Api<Job>, ProviderError> {
    Ok(kube::Api::namespaced(providers.kube()?.clone(), namespace))
}

fn job_ref(ctx: &RunContext, measurement: &Measurement) -> Result<(String, String), ProviderError> {
    let metadata = measurement.metadata.as_ref();
    let name = metadata
        .and_then(|m| m.get(JOB_NAME_KEY))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ProviderError::new("job metadata reference missing"))?;
    let namespace = metadata
        .and_then(|m| m.get(JOB_NAMESPACE_KEY))
        .filter(|n| !n.is_empty())
        .unwrap_or(&ctx.namespace);
    Ok((namespace.clone(), name.clone()))
}

/// Deletes a Job and its pods (foreground); an already deleted Job is fine.
async fn delete(api: &kube::Api<Job>, name: &str) -> Result<(), ProviderError> {
    match api.delete(name, &DeleteParams::foreground()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(ProviderError(format!("failed to delete job {name}: {err}"))),
    }
}

#[cfg(test)]
mod tests;
