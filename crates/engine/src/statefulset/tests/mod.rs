//! The StatefulSet canary, decided on hand-made StatefulSets: what the StatefulSet controller
//! would report at each point is written into the fixture's status.

use jiff::Timestamp;
use serde_json::{Value, json};
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::{PauseReason, Rollout, RolloutPhase, RolloutStatus};

use super::*;
use crate::observed::{Observed, TemplateKey};
use crate::plan::{Action, Plan};

const REPLICAS: i32 = 4;

fn rollout(steps: Value, status: Option<RolloutStatus>) -> Rollout {
    let mut ro: Rollout = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "db", "namespace": "ns", "generation": 1, "uid": "u-1",
                     "annotations": {STATEFULSET: "db"}},
        "spec": {"strategy": {"canary": {"steps": steps}}}
    }))
    .unwrap();
    ro.status = status;
    ro
}

/// The Rollout's canary strategy, to edit one field of it.
fn canary_mut(ro: &mut Rollout) -> &mut sluice_api::rollout::CanaryStrategy {
    ro.spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
        .expect("the fixture is a canary")
}

fn steps() -> Value {
    json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}, {"pause": {"duration": "2s"}}])
}

/// The StatefulSet as its controller reports it: the update and current revisions' hashes,
/// how many pods run the update revision, how many are ready.
fn sts(partition: Option<i32>, update: &str, current: &str, updated: i32, ready: i32) -> Value {
    let mut sts = json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "ns", "generation": 2, "resourceVersion": "7"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "db"}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": template(update)
        },
        "status": {
            "observedGeneration": 2,
            "replicas": REPLICAS,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "updatedReplicas": updated,
            "currentReplicas": REPLICAS - updated,
            "updateRevision": format!("db-{update}"),
            "currentRevision": format!("db-{current}")
        }
    });
    if let Some(p) = partition {
        sts["spec"]["updateStrategy"]["rollingUpdate"] = json!({"partition": p});
    }
    sts
}

fn template(hash: &str) -> Value {
    json!({"metadata": {"labels": {"app": "db"}},
           "spec": {"containers": [{"name": "db", "image": format!("db:{hash}")}]}})
}

fn revision(hash: &str, number: i64) -> Value {
    let mut data = json!({"spec": {"template": template(hash)}});
    data["spec"]["template"]["$patch"] = json!("replace");
    json!({"metadata": {"name": format!("db-{hash}")}, "revision": number, "data": data})
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn decide(ro: &Rollout, sts: Option<Value>, now: Timestamp) -> Plan {
    decide_with_runs(ro, sts, &[], now)
}

/// As [`decide`], with the Rollout's AnalysisRuns, and the AnalysisTemplates `t` (of the
/// analysis steps) and `b` (of the background analysis).
fn decide_with_runs(
    ro: &Rollout,
    sts: Option<Value>,
    runs: &[AnalysisRun],
    now: Timestamp,
) -> Plan {
    decide_with(ro, sts, runs, &[], now)
}

/// As [`decide_with_runs`], with the StatefulSet's pods.
fn decide_with(
    ro: &Rollout,
    sts: Option<Value>,
    runs: &[AnalysisRun],
    pods: &[k8s_openapi::api::core::v1::Pod],
    now: Timestamp,
) -> Plan {
    let template: AnalysisTemplateSpec = serde_json::from_value(json!({
        "metrics": [{"name": "m", "provider": {"web": {"url": "http://metrics/"}}}]
    }))
    .unwrap();
    let analysis_templates = ["t", "b"]
        .into_iter()
        .map(|name| {
            let key = TemplateKey {
                cluster_scope: false,
                name: name.into(),
            };
            (key, template.clone())
        })
        .collect();
    let observed = Observed {
        rollout: ro.clone(),
        replica_sets: Vec::new(),
        pods: pods.to_vec(),
        services: Vec::new(),
        analysis_runs: runs.to_vec(),
        analysis_templates,
        router_objects: Default::default(),
        router_versions: Default::default(),
        experiments: Vec::new(),
        workload: None,
        stateful_set: Some(StatefulSetObserved {
            stateful_set: sts,
            revisions: vec![revision("a", 1), revision("b", 2)],
        }),
        daemon_set: None,
        config: None,
        progress_held_since: None,
        step_plugin_answers: Vec::new(),
        target_registration: None,
        now,
    };
    crate::reconcile(&observed)
}

/// The StatefulSet the plan writes, if it writes one.
fn written(plan: &Plan) -> Option<&Value> {
    let mut writes = plan.actions.iter().filter_map(|a| match a {
        Action::UpdateStatefulSet { object, .. } => Some(object.as_ref()),
        Action::CreateAnalysisRun { .. }
        | Action::EvictPod { .. }
        | Action::TerminateAnalysisRun { .. }
        | Action::DeleteAnalysisRun { .. }
        | Action::AnnotateAnalysisRun { .. } => None,
        other => panic!("unexpected action {other:?}"),
    });
    let first = writes.next();
    assert!(
        writes.next().is_none(),
        "one write per plan: {:?}",
        plan.actions
    );
    first
}

fn written_partition(plan: &Plan) -> Option<i64> {
    written(plan).map(|o| {
        o["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
            .as_i64()
            .unwrap()
    })
}

fn reasons(plan: &Plan) -> Vec<&str> {
    plan.events.iter().map(|e| e.reason).collect()
}

/// Status a reconcile leaves, as the next one reads it.
fn next(ro: &Rollout, plan: &Plan) -> Rollout {
    let mut ro = ro.clone();
    ro.status = Some(plan.status.clone());
    ro
}

mod analysis_gates;
mod partitions;
mod progress_deadline;
