//! How many plans per second the pure engine makes for typical Rollouts: a canary paused at
//! its first step (the most common state a controller re-reconciles), the same canary routed
//! by an Istio VirtualService, and a Healthy Rollout with nothing to do. No I/O: this is the
//! engine's own cost per reconcile. Run with `make bench`.

use std::collections::BTreeMap;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_engine::Observed;
use sluice_routers::kinds::{ObjectRef, RouterKind};

const UID: &str = "2b1e6f5c-0000-4000-8000-000000000001";

fn rollout(canary: Value, status: Option<Value>) -> Rollout {
    let mut ro = json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "shop", "uid": UID, "generation": 2,
                     "resourceVersion": "100", "annotations": {"rollout.argoproj.io/revision": "2"}},
        "spec": {
            "replicas": 10,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "web:v2"}]}},
            "strategy": {"canary": canary}
        }
    });
    if let Some(status) = status {
        ro["status"] = status;
    }
    serde_json::from_value(ro).expect("a Rollout")
}

fn replica_set(hash: &str, revision: u32, replicas: i32, image: &str) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("web-{hash}"), "namespace": "shop", "resourceVersion": "50",
            "labels": {"app": "web", "rollouts-pod-template-hash": hash},
            "annotations": {"rollout.argoproj.io/revision": revision.to_string(),
                            "rollout.argoproj.io/desired-replicas": "10"},
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                                 "name": "web", "uid": UID, "controller": true}]
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web", "rollouts-pod-template-hash": hash}},
            "template": {"metadata": {"labels": {"app": "web", "rollouts-pod-template-hash": hash}},
                         "spec": {"containers": [{"name": "web", "image": image}]}}
        },
        "status": {"replicas": replicas, "readyReplicas": replicas,
                   "availableReplicas": replicas, "observedGeneration": 1}
    }))
    .expect("a ReplicaSet")
}

/// `stable_replicas` while paused: a basic canary shrinks the stable, a routed one keeps it
/// whole.
fn observed(
    canary: Value,
    paused_at_first_step: bool,
    stable_replicas: i32,
    routers: BTreeMap<ObjectRef, Value>,
) -> Observed {
    let plain = rollout(canary.clone(), None);
    let hash = sluice_engine::pod_hash::template_hash(&plain).expect("hash");
    let strategy = plain
        .spec
        .strategy
        .clone()
        .unwrap_or_default()
        .canary
        .unwrap_or_default();
    let step_hash = sluice_engine::steps::step_hash(&strategy);
    let (status, rss) = if paused_at_first_step {
        (
            json!({
                "stableRS": "stable1", "currentPodHash": hash, "currentStepHash": step_hash,
                "currentStepIndex": 1, "controllerPause": true, "observedGeneration": "2",
                "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-11-25T10:00:00Z"}],
                "replicas": stable_replicas + 2, "updatedReplicas": 2,
                "readyReplicas": stable_replicas + 2, "availableReplicas": stable_replicas + 2,
                "phase": "Paused", "selector": "app=web"
            }),
            vec![
                replica_set("stable1", 1, stable_replicas, "web:v1"),
                replica_set(&hash, 2, 2, "web:v2"),
            ],
        )
    } else {
        (
            json!({
                "stableRS": hash, "currentPodHash": hash, "currentStepHash": step_hash,
                "currentStepIndex": 4, "observedGeneration": "2",
                "replicas": 10, "updatedReplicas": 10, "readyReplicas": 10, "availableReplicas": 10,
                "phase": "Healthy", "selector": "app=web"
            }),
            vec![replica_set(&hash, 2, 10, "web:v2")],
        )
    };
    let now = "2026-11-25T10:00:30Z".parse::<Timestamp>().expect("time");
    Observed {
        replica_sets: rss,
        router_objects: routers,
        ..Observed::new(rollout(canary, Some(status)), now)
    }
}

/// The benchmark only means something if the state is the one named: the plan must keep the
/// phase and decide nothing (a re-reconcile of a settled Rollout).
fn settled(o: &Observed, phase: &str) {
    let plan = sluice_engine::reconcile(o);
    let got = plan.status.phase.as_ref().map(|p| p.to_string());
    assert_eq!(got.as_deref(), Some(phase), "{:?}", plan.status.message);
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
}

fn steps() -> Value {
    json!([{"setWeight": 20}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}])
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(1));

    let paused = observed(json!({"steps": steps()}), true, 8, BTreeMap::new());
    settled(&paused, "Paused");
    group.bench_function("canary_paused_at_a_step", |b| {
        b.iter(|| sluice_engine::reconcile(std::hint::black_box(&paused)))
    });

    let healthy = observed(json!({"steps": steps()}), false, 10, BTreeMap::new());
    settled(&healthy, "Healthy");
    group.bench_function("healthy_nothing_to_do", |b| {
        b.iter(|| sluice_engine::reconcile(std::hint::black_box(&healthy)))
    });

    let vs = json!({
        "apiVersion": "networking.istio.io/v1alpha3", "kind": "VirtualService",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7"},
        "spec": {"hosts": ["web"], "http": [{"name": "primary", "route": [
            {"destination": {"host": "web-stable"}, "weight": 80},
            {"destination": {"host": "web-canary"}, "weight": 20}]}]}
    });
    let routers = BTreeMap::from([(
        ObjectRef::new(RouterKind::VirtualService, "shop", "web"),
        vs,
    )]);
    let mut routed = observed(
        json!({
            "canaryService": "web-canary", "stableService": "web-stable",
            "trafficRouting": {"istio": {"virtualService": {"name": "web", "routes": ["primary"]}}},
            "steps": steps()
        }),
        true,
        10,
        routers,
    );
    let new_hash = routed.replica_sets[1]
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("rollouts-pod-template-hash").cloned())
        .unwrap_or_default();
    for (name, hash) in [("web-canary", new_hash.as_str()), ("web-stable", "stable1")] {
        routed.services.push(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "shop", "resourceVersion": "9",
                    "annotations": {"argo-rollouts.argoproj.io/managed-by-rollouts": "web"}},
                "spec": {"selector": {"app": "web", "rollouts-pod-template-hash": hash},
                         "ports": [{"port": 80}]}
            }))
            .expect("a Service"),
        );
    }
    settled(&routed, "Paused");
    group.bench_function("istio_canary_paused_at_a_step", |b| {
        b.iter(|| sluice_engine::reconcile(std::hint::black_box(&routed)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
