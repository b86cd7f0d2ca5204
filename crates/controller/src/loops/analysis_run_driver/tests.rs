use std::sync::Mutex;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::analysis::AnalysisTemplateSpec;
use sluice_api::common::AnalysisPhase;
use sluice_engine::observed::TemplateKey;

use super::*;
use crate::loops::driver::STALE_RETRY;

/// A cluster that records the AnalysisRun writes it is asked for and answers them as told.
#[derive(Default)]
struct Recorder {
    writes: Mutex<Vec<String>>,
    refuse_patch: Option<fn() -> WriteError>,
    not_leader: bool,
}

impl Recorder {
    fn writes(&self) -> Vec<String> {
        self.writes.lock().unwrap().clone()
    }
}

fn unused<T>() -> Result<T, WriteError> {
    Err(WriteError::Api("not used by the AnalysisRun driver".into()))
}

impl ClusterAccess for Recorder {
    fn may_write(&self) -> Result<(), WriteError> {
        if self.not_leader {
            Err(WriteError::NotLeader)
        } else {
            Ok(())
        }
    }
    async fn create_replica_set(&self, _: &str, _: &ReplicaSet) -> Result<(), WriteError> {
        unused()
    }
    async fn patch_replica_set(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn delete_replica_set(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<(), WriteError> {
        unused()
    }
    async fn evict_pod(&self, _: &str, _: &str, _: Option<&str>) -> Result<(), WriteError> {
        unused()
    }
    async fn patch_pod(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn get_service(&self, _: &str, _: &str) -> Result<Option<Service>, WriteError> {
        unused()
    }
    async fn list_services(&self, _: &str) -> Result<Vec<Service>, WriteError> {
        unused()
    }
    async fn patch_service(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn list_pods(&self, _: &str, _: &str) -> Result<Vec<Pod>, WriteError> {
        unused()
    }
    async fn patch_rollout(
        &self,
        _: &str,
        _: &str,
        _: &Value,
    ) -> Result<Option<String>, WriteError> {
        unused()
    }
    async fn patch_rollout_status(
        &self,
        _: &str,
        _: &str,
        _: &Value,
    ) -> Result<Option<String>, WriteError> {
        unused()
    }
    async fn list_analysis_runs(&self, _: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        unused()
    }
    async fn get_analysis_template(
        &self,
        _: &str,
        _: &TemplateKey,
    ) -> Result<Option<AnalysisTemplateSpec>, WriteError> {
        unused()
    }
    async fn create_analysis_run(&self, _: &str, _: &AnalysisRun) -> Result<(), WriteError> {
        unused()
    }
    async fn patch_analysis_run(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.writes
            .lock()
            .unwrap()
            .push(format!("patch {ns}/{name} {patch}"));
        match self.refuse_patch {
            Some(e) => Err(e()),
            None => Ok(()),
        }
    }
    async fn delete_analysis_run(
        &self,
        ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.writes
            .lock()
            .unwrap()
            .push(format!("delete {ns}/{name} uid {}", uid.unwrap_or("-")));
        Ok(())
    }
}

/// Reports `value` for every Start, and records what it was asked to do.
struct Fixed {
    value: f64,
    asked: Mutex<Vec<String>>,
}

impl Fixed {
    fn new(value: f64) -> Self {
        Self {
            value,
            asked: Mutex::new(Vec::new()),
        }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Measurer for Fixed {
    async fn measure(&self, _: &AnalysisRun, tasks: Vec<MetricTask>) -> Vec<MeasurementResult> {
        tasks
            .into_iter()
            .map(|t| {
                self.asked
                    .lock()
                    .unwrap()
                    .push(format!("{:?} {}", t.kind, t.metric));
                let phase = if self.value >= 0.95 {
                    AnalysisPhase::Successful
                } else {
                    AnalysisPhase::Failed
                };
                let m = Measurement {
                    phase: Some(phase),
                    value: Some(format!("[{}]", self.value)),
                    started_at: Some(Time(now())),
                    finished_at: Some(Time(now())),
                    ..Default::default()
                };
                (t.metric, t.kind, m)
            })
            .collect()
    }

    async fn collect_garbage(&self, _: &AnalysisRun, metric: &str, kept: usize) {
        self.asked
            .lock()
            .unwrap()
            .push(format!("collect {metric} keeping {kept}"));
    }
}

fn now() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn run(extra: Value) -> AnalysisRun {
    let mut v = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": "r", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
        "spec": {"metrics": [{
            "name": "m", "interval": "10s", "count": 2,
            "successCondition": "result[0] >= 0.95",
            "provider": {"prometheus": {"address": "http://p:9090", "query": "q"}}
        }]}
    });
    merge_into(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

/// Merges `extra` into `v` key by key (objects only), for building fixtures.
fn merge_into(v: &mut Value, extra: Value) {
    match (v, extra) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, bv) in b {
                merge_into(a.entry(k).or_insert(Value::Null), bv);
            }
        }
        (a, b) => *a = b,
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_new_run_measures_writes_its_status_at_the_observed_version_and_waits_for_the_interval() {
    let cluster = Recorder::default();
    let measurer = Fixed::new(0.99);
    let r = run(json!({}));
    let done = block_on(reconcile(&cluster, &measurer, &r, now())).unwrap();
    assert_eq!(measurer.asked(), ["Start m", "collect m keeping 1"]);
    let writes = cluster.writes();
    assert_eq!(writes.len(), 1);
    assert!(
        writes[0].starts_with(r#"patch ns/r {"metadata":{"resourceVersion":"7"},"status":{"#),
        "{}",
        writes[0]
    );
    assert!(writes[0].contains(r#""phase":"Running""#), "{}", writes[0]);
    assert!(done.status_written && !done.deleted);
    assert_eq!(done.requeue, Requeue::After(Duration::from_secs(10)));
    assert_eq!(done.phase_change(&r), Some(("Running", "")));
    assert_eq!(requeue(&Ok(done)), Requeue::After(Duration::from_secs(10)));
}

#[test]
fn a_conflict_ends_the_pass_before_garbage_or_deletion_and_comes_back_soon() {
    let cluster = Recorder {
        refuse_patch: Some(|| WriteError::Conflict),
        ..Default::default()
    };
    let measurer = Fixed::new(0.5);
    let result = block_on(reconcile(&cluster, &measurer, &run(json!({})), now()));
    assert!(matches!(result, Err(WriteError::Conflict)));
    assert_eq!(measurer.asked(), ["Start m"]);
    assert_eq!(requeue(&result), Requeue::After(STALE_RETRY));
}

#[test]
fn a_follower_writes_nothing() {
    let cluster = Recorder {
        not_leader: true,
        ..Default::default()
    };
    let result = block_on(reconcile(
        &cluster,
        &Fixed::new(0.99),
        &run(json!({})),
        now(),
    ));
    assert!(matches!(result, Err(WriteError::NotLeader)));
    assert!(cluster.writes().is_empty());
    assert_eq!(requeue(&result), Requeue::AwaitChange);
}

fn finished(completed_at: &str, ttl: Value) -> AnalysisRun {
    run(json!({
        "spec": {"ttlStrategy": ttl},
        "status": {"phase": "Successful", "startedAt": "2025-12-31T23:00:00Z",
                   "completedAt": completed_at}
    }))
}

#[test]
fn a_finished_run_is_deleted_by_uid_when_its_ttl_runs_out_and_not_before() {
    let cluster = Recorder::default();
    let measurer = Fixed::new(0.99);
    let due = finished("2025-12-31T23:59:00Z", json!({"secondsAfterSuccess": 60}));
    let done = block_on(reconcile(&cluster, &measurer, &due, now())).unwrap();
    assert_eq!(cluster.writes(), ["delete ns/r uid u1"]);
    assert!(done.deleted && !done.status_written);
    assert_eq!(done.requeue, Requeue::AwaitChange);
    assert!(measurer.asked().is_empty());

    let cluster = Recorder::default();
    let later = finished("2025-12-31T23:59:30Z", json!({"secondsAfterSuccess": 60}));
    let done = block_on(reconcile(&cluster, &measurer, &later, now())).unwrap();
    assert!(cluster.writes().is_empty());
    assert_eq!(done.requeue, Requeue::After(Duration::from_secs(30)));
}

#[test]
fn a_finished_run_without_ttl_and_a_run_being_deleted_are_left_alone() {
    let cluster = Recorder::default();
    let measurer = Fixed::new(0.99);
    let kept = finished("2025-12-31T23:59:00Z", json!({}));
    let done = block_on(reconcile(&cluster, &measurer, &kept, now())).unwrap();
    assert_eq!(done.requeue, Requeue::AwaitChange);
    assert_eq!(done.phase_change(&kept), None);

    let going = run(json!({"metadata": {"deletionTimestamp": "2025-12-31T23:59:00Z"}}));
    let done = block_on(reconcile(&cluster, &measurer, &going, now())).unwrap();
    assert_eq!(done.assessment, None);
    assert_eq!(done.requeue, Requeue::AwaitChange);
    assert!(cluster.writes().is_empty());
    assert!(measurer.asked().is_empty());
}

#[test]
fn a_stopping_run_comes_back_soon_but_not_at_once() {
    let cluster = Recorder::default();
    let measurer = Fixed::new(0.5);
    // A second metric's measurement is still in flight (a Job, polled later) when the first
    // fails: the run stops on the next pass, which it asks for at once, clamped.
    let r = run(json!({
        "spec": {"metrics": [
            {"name": "m", "successCondition": "result[0] >= 0.95",
             "provider": {"prometheus": {"address": "http://p:9090", "query": "q"}}},
            {"name": "j", "provider": {"job": {"spec": {"template": {"spec": {"containers": []}}}}}}
        ]},
        "status": {"phase": "Running", "startedAt": "2025-12-31T23:59:00Z", "metricResults": [
            {"name": "j", "phase": "Running", "measurements": [
                {"phase": "Running", "startedAt": "2025-12-31T23:59:00Z",
                 "resumeAt": "2026-01-01T00:01:00Z"}
            ]}
        ]}
    }));
    let done = block_on(reconcile(&cluster, &measurer, &r, now())).unwrap();
    assert_eq!(measurer.asked(), ["Start m", "collect m keeping 1"]);
    assert_eq!(done.requeue, Requeue::After(MIN_REQUEUE));
}
