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
    // The pods carry the run's uid too (Argo 1.10 selects them by it).
    let mut spec = job_metric().spec.unwrap();
    spec.template.metadata = Some(ObjectMeta {
        labels: Some(BTreeMap::from([(
            ANALYSIS_RUN_UID_LABEL.to_owned(),
            "9c2f3e55-4d3b-4b8f-9a0a-1b2c3d4e5f60".to_owned(),
        )])),
        ..Default::default()
    });
    assert_eq!(job.spec, Some(spec));
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
        Json(json!({"kind": "JobList", "apiVersion": "batch/v1", "metadata": {}, "items": items}))
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
    // As Argo: the Job's reason is not the measurement's message.
    assert_eq!(failed.message, None);
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
    // Argo 1.10: a Job cut short proved nothing.
    assert_eq!(m.phase, Some(AnalysisPhase::Inconclusive));
    assert!(m.finished_at.is_some());
    assert!(api.jobs.lock().unwrap().is_empty());
    let policy = api.deleted.lock().unwrap()[0].1["propagationPolicy"].clone();
    assert_eq!(policy, "Foreground");
    // Deleting again (the Job is gone) still succeeds.
    let again = p.terminate(&ctx(), &metric(), m).await;
    assert_eq!(again.phase, Some(AnalysisPhase::Inconclusive));
}

#[test]
fn a_container_that_cannot_pull_its_image_is_a_terminal_error_in_argos_words() {
    let pod = |init: serde_json::Value, main: serde_json::Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "run.job.1-x7k2p"},
            "status": {"initContainerStatuses": init, "containerStatuses": main}
        }))
        .unwrap()
    };
    let waiting = |name: &str, reason: &str| {
        json!([{"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": "pull access denied"}}}])
    };
    assert_eq!(
        terminal_pod_error(&pod(json!([]), waiting("check", "ImagePullBackOff"))).as_deref(),
        Some(
            "Pod run.job.1-x7k2p, container check has terminal error (ImagePullBackOff): pull access denied\n"
        )
    );
    // Init containers first, as Argo looks at them first.
    let both = pod(
        waiting("setup", "InvalidImageName"),
        waiting("check", "ErrImagePull"),
    );
    assert!(
        terminal_pod_error(&both)
            .unwrap()
            .contains("container setup has terminal error (InvalidImageName)")
    );
    // Waiting for other reasons is not terminal: the Job may still run.
    assert_eq!(
        terminal_pod_error(&pod(json!([]), waiting("check", "ContainerCreating"))),
        None
    );
    assert_eq!(terminal_pod_error(&pod(json!([]), json!([]))), None);
}

#[test]
fn a_running_job_is_looked_at_again_later_the_older_it_is() {
    let now: jiff::Timestamp = "2026-01-01T00:00:50Z".parse().unwrap();
    let at = |started: &str| {
        let started: jiff::Timestamp = started.parse().unwrap();
        next_look(Some(started), now)
            .0
            .duration_since(now)
            .as_secs_f64()
    };
    assert_eq!(at("2026-01-01T00:00:50Z"), 0.0);
    assert_eq!(at("2026-01-01T00:00:42Z"), 4.0);
    assert_eq!(at("2026-01-01T00:00:00Z"), 10.0);
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
