//! A Rollout that takes its template from a Deployment (`workloadRef`): the same ReplicaSets
//! as with the template inline, the generation it has seen recorded where Argo CD reads it,
//! and the Deployment scaled down as `scaleDown` says, once, for the first revision.

use serde_json::{Value, json};
use sluice_api::rollout::{RolloutConditionType, RolloutPhase};

use super::{World, rollout};
use crate::workload::WORKLOAD_GENERATION;

fn steps() -> Value {
    json!([{"setWeight": 50}, {"pause": {}}])
}

/// A Rollout of 4 that takes the test Rollout's template and selector from Deployment
/// `demo` (4 replicas, generation 2).
fn migrating(scale_down: &str) -> World {
    let mut ro = rollout(4, steps());
    let template = ro.spec.template.take().unwrap();
    let selector = ro.spec.selector.take().unwrap();
    ro.spec.workload_ref = Some(
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "name": "demo", "scaleDown": scale_down
        }))
        .unwrap(),
    );
    let mut w = World::new(ro);
    w.workload = Some(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "demo", "namespace": "ns", "generation": 2, "resourceVersion": "7"},
        "spec": {"replicas": 4, "selector": selector, "template": template}
    }));
    w
}

fn deployment_replicas(w: &World) -> i64 {
    w.workload.as_ref().unwrap()["spec"]["replicas"]
        .as_i64()
        .unwrap()
}

fn ready(w: &World) -> i32 {
    w.status().ready_replicas.unwrap_or(0)
}

/// Reconciles until settled, returning (Deployment replicas, Rollout ready, phase) after
/// each reconcile.
fn walk(w: &mut World) -> Vec<(i64, i32, RolloutPhase)> {
    let mut seen = Vec::new();
    for _ in 0..50 {
        let before = (w.ro.clone(), w.rss.clone(), w.workload.clone());
        w.reconcile();
        seen.push((deployment_replicas(w), ready(w), w.phase()));
        if before == (w.ro.clone(), w.rss.clone(), w.workload.clone()) {
            return seen;
        }
    }
    panic!("did not settle: {seen:?}");
}

#[test]
fn the_template_of_the_deployment_makes_the_same_replica_set_as_inline() {
    let mut inline = World::new(rollout(4, steps()));
    inline.settle();
    let mut w = migrating("never");
    let seen = walk(&mut w);
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(
        w.status().current_pod_hash,
        inline.status().current_pod_hash
    );
    assert_eq!(w.replicas_by_image(), vec![("app:v1".to_string(), 4)]);
    // never: the Deployment keeps its pods.
    assert!(seen.iter().all(|s| s.0 == 4), "{seen:?}");
    // What Argo CD compares: the annotation and the status field.
    assert_eq!(
        w.ro.metadata.annotations.as_ref().unwrap()[WORKLOAD_GENERATION],
        "2"
    );
    assert_eq!(
        w.status().workload_observed_generation.as_deref(),
        Some("2")
    );
    // Nothing of the resolution is written back: the Rollout's template stays empty.
    assert!(w.ro.spec.template.is_none());
}

#[test]
fn on_success_scales_the_deployment_down_once_the_rollout_is_healthy() {
    let mut w = migrating("onsuccess");
    let seen = walk(&mut w);
    assert_eq!(deployment_replicas(&w), 0, "{seen:?}");
    // The Deployment is scaled only in the reconcile after the one that found it Healthy.
    let first_down = seen.iter().position(|s| s.0 == 0).unwrap();
    assert!(first_down > 0 && seen[first_down - 1].2 == RolloutPhase::Healthy);
    assert!(seen[..first_down].iter().all(|s| s.0 == 4), "{seen:?}");
}

#[test]
fn progressively_gives_back_one_deployment_pod_per_ready_rollout_pod() {
    let mut w = migrating("progressively");
    let seen = walk(&mut w);
    assert_eq!(deployment_replicas(&w), 0, "{seen:?}");
    assert!(seen.iter().all(|s| s.0 + i64::from(s.1) >= 4), "{seen:?}");
}

#[test]
fn a_new_deployment_template_is_an_update_that_leaves_the_deployment_alone() {
    let mut w = migrating("progressively");
    walk(&mut w);
    assert_eq!(deployment_replicas(&w), 0);
    let d = w.workload.as_mut().unwrap();
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("app:v2");
    d["metadata"]["generation"] = json!(3);
    // Someone scales the Deployment back up: revision 2 is no migration, it stays so.
    d["spec"]["replicas"] = json!(1);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".to_string(), 2), ("app:v2".to_string(), 2)]
    );
    assert_eq!(deployment_replicas(&w), 1);
    assert_eq!(
        w.status().workload_observed_generation.as_deref(),
        Some("3")
    );
    assert_eq!(
        w.ro.metadata.annotations.as_ref().unwrap()[WORKLOAD_GENERATION],
        "3"
    );
}

#[test]
fn a_missing_deployment_is_an_invalid_spec_in_kubernetes_words() {
    let mut w = migrating("never");
    w.workload = None;
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    let message = w
        .status()
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(RolloutConditionType::InvalidSpec))
        .and_then(|c| c.message.clone());
    assert_eq!(
        message.as_deref(),
        Some("The Rollout \"demo\" is invalid: deployments.apps \"demo\" not found")
    );
    assert_eq!(w.status().workload_observed_generation, None);
}

#[test]
fn a_template_beside_the_reference_is_argos_invalid_spec() {
    let mut w = migrating("never");
    w.ro.spec.template = rollout(4, steps()).spec.template;
    w.reconcile();
    let message = w.status().message.clone().unwrap_or_default();
    assert!(
        message.ends_with("template must be empty for workload reference rollout"),
        "{message}"
    );
    assert_eq!(deployment_replicas(&w), 4);
}
