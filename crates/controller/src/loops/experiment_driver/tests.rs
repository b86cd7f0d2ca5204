use std::sync::Mutex;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::Value;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_engine::observed::TemplateKey;

use super::*;

/// An empty namespace that records the writes it is asked for and answers them as told.
#[derive(Default)]
struct Recorder {
    writes: Mutex<Vec<String>>,
    /// What a ReplicaSet create answers.
    refuse_create: Option<fn() -> WriteError>,
    not_leader: bool,
}

impl Recorder {
    fn writes(&self) -> Vec<String> {
        self.writes.lock().unwrap().clone()
    }

    fn record(&self, write: String) {
        self.writes.lock().unwrap().push(write);
    }
}

fn unused<T>() -> Result<T, WriteError> {
    Err(WriteError::Api("not used by the Experiment driver".into()))
}

impl ClusterAccess for Recorder {
    fn may_write(&self) -> Result<(), WriteError> {
        if self.not_leader {
            Err(WriteError::NotLeader)
        } else {
            Ok(())
        }
    }
    async fn create_replica_set(&self, ns: &str, rs: &ReplicaSet) -> Result<(), WriteError> {
        let name = rs.metadata.name.as_deref().unwrap_or_default();
        self.record(format!("create rs {ns}/{name}"));
        self.refuse_create.map_or(Ok(()), |e| Err(e()))
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
        Ok(Vec::new())
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
    async fn patch_analysis_run(&self, _: &str, _: &str, _: &Value) -> Result<(), WriteError> {
        unused()
    }
    async fn delete_analysis_run(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<(), WriteError> {
        unused()
    }
    async fn list_replica_sets(&self, _: &str) -> Result<Vec<ReplicaSet>, WriteError> {
        Ok(Vec::new())
    }
    async fn list_every_analysis_run(&self, _: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        Ok(Vec::new())
    }
    async fn patch_experiment(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.record(format!("patch experiment {ns}/{name} {patch}"));
        Ok(())
    }
}

/// A new Experiment `ex` of namespace `ns`, read at resourceVersion 7, with one template.
fn experiment() -> Experiment {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
        "metadata": {"name": "ex", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7"},
        "spec": {"templates": [{
            "name": "canary", "replicas": 1,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {"metadata": {"labels": {"app": "demo"}},
                         "spec": {"containers": [{"name": "c", "image": "img"}]}}
        }]}
    }))
    .unwrap()
}

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

fn run(cluster: &Recorder) -> Result<Reconciled, ExperimentError> {
    futures::executor::block_on(reconcile(cluster, &experiment(), now()))
}

#[test]
fn the_plan_is_written_then_the_status_at_the_version_it_was_decided_on() {
    let cluster = Recorder::default();
    let result = run(&cluster);
    let Ok(Reconciled::Applied { failed_writes, .. }) = &result else {
        panic!("not applied: {result:?}");
    };
    assert!(failed_writes.is_empty());
    let writes = cluster.writes();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert_eq!(writes[0], "create rs ns/ex-canary");
    assert!(
        writes[1].starts_with("patch experiment ns/ex "),
        "{writes:?}"
    );
    let patch: Value = serde_json::from_str(writes[1].splitn(4, ' ').nth(3).unwrap()).unwrap();
    assert_eq!(patch["metadata"]["resourceVersion"], "7");
    assert_eq!(patch["status"]["phase"], "Pending");
}

#[test]
fn a_failed_write_is_told_to_the_engine_and_the_status_still_written() {
    let cluster = Recorder {
        refuse_create: Some(|| WriteError::Api("quota exceeded".into())),
        ..Recorder::default()
    };
    let result = run(&cluster);
    let Ok(Reconciled::Applied {
        plan,
        failed_writes,
    }) = &result
    else {
        panic!("not applied: {result:?}");
    };
    assert_eq!(failed_writes.len(), 1, "{failed_writes:?}");
    assert!(failed_writes[0].ends_with("quota exceeded"));
    let writes = cluster.writes();
    assert!(
        writes[1].starts_with("patch experiment ns/ex "),
        "{writes:?}"
    );
    // The engine amended the status it writes with the failure.
    let status = serde_json::to_string(&plan.status).unwrap();
    assert!(status.contains("quota exceeded"), "{status}");
}

#[test]
fn a_lost_leadership_writes_nothing_and_waits_for_a_change() {
    let cluster = Recorder {
        not_leader: true,
        ..Recorder::default()
    };
    let result = run(&cluster);
    assert!(
        matches!(result, Ok(Reconciled::LostLeadership)),
        "{result:?}"
    );
    assert!(cluster.writes().is_empty());
    assert_eq!(
        requeue(&result, Duration::from_secs(900)),
        Requeue::AwaitChange
    );
}

#[test]
fn requeue_is_as_the_plan_asks_within_the_resync_period_and_soon_after_a_failure() {
    let resync = Duration::from_secs(900);
    let applied = |after: Option<u64>| {
        let mut plan = reconcile_experiment(&observe_now());
        plan.requeue_after = after.map(Duration::from_secs);
        Ok(Reconciled::Applied {
            plan: Box::new(plan),
            failed_writes: Vec::new(),
        })
    };
    assert_eq!(
        requeue(&applied(Some(30)), resync),
        Requeue::After(Duration::from_secs(30))
    );
    assert_eq!(
        requeue(&applied(Some(3600)), resync),
        Requeue::After(resync)
    );
    assert_eq!(requeue(&applied(None), resync), Requeue::After(resync));
    let failed = Err(ExperimentError::Undecidable("no".into()));
    assert_eq!(requeue(&failed, resync), Requeue::After(ERROR_RETRY));
}

fn observe_now() -> ExperimentObserved {
    futures::executor::block_on(observe(&Recorder::default(), &experiment(), now())).unwrap()
}
