//! Job: each measurement runs a `batch/v1` Job; Complete is Successful, Failed is Failed.
//!
//! The Job is named `<run uid>.<metric>.<n>` (n = measurements taken + 1), lives in the run's
//! namespace, carries the run's uid as a label and its name, namespace and metric as
//! annotations, and is controlled by the AnalysisRun. Terminating deletes it and counts the
//! measurement as Successful, as Argo does.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, PostParams};
use sluice_api::analysis::{JobMetric, Measurement, Metric};
use sluice_api::common::AnalysisPhase;

use super::{Outcome, ProviderError, Providers, RunContext, mark_error, now};

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
/// once `Failed` is true (with the condition's reason as message), `None` while it runs.
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

pub(crate) async fn measure(
    providers: &Providers,
    ctx: &RunContext,
    metric: &Metric,
    job: &JobMetric,
) -> Result<Outcome, ProviderError> {
    let metric_name = metric.name.as_deref().unwrap_or_default();
    let job = build_job(ctx, metric_name, job)?;
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
    Ok(Outcome::running(BTreeMap::from([
        (JOB_NAME_KEY.to_owned(), name),
        (JOB_NAMESPACE_KEY.to_owned(), ctx.namespace.clone()),
    ])))
}

pub(crate) async fn resume(
    providers: &Providers,
    ctx: &RunContext,
    measurement: Measurement,
) -> Measurement {
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
    if let Some((phase, message)) = job_phase(&job) {
        tracing::info!(job = %name, namespace = %namespace, %phase, "analysis job finished");
        measurement.phase = Some(phase);
        measurement.message = message;
        measurement.finished_at = Some(now());
    }
    measurement
}

pub(crate) async fn terminate(
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
    measurement.phase = Some(AnalysisPhase::Successful);
    measurement.finished_at = Some(now());
    measurement
}

pub(crate) async fn garbage_collect(
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
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::extract::{Path, Query, State};
    use axum::http::StatusCode;
    use axum::routing::get;
    use axum::{Json, Router};
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;
    use std::collections::HashMap;

    use super::super::ProviderSettings;
    use super::super::test_support::{install_crypto, serve};
    use super::*;
    use crate::secrets::MemorySecrets;

    fn job_metric() -> JobMetric {
        serde_json::from_value(json!({
            "metadata": {"labels": {"rev": "abc"}, "annotations": {"team": "x"}},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "containers": [{"name": "sleep", "image": "nginx:1.19-alpine", "command": ["sleep", "30"]}],
                "restartPolicy": "Never"
            }}}
        }))
        .unwrap()
    }

    fn ctx() -> RunContext {
        RunContext::new(
            "analysis-run-job-x",
            "ns",
            "9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60",
        )
    }

    #[test]
    fn job_construction() {
        let ctx = ctx().with_measurements_taken("test", 2);
        let job = build_job(&ctx, "test", &job_metric()).unwrap();
        assert_eq!(
            serde_json::to_value(&job.metadata).unwrap(),
            json!({
                "name": "9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60.test.3",
                "namespace": "ns",
                "labels": {"rev": "abc", "analysisrun.argoproj.io/uid": "9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60"},
                "annotations": {
                    "team": "x",
                    "analysisrun.argoproj.io/name": "analysis-run-job-x",
                    "analysisrun.argoproj.io/namespace": "ns",
                    "analysisrun.argoproj.io/metric-name": "test"
                },
                "ownerReferences": [{
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "AnalysisRun",
                    "name": "analysis-run-job-x",
                    "uid": "9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60",
                    "controller": true,
                    "blockOwnerDeletion": true
                }]
            })
        );
        assert_eq!(job.spec, job_metric().spec);
        assert_eq!(
            job_name(&ctx, "other"),
            "9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60.other.1"
        );

        let no_spec = JobMetric::default();
        assert_eq!(
            build_job(&ctx, "test", &no_spec).unwrap_err().0,
            "job provider has no spec"
        );
        assert_eq!(
            build_job(&ctx, "", &job_metric()).unwrap_err().0,
            "metric has no name"
        );
    }

    fn with_conditions(conditions: &[(&str, &str)]) -> Job {
        Job {
            status: Some(JobStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| JobCondition {
                            type_: (*t).to_owned(),
                            status: (*s).to_owned(),
                            reason: (*t == "Failed").then(|| "BackoffLimitExceeded".to_owned()),
                            message: (*t == "Failed")
                                .then(|| "Job has reached the specified backoff limit".to_owned()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn phases_from_conditions() {
        assert_eq!(job_phase(&Job::default()), None);
        assert_eq!(job_phase(&with_conditions(&[("Suspended", "True")])), None);
        assert_eq!(job_phase(&with_conditions(&[("Complete", "False")])), None);
        assert_eq!(
            job_phase(&with_conditions(&[
                ("SuccessCriteriaMet", "True"),
                ("Complete", "True")
            ])),
            Some((AnalysisPhase::Successful, None))
        );
        assert_eq!(
            job_phase(&with_conditions(&[
                ("FailureTarget", "True"),
                ("Failed", "True")
            ])),
            Some((
                AnalysisPhase::Failed,
                Some("BackoffLimitExceeded: Job has reached the specified backoff limit".into())
            ))
        );
    }

    #[test]
    fn oldest_jobs_of_the_metric_are_deleted() {
        let job = |name: &str, metric: &str, second: i64| Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some(BTreeMap::from([(
                    ANALYSIS_RUN_METRIC_ANNOTATION.to_owned(),
                    metric.to_owned(),
                )])),
                creation_timestamp: Some(Time(jiff::Timestamp::from_second(second).unwrap())),
                ..Default::default()
            },
            ..Default::default()
        };
        let jobs = vec![
            job("u.m.3", "m", 30),
            job("u.m.1", "m", 10),
            job("u.o.1", "o", 5),
            job("u.m.2", "m", 20),
        ];
        assert_eq!(jobs_to_delete(jobs.clone(), "m", 1), ["u.m.1", "u.m.2"]);
        assert_eq!(jobs_to_delete(jobs.clone(), "m", 3), Vec::<String>::new());
        assert_eq!(jobs_to_delete(jobs, "o", 0), ["u.o.1"]);
    }

    /// A minimal API server for `batch/v1` Jobs, enough for create, get, list and delete.
    #[derive(Clone, Default)]
    struct FakeApi {
        jobs: Arc<Mutex<BTreeMap<(String, String), serde_json::Value>>>,
        deleted: Arc<Mutex<Vec<(String, serde_json::Value)>>>,
    }

    fn not_found(name: &str) -> (StatusCode, Json<serde_json::Value>) {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": format!("jobs.batch \"{name}\" not found"), "reason": "NotFound", "code": 404});
        (StatusCode::NOT_FOUND, Json(status))
    }

    fn fake_api(api: FakeApi) -> Router {
        async fn create(
            State(api): State<FakeApi>,
            Path(ns): Path<String>,
            Json(mut job): Json<serde_json::Value>,
        ) -> (StatusCode, Json<serde_json::Value>) {
            let name = job["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let mut jobs = api.jobs.lock().unwrap();
            if jobs.contains_key(&(ns.clone(), name.clone())) {
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "message": format!("jobs.batch \"{name}\" already exists"), "reason": "AlreadyExists", "code": 409});
                return (StatusCode::CONFLICT, Json(status));
            }
            let created = format!("2024-08-01T15:13:{:02}Z", jobs.len());
            job["metadata"]["creationTimestamp"] = json!(created);
            jobs.insert((ns, name), job.clone());
            (StatusCode::CREATED, Json(job))
        }
        async fn list(
            State(api): State<FakeApi>,
            Path(ns): Path<String>,
            Query(q): Query<HashMap<String, String>>,
        ) -> Json<serde_json::Value> {
            let selector = q.get("labelSelector").cloned().unwrap_or_default();
            let (key, value) = selector.split_once('=').unwrap_or_default();
            let items: Vec<_> = api
                .jobs
                .lock()
                .unwrap()
                .iter()
                .filter(|((n, _), j)| *n == ns && j["metadata"]["labels"][key] == value)
                .map(|(_, j)| j.clone())
                .collect();
            Json(
                json!({"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": items}),
            )
        }
        async fn read(
            State(api): State<FakeApi>,
            Path((ns, name)): Path<(String, String)>,
        ) -> (StatusCode, Json<serde_json::Value>) {
            match api.jobs.lock().unwrap().get(&(ns, name.clone())) {
                Some(job) => (StatusCode::OK, Json(job.clone())),
                None => not_found(&name),
            }
        }
        async fn remove(
            State(api): State<FakeApi>,
            Path((ns, name)): Path<(String, String)>,
            Json(options): Json<serde_json::Value>,
        ) -> (StatusCode, Json<serde_json::Value>) {
            match api.jobs.lock().unwrap().remove(&(ns, name.clone())) {
                Some(job) => {
                    api.deleted.lock().unwrap().push((name, options));
                    (StatusCode::OK, Json(job))
                }
                None => not_found(&name),
            }
        }
        Router::new()
            .route(
                "/apis/batch/v1/namespaces/{ns}/jobs",
                get(list).post(create),
            )
            .route(
                "/apis/batch/v1/namespaces/{ns}/jobs/{name}",
                get(read).delete(remove),
            )
            .with_state(api)
    }

    async fn start() -> (Providers, FakeApi) {
        install_crypto();
        let api = FakeApi::default();
        let url = serve(fake_api(api.clone())).await;
        let config = kube::Config::new(url.parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let providers = Providers::new(
            ProviderSettings::default(),
            Arc::new(MemorySecrets::new()),
            Some(client),
        )
        .unwrap();
        (providers, api)
    }

    fn metric() -> Metric {
        serde_json::from_value(json!({"name": "test", "provider": {"job": job_metric()}})).unwrap()
    }

    fn set_conditions(api: &FakeApi, name: &str, conditions: serde_json::Value) {
        let mut jobs = api.jobs.lock().unwrap();
        let job = jobs.get_mut(&("ns".to_owned(), name.to_owned())).unwrap();
        job["status"] = json!({"conditions": conditions});
    }

    #[tokio::test]
    async fn create_resume_and_finish() {
        let (p, api) = start().await;
        let ctx = ctx();
        let m = p.measure(&ctx, &metric()).await;
        assert_eq!(m.phase, Some(AnalysisPhase::Running), "{:?}", m.message);
        assert!(m.started_at.is_some() && m.finished_at.is_none());
        let name = "9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60.test.1";
        assert_eq!(
            m.metadata,
            Some(BTreeMap::from([
                (JOB_NAME_KEY.to_owned(), name.to_owned()),
                (JOB_NAMESPACE_KEY.to_owned(), "ns".to_owned()),
            ]))
        );
        let stored = api.jobs.lock().unwrap()[&("ns".to_owned(), name.to_owned())].clone();
        assert_eq!(
            stored["metadata"]["labels"][ANALYSIS_RUN_UID_LABEL],
            ctx.uid.as_str()
        );
        assert_eq!(stored["spec"]["backoffLimit"], 0);

        let m = p.resume(&ctx, &metric(), m).await;
        assert_eq!(m.phase, Some(AnalysisPhase::Running));
        set_conditions(&api, name, json!([{"type": "Complete", "status": "True"}]));
        let done = p.resume(&ctx, &metric(), m.clone()).await;
        assert_eq!(done.phase, Some(AnalysisPhase::Successful));
        assert!(done.finished_at.is_some());
        set_conditions(
            &api,
            name,
            json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]),
        );
        let failed = p.resume(&ctx, &metric(), m).await;
        assert_eq!(failed.phase, Some(AnalysisPhase::Failed));
        assert_eq!(failed.message.as_deref(), Some("DeadlineExceeded"));
    }

    #[tokio::test]
    async fn duplicate_create_is_adopted_only_when_owned() {
        let (p, _) = start().await;
        let first = p.measure(&ctx(), &metric()).await;
        let again = p.measure(&ctx(), &metric()).await;
        assert_eq!(
            again.phase,
            Some(AnalysisPhase::Running),
            "{:?}",
            again.message
        );
        assert_eq!(again.metadata, first.metadata);

        let (p2, api2) = start().await;
        let job = build_job(&ctx(), "test", &job_metric()).unwrap();
        let mut stranger = serde_json::to_value(&job).unwrap();
        stranger["metadata"]["ownerReferences"][0]["uid"] = json!("not-the-run");
        api2.jobs
            .lock()
            .unwrap()
            .insert(("ns".into(), job.metadata.name.clone().unwrap()), stranger);
        let m = p2.measure(&ctx(), &metric()).await;
        assert_eq!(m.phase, Some(AnalysisPhase::Error));
        assert!(
            m.message
                .unwrap()
                .ends_with("already exists and is not controlled by this AnalysisRun")
        );
    }

    #[tokio::test]
    async fn terminate_deletes_the_job() {
        let (p, api) = start().await;
        let m = p.measure(&ctx(), &metric()).await;
        let m = p.terminate(&ctx(), &metric(), m).await;
        assert_eq!(m.phase, Some(AnalysisPhase::Successful));
        assert!(m.finished_at.is_some());
        assert!(api.jobs.lock().unwrap().is_empty());
        let policy = api.deleted.lock().unwrap()[0].1["propagationPolicy"].clone();
        assert_eq!(policy, "Foreground");
        // Deleting again (the Job is gone) still succeeds.
        let again = p.terminate(&ctx(), &metric(), m).await;
        assert_eq!(again.phase, Some(AnalysisPhase::Successful));
    }

    #[tokio::test]
    async fn missing_references_are_errors() {
        let (p, _) = start().await;
        let bare = Measurement {
            phase: Some(AnalysisPhase::Running),
            ..Default::default()
        };
        let m = p.resume(&ctx(), &metric(), bare.clone()).await;
        assert_eq!(
            (m.phase, m.message.as_deref()),
            (
                Some(AnalysisPhase::Error),
                Some("job metadata reference missing")
            )
        );
        let m = p.terminate(&ctx(), &metric(), bare).await;
        assert_eq!(m.phase, Some(AnalysisPhase::Error));
        let gone = Measurement {
            phase: Some(AnalysisPhase::Running),
            metadata: Some(BTreeMap::from([(
                JOB_NAME_KEY.to_owned(),
                "nope".to_owned(),
            )])),
            ..Default::default()
        };
        let m = p.resume(&ctx(), &metric(), gone).await;
        assert_eq!(m.message.as_deref(), Some("job ns/nope not found"));

        let without_kube = super::super::test_support::providers(Default::default());
        let m = without_kube.measure(&ctx(), &metric()).await;
        assert_eq!(
            m.message.as_deref(),
            Some("the job provider needs a Kubernetes client")
        );
    }

    #[tokio::test]
    async fn garbage_collect_keeps_the_newest() {
        let (p, api) = start().await;
        for taken in 0..3 {
            let ctx = ctx().with_measurements_taken("test", taken);
            let m = p.measure(&ctx, &metric()).await;
            assert_eq!(m.phase, Some(AnalysisPhase::Running), "{:?}", m.message);
        }
        p.garbage_collect(&ctx(), &metric(), 1).await.unwrap();
        let left: Vec<String> = api
            .jobs
            .lock()
            .unwrap()
            .keys()
            .map(|(_, n)| n.clone())
            .collect();
        assert_eq!(left, ["9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60.test.3"]);
    }
}
