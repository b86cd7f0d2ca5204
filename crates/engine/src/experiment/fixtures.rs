//! Test fixtures: an Experiment named `ex` (uid `uid-1`) and the objects it would own.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use serde_json::{Value, json};
use sluice_api::experiment::{Experiment, TemplateSpec};

use super::observed::ExperimentObserved;
use super::replica_sets::build_replica_set;

pub(crate) const UID: &str = "uid-1";

pub(crate) fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

/// A template named `name` with `replicas` pods (app label `demo`, one container).
pub(crate) fn template(name: &str, replicas: i32) -> Value {
    json!({
        "name": name, "replicas": replicas,
        "selector": {"matchLabels": {"app": "demo"}},
        "template": {"metadata": {"labels": {"app": "demo"}},
                     "spec": {"containers": [{"name": "c", "image": format!("img:{name}")}]}}
    })
}

/// The Experiment `ex` with the given spec and status.
pub(crate) fn experiment(spec: Value, status: Value) -> Experiment {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
        "metadata": {"name": "ex", "namespace": "ns", "uid": UID},
        "spec": spec,
        "status": status
    }))
    .unwrap()
}

/// The ReplicaSet the Experiment made for its template `name`, at `replicas`, with
/// `available` of them available (and as many ready).
pub(crate) fn owned_rs(e: &Experiment, name: &str, replicas: i32, available: i32) -> ReplicaSet {
    let template: TemplateSpec = e
        .spec
        .templates
        .iter()
        .flatten()
        .find(|t| t.name.as_deref() == Some(name))
        .cloned()
        .unwrap();
    let mut rs = build_replica_set(e, UID, &template, None).unwrap();
    rs.metadata.resource_version = Some("1".into());
    rs.spec.as_mut().unwrap().replicas = Some(replicas);
    rs.status = Some(ReplicaSetStatus {
        replicas,
        ready_replicas: Some(available),
        available_replicas: Some(available),
        ..Default::default()
    });
    rs
}

pub(crate) fn observed(
    e: Experiment,
    replica_sets: Vec<ReplicaSet>,
    now: Timestamp,
) -> ExperimentObserved {
    ExperimentObserved {
        experiment: e,
        replica_sets,
        services: vec![],
        analysis_runs: vec![],
        analysis_templates: Default::default(),
        now,
    }
}
