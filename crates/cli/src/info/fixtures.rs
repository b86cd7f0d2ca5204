//! Hand-built objects shared by the rendering tests.

use super::*;
use serde_json::json;

pub fn now() -> Timestamp {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

/// A canary at step 1 of 3 (setWeight 20, pause, setWeight 60), paused, one canary pod of
/// four available.
pub fn canary_rollout() -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "demo", "namespace": "shop", "uid": "ro-uid", "generation": 2,
                     "creationTimestamp": "2024-05-01T11:00:00Z"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {"metadata": {"labels": {"app": "demo"}},
                         "spec": {"containers": [{"name": "app", "image": "demo:v2"}]}},
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}]}}
        },
        "status": {
            "observedGeneration": "2",
            "phase": "Paused", "message": "CanaryPauseStep",
            "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2024-05-01T11:59:00Z"}],
            "controllerPause": true,
            "currentStepIndex": 1,
            "currentPodHash": "h2", "stableRS": "h1",
            "replicas": 5, "updatedReplicas": 1, "readyReplicas": 5, "availableReplicas": 5
        }
    }))
    .unwrap()
}

pub fn replica_set(
    name: &str,
    hash: &str,
    revision: i64,
    image: &str,
    replicas: i32,
    created: &str,
) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "shop", "creationTimestamp": created,
            "labels": {"app": "demo", "rollouts-pod-template-hash": hash},
            "annotations": {"rollout.argoproj.io/revision": revision.to_string()},
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                                 "name": "demo", "uid": "ro-uid", "controller": true}]
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "demo", "rollouts-pod-template-hash": hash}},
            "template": {"metadata": {"labels": {"app": "demo", "rollouts-pod-template-hash": hash}},
                         "spec": {"containers": [{"name": "app", "image": image}]}}
        },
        "status": {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}
    }))
    .unwrap()
}

pub fn running_pod(name: &str, hash: &str, restarts: i32, created: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created,
                     "labels": {"app": "demo", "rollouts-pod-template-hash": hash}},
        "spec": {"containers": [{"name": "app", "image": "x"}]},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": true, "restartCount": restarts,
            "state": {"running": {"startedAt": created}}
        }]}
    }))
    .unwrap()
}

/// The canary rollout with its stable (3 pods), canary (1 pod) and a scaled-down old
/// ReplicaSet.
pub fn canary_world() -> (Rollout, Vec<ReplicaSet>, Vec<Pod>) {
    let ro = canary_rollout();
    let rss = vec![
        replica_set("demo-h0", "h0", 1, "demo:v0", 0, "2024-04-30T12:00:00Z"),
        replica_set("demo-h1", "h1", 2, "demo:v1", 4, "2024-05-01T11:00:00Z"),
        replica_set("demo-h2", "h2", 3, "demo:v2", 1, "2024-05-01T11:58:30Z"),
    ];
    let pods = vec![
        running_pod("demo-h1-aaaaa", "h1", 0, "2024-05-01T11:00:05Z"),
        running_pod("demo-h1-bbbbb", "h1", 2, "2024-05-01T11:00:05Z"),
        running_pod("demo-h1-ccccc", "h1", 0, "2024-05-01T11:00:05Z"),
        running_pod("demo-h1-ddddd", "h1", 0, "2024-05-01T11:00:05Z"),
        running_pod("demo-h2-eeeee", "h2", 0, "2024-05-01T11:58:40Z"),
    ];
    (ro, rss, pods)
}

/// Gives the rollout's canary the traffic routing `routing` (e.g. `{"nginx": {...}}`).
pub fn route_traffic(ro: &mut Rollout, routing: serde_json::Value) {
    let canary = ro
        .spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
        .expect("a canary rollout");
    canary.traffic_routing = Some(serde_json::from_value(routing).unwrap());
}

/// Records in the status the weights last set on the router.
pub fn record_weights(ro: &mut Rollout, canary: i32, stable: i32) {
    let status = ro.status.as_mut().expect("a status");
    status.canary = Some(
        serde_json::from_value(json!({"weights": {
            "canary": {"weight": canary, "podTemplateHash": "h2", "serviceName": "demo-canary"},
            "stable": {"weight": stable, "podTemplateHash": "h1", "serviceName": "demo-stable"}
        }}))
        .unwrap(),
    );
}

/// The canary world routed by NGINX: at step 2 of 3 (setWeight 60) while the router still
/// sends 20 to the canary.
pub fn routed_canary_world() -> (Rollout, Vec<ReplicaSet>, Vec<Pod>) {
    let (mut ro, rss, pods) = canary_world();
    route_traffic(&mut ro, json!({"nginx": {"stableIngress": "demo"}}));
    let status = ro.status.as_mut().unwrap();
    status.current_step_index = Some(2);
    status.pause_conditions = None;
    status.controller_pause = None;
    status.phase = None;
    status.message = None;
    record_weights(&mut ro, 20, 80);
    (ro, rss, pods)
}
