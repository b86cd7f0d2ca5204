//! The DaemonSet canary, decided on hand-made DaemonSets and pods: what the DaemonSet
//! controller would have done at each point (a pod per node, an evicted pod's successor made
//! from the newest revision) is written into the fixture.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use sluice_api::rollout::{PauseReason, Rollout, RolloutPhase, RolloutStatus};

use super::*;
use crate::observed::Observed;
use crate::plan::{Action, Plan};

const NODES: usize = 4;

fn rollout(canary: Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "agent", "namespace": "ns", "generation": 1, "uid": "u-1",
                     "annotations": {DAEMONSET: "agent"}},
        "spec": {"strategy": {"canary": canary}}
    }))
    .unwrap()
}

fn steps() -> Value {
    json!({"steps": [{"setWeight": 25}, {"pause": {}}, {"setCanaryScale": {"replicas": 3}},
                     {"pause": {"duration": "2s"}}]})
}

/// The DaemonSet as its controller reports it, its template that of `template`.
fn daemon_set(template: &str, strategy: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "ns", "uid": "ds-1", "generation": 2,
                     "resourceVersion": "9"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": strategy},
            "template": pod_template(template)
        },
        "status": {"observedGeneration": 2, "desiredNumberScheduled": NODES,
                   "currentNumberScheduled": NODES, "numberReady": NODES,
                   "numberAvailable": NODES}
    })
}

fn pod_template(hash: &str) -> Value {
    json!({"metadata": {"labels": {"app": "agent"}},
           "spec": {"containers": [{"name": "agent", "image": format!("agent:{hash}")}]}})
}

/// The ControllerRevisions: `order` oldest first, so the last is the update revision.
fn revisions(order: &[&str]) -> Vec<Value> {
    order
        .iter()
        .enumerate()
        .map(|(i, hash)| {
            let mut data = json!({"spec": {"template": pod_template(hash)}});
            data["spec"]["template"]["$patch"] = json!("replace");
            json!({"metadata": {"name": format!("agent-{hash}")}, "revision": i + 1,
                   "data": data})
        })
        .collect()
}

/// A pod of the DaemonSet on `node`, from revision `hash`.
fn pod(node: usize, hash: &str, ready: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("agent-{hash}-{node}"), "namespace": "ns",
                     "uid": format!("uid-{hash}-{node}"),
                     "labels": {"app": "agent", "controller-revision-hash": hash},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "name": "agent", "uid": "ds-1", "controller": true}]},
        "spec": {"nodeName": format!("node-{node}"),
                 "containers": [{"name": "agent", "image": format!("agent:{hash}")}]},
        "status": {"conditions": [{"type": "Ready",
                                   "status": if ready { "True" } else { "False" }}]}
    }))
    .unwrap()
}

/// A pod on every node, node `i` from `hashes[i]`, all ready.
fn fleet(hashes: [&str; NODES]) -> Vec<Pod> {
    hashes
        .iter()
        .enumerate()
        .map(|(i, h)| pod(i, h, true))
        .collect()
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

struct World {
    ds: Value,
    revisions: Vec<Value>,
    pods: Vec<Pod>,
}

fn decide(ro: &Rollout, world: &World, now: Timestamp) -> Plan {
    let observed = Observed {
        pods: world.pods.clone(),
        daemon_set: Some(DaemonSetObserved {
            daemon_set: Some(world.ds.clone()),
            revisions: world.revisions.clone(),
        }),
        ..Observed::new(ro.clone(), now)
    };
    crate::reconcile(&observed)
}

fn next(ro: &Rollout, plan: &Plan) -> Rollout {
    let mut ro = ro.clone();
    ro.status = Some(plan.status.clone());
    ro
}

fn evicted(plan: &Plan) -> Vec<String> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::EvictPod { name, uid } => {
                assert_eq!(uid.as_deref(), Some(format!("uid-{}", &name[6..]).as_str()));
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

fn status(plan: &Plan) -> &RolloutStatus {
    &plan.status
}

/// A Rollout that has adopted revision `a` on every node, Healthy.
fn healthy(canary: Value) -> Rollout {
    let ro = rollout(canary);
    let world = World {
        ds: daemon_set("a", "OnDelete"),
        revisions: revisions(&["a"]),
        pods: fleet(["a"; NODES]),
    };
    let plan = decide(&ro, &world, at(0));
    assert_eq!(status(&plan).stable_rs.as_deref(), Some("a"));
    assert_eq!(status(&plan).phase, Some(RolloutPhase::Healthy));
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    next(&ro, &plan)
}

/// The DaemonSet after its template became `b`: revision `b` is the newest.
fn updated_world(pods: Vec<Pod>) -> World {
    World {
        ds: daemon_set("b", "OnDelete"),
        revisions: revisions(&["a", "b"]),
        pods,
    }
}

#[test]
fn a_canary_walks_its_nodes_through_the_steps() {
    let ro = healthy(steps());
    // The template changed: the first step's one node of four has its pod evicted.
    let plan = decide(&ro, &updated_world(fleet(["a"; NODES])), at(10));
    assert_eq!(status(&plan).current_pod_hash.as_deref(), Some("b"));
    assert_eq!(evicted(&plan), ["agent-a-0"]);
    assert_eq!(status(&plan).phase, Some(RolloutPhase::Progressing));
    let ro = next(&ro, &plan);

    // The eviction under way: nothing more is evicted, the step waits.
    let mut pods = fleet(["a"; NODES]);
    pods[0].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(11)));
    let plan = decide(&ro, &updated_world(pods), at(11));
    assert!(evicted(&plan).is_empty());
    assert_eq!(status(&plan).current_step_index, Some(0));
    assert!(matches!(
        plan.waits[0],
        crate::Wait::PodsNotAvailable { .. }
    ));

    // Gone before the DaemonSet controller made its successor: node 0 has no pod at all, and
    // it still counts as the step's node (evicting another here was a bug).
    let plan = decide(
        &ro,
        &updated_world(fleet(["a"; NODES])[1..].to_vec()),
        at(11),
    );
    assert!(evicted(&plan).is_empty(), "{:?}", plan.actions);
    assert_eq!(status(&plan).current_step_index, Some(0));

    // Node 0 runs b, not ready yet: still waiting.
    let mut pods = fleet(["b", "a", "a", "a"]);
    pods[0] = pod(0, "b", false);
    let plan = decide(&ro, &updated_world(pods), at(12));
    assert!(evicted(&plan).is_empty());
    assert_eq!(status(&plan).current_step_index, Some(0));

    // Ready: the step completes and the pause holds the update.
    let plan = decide(&ro, &updated_world(fleet(["b", "a", "a", "a"])), at(13));
    assert_eq!(status(&plan).current_step_index, Some(1));
    assert!(
        status(&plan)
            .pause_conditions
            .iter()
            .flatten()
            .any(|p| p.reason == Some(PauseReason::CanaryPauseStep))
    );
    assert!(evicted(&plan).is_empty());
    assert_eq!(status(&plan).updated_replicas, Some(1));
    let mut ro = next(&ro, &plan);

    // Promoted: setCanaryScale takes three nodes, the budget (25% of 4, at least 1) one at
    // a time, by node name.
    ro.status.as_mut().unwrap().pause_conditions = None;
    let plan = decide(&ro, &updated_world(fleet(["b", "a", "a", "a"])), at(20));
    assert_eq!(evicted(&plan), ["agent-a-1"]);
    let ro = next(&ro, &plan);
    let plan = decide(&ro, &updated_world(fleet(["b", "b", "a", "a"])), at(21));
    assert_eq!(evicted(&plan), ["agent-a-2"]);
    let ro = next(&ro, &plan);
    let plan = decide(&ro, &updated_world(fleet(["b", "b", "b", "a"])), at(22));
    assert!(evicted(&plan).is_empty(), "three nodes, as the step asks");
    assert_eq!(status(&plan).current_step_index, Some(3));
    let ro = next(&ro, &plan);

    // The timed pause runs out: the last node, then the update is complete.
    let plan = decide(&ro, &updated_world(fleet(["b", "b", "b", "a"])), at(25));
    assert_eq!(evicted(&plan), ["agent-a-3"]);
    let ro = next(&ro, &plan);
    let plan = decide(&ro, &updated_world(fleet(["b"; NODES])), at(26));
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(status(&plan).stable_rs.as_deref(), Some("b"));
    assert_eq!(status(&plan).phase, Some(RolloutPhase::Healthy));
    assert!(
        plan.events
            .iter()
            .any(|e| e.reason == "RolloutCompleted" && e.message.contains("revision 2 (b)"))
    );
}

#[test]
fn max_unavailable_is_how_many_nodes_go_at_once_and_unready_old_pods_go_first() {
    let ro = healthy(json!({"maxUnavailable": 2, "steps": [{"setWeight": 100}]}));
    let mut pods = fleet(["a"; NODES]);
    pods[3] = pod(3, "a", false);
    let plan = decide(&ro, &updated_world(pods), at(10));
    assert_eq!(
        evicted(&plan),
        ["agent-a-3", "agent-a-0"],
        "node 3 was down already: one ready node more makes two down"
    );
}

#[test]
fn an_abort_restores_the_stable_template_then_brings_the_updated_nodes_back() {
    let ro = healthy(steps());
    let plan = decide(&ro, &updated_world(fleet(["a"; NODES])), at(10));
    let ro = next(&ro, &plan);
    let plan = decide(&ro, &updated_world(fleet(["b", "a", "a", "a"])), at(11));
    let mut ro = next(&ro, &plan);
    ro.status.as_mut().unwrap().abort = Some(true);

    // The template goes back, in one write carrying the resourceVersion read.
    let plan = decide(&ro, &updated_world(fleet(["b", "a", "a", "a"])), at(12));
    let written: Vec<&Value> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::UpdateDaemonSet { object, .. } => Some(object.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(written.len(), 1, "{:?}", plan.actions);
    assert_eq!(written[0]["spec"]["template"], pod_template("a"));
    assert_eq!(written[0]["metadata"]["resourceVersion"], "9");
    assert!(written[0].get("status").is_none());
    assert!(
        evicted(&plan).is_empty(),
        "nothing evicted before the template is back"
    );
    assert_eq!(status(&plan).phase, Some(RolloutPhase::Degraded));
    let ro = next(&ro, &plan);

    // The DaemonSet controller made `a` the newest revision again: node 0 goes back.
    let rolled_back = |pods| World {
        ds: daemon_set("a", "OnDelete"),
        revisions: revisions(&["b", "a"]),
        pods,
    };
    let plan = decide(&ro, &rolled_back(fleet(["b", "a", "a", "a"])), at(13));
    assert_eq!(evicted(&plan), ["agent-b-0"]);
    let ro = next(&ro, &plan);
    let plan = decide(&ro, &rolled_back(fleet(["a"; NODES])), at(14));
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(status(&plan).abort, Some(true));
    assert_eq!(status(&plan).stable_rs.as_deref(), Some("a"));
}

#[test]
fn a_daemon_set_updating_itself_is_refused_with_its_field() {
    let ro = rollout(steps());
    let world = World {
        ds: daemon_set("a", "RollingUpdate"),
        revisions: revisions(&["a"]),
        pods: fleet(["a"; NODES]),
    };
    let plan = decide(&ro, &world, at(0));
    assert_eq!(status(&plan).phase, Some(RolloutPhase::Degraded));
    let message = status(&plan).message.clone().unwrap_or_default();
    assert!(
        message.contains(
            "DaemonSet \"agent\": spec.updateStrategy.type: Unsupported value: \"RollingUpdate\": supported values: \"OnDelete\""
        ),
        "{message}"
    );
    assert!(plan.actions.is_empty());

    let missing = Observed {
        daemon_set: Some(DaemonSetObserved::default()),
        ..Observed::new(ro.clone(), at(0))
    };
    let plan = crate::reconcile(&missing);
    assert!(
        plan.status
            .message
            .unwrap_or_default()
            .contains("daemonsets.apps \"agent\" not found")
    );
}

#[test]
fn pods_of_other_owners_are_never_counted_or_evicted() {
    let ro = healthy(json!({"steps": [{"setWeight": 100}], "maxUnavailable": 4}));
    let mut pods = fleet(["a"; NODES]);
    pods[2].metadata.owner_references = None;
    let plan = decide(&ro, &updated_world(pods), at(10));
    assert_eq!(evicted(&plan), ["agent-a-0", "agent-a-1", "agent-a-3"]);
}

#[test]
fn a_full_promotion_during_a_pause_step_ends_the_pause_with_the_update() {
    let ro = healthy(steps());
    let plan = decide(&ro, &updated_world(fleet(["a"; NODES])), at(10));
    let ro = next(&ro, &plan);
    let plan = decide(&ro, &updated_world(fleet(["b", "a", "a", "a"])), at(13));
    assert_eq!(status(&plan).current_step_index, Some(1), "paused");
    let mut ro = next(&ro, &plan);
    // `promote --full` as Argo CD's action and the sim write it: promoteFull alone.
    ro.status.as_mut().unwrap().promote_full = Some(true);
    let plan = decide(&ro, &updated_world(fleet(["b", "a", "a", "a"])), at(14));
    assert_eq!(evicted(&plan), ["agent-a-1"]);
    let ro = next(&ro, &plan);
    let plan = decide(&ro, &updated_world(fleet(["b"; NODES])), at(30));
    assert_eq!(status(&plan).stable_rs.as_deref(), Some("b"));
    assert_eq!(
        status(&plan).pause_conditions,
        None,
        "the pause step's condition outlived the update it paused"
    );
    assert_eq!(status(&plan).phase, Some(RolloutPhase::Healthy));
}
