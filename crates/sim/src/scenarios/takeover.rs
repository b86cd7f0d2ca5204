//! Taking over ReplicaSets that a controller with another hash table named: Argo Rollouts 1.8
//! or earlier (the hash before Argo 1.9), or one whose hashes Sluice cannot compute at all (a
//! future release, a patched build). The world starts as that controller left it, Healthy or
//! paused in the middle of an update; Sluice's replicas start (and crash and restart as the
//! faults say) and must find every ReplicaSet again: a second ReplicaSet for a template that
//! already runs replaces every pod, which `one-replicaset-per-pod-template` catches.

use serde_json::{Value, json};
use sluice_api::pod_template_hash::{HashVersion, pod_template_hash_as};

use super::{Op, ROLLOUT_UID, Scenario, Setup, Wait, default_steps, image, kubelet, rollout, step};
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "takeover-another-hash-table-healthy",
            about: "a Healthy Rollout whose ReplicaSet another hash table named, then an update",
            build: healthy,
        },
        Scenario {
            name: "takeover-another-hash-table-mid-update",
            about: "a canary paused at its first step, both ReplicaSets named by another hash table",
            build: mid_update,
        },
    ]
}

/// The hash an earlier controller gave `template`: Argo 1.8's for even seeds, otherwise a
/// value no hash table of Sluice's computes.
fn earlier_hash(template: &Value, seed: u64, salt: &str) -> String {
    if seed.is_multiple_of(2) {
        pod_template_hash_as(template, None, HashVersion::BeforeArgo19).unwrap_or_default()
    } else {
        format!("x{salt}{:x}", seed % 0xfff_ffff)
    }
}

/// A ReplicaSet as the earlier controller left it: its template as the API server stores it
/// (defaults filled in) for odd seeds, as written for even ones.
fn replica_set(
    template: &Value,
    hash: &str,
    revision: u32,
    replicas: i32,
    defaulted: bool,
) -> Value {
    let mut template = template.clone();
    template["metadata"]["labels"]["rollouts-pod-template-hash"] = json!(hash);
    if defaulted {
        sluice_api::pod_defaults::apply(&mut template);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": format!("demo-{hash}"),
            "namespace": "default",
            "labels": {"app": "demo", "rollouts-pod-template-hash": hash},
            "annotations": {
                "rollout.argoproj.io/revision": revision.to_string(),
                "rollout.argoproj.io/desired-replicas": replicas.to_string()
            },
            "ownerReferences": [{
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "demo",
                "uid": ROLLOUT_UID, "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "demo", "rollouts-pod-template-hash": hash}},
            "template": template
        }
    })
}

fn controllers(rng: &mut Rng) -> (usize, bool) {
    if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    }
}

fn healthy(seed: u64, rng: &mut Rng) -> Setup {
    let replicas = 1 + (seed % 4) as i32;
    let mut ro = rollout(replicas, default_steps());
    let template = ro["spec"]["template"].clone();
    let hash = earlier_hash(&template, seed, "s");
    ro["metadata"]["annotations"] = json!({"rollout.argoproj.io/revision": "1"});
    ro["status"] = json!({
        "currentPodHash": hash,
        "stableRS": hash,
        "currentStepIndex": 6,
        "observedGeneration": "1",
        "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas,
        "phase": "Healthy",
        "selector": "app=demo"
    });
    let (controllers, leases) = controllers(rng);
    Setup {
        rollout: ro,
        objects: vec![(
            Kind::ReplicaSet,
            replica_set(&template, &hash, 1, replicas, seed % 4 == 1),
        )],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: Default::default(),
        script: vec![step(
            Wait::Phase("Healthy"),
            (0, 5_000),
            Op::SetImage(image("v2")),
        )],
        notifications: None,
        expect: Expect {
            phase: "Healthy",
            stable_image: image("v2"),
            analysis_runs: None,
        },
    }
}

fn mid_update(seed: u64, rng: &mut Rng) -> Setup {
    let steps = json!([
        {"setWeight": 25}, {"pause": {}},
        {"setWeight": 75}, {"pause": {"duration": "5s"}}
    ]);
    let replicas = 4;
    let mut ro = rollout(replicas, steps);
    let stable_template = ro["spec"]["template"].clone();
    ro["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image("v2"));
    let canary_template = ro["spec"]["template"].clone();
    let stable = earlier_hash(&stable_template, seed, "s");
    let canary = earlier_hash(&canary_template, seed, "c");
    let step_hash = serde_json::from_value(ro["spec"]["strategy"]["canary"].clone())
        .map(|c| sluice_engine::steps::step_hash(&c))
        .unwrap_or_default();
    ro["metadata"]["annotations"] = json!({"rollout.argoproj.io/revision": "2"});
    ro["status"] = json!({
        "currentPodHash": canary,
        "stableRS": stable,
        "currentStepHash": step_hash,
        "currentStepIndex": 1,
        "observedGeneration": "1",
        "controllerPause": true,
        "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-01-01T00:00:00Z"}],
        "replicas": replicas + 1, "updatedReplicas": 1,
        "readyReplicas": replicas + 1, "availableReplicas": replicas + 1,
        "phase": "Paused",
        "message": "CanaryPauseStep",
        "selector": "app=demo"
    });
    let defaulted = seed % 4 == 1;
    let (controllers, leases) = controllers(rng);
    Setup {
        rollout: ro,
        objects: vec![
            (
                Kind::ReplicaSet,
                replica_set(&stable_template, &stable, 1, replicas - 1, defaulted),
            ),
            (
                Kind::ReplicaSet,
                replica_set(&canary_template, &canary, 2, 1, defaulted),
            ),
        ],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: Default::default(),
        script: vec![step(
            Wait::Paused("CanaryPauseStep"),
            (0, 5_000),
            Op::Promote,
        )],
        notifications: None,
        expect: Expect {
            phase: "Healthy",
            stable_image: image("v2"),
            analysis_runs: None,
        },
    }
}
