//! A Rollout driving a StatefulSet (`rollouts.sluice.dev/statefulset`, Sluice only): its
//! `setWeight` steps lower the StatefulSet's partition, and an analysis step between two
//! weights gates the second, under the seed's faults (conflicting writes to the StatefulSet,
//! lost replies, crashes, partitions, lagging watches). A Successful verdict must end with
//! every pod on the new revision, stable and the partition closed; a Failed or Error one must
//! abort back to the stable revision, with no more pods ever updated than the first weight
//! allowed.

use serde_json::{Value, json};
use sluice_api::common::AnalysisPhase;

use super::analysis::{NOTICE_MS, TEMPLATE, readings, template};
use super::{Op, Scenario, Setup, Wait, image, kubelet, step};
use crate::analysis_runs::MeasureScript;
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "statefulset-canary",
        about: "a Rollout drives a StatefulSet's partitions through an analysis step: a \
                Successful verdict completes with every pod updated, a Failed or Error one \
                aborts back to the stable revision",
        build,
    }]
}

fn stateful_set(replicas: u64) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": "demo",
            "selector": {"matchLabels": {"app": "demo"}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": "demo"}},
                "spec": {"containers": [{"name": "app", "image": image("v1")}]}
            }
        }
    })
}

fn rollout() -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "demo", "namespace": "default",
                     "annotations": {"rollouts.sluice.dev/statefulset": "demo"}},
        "spec": {"strategy": {"canary": {"steps": [
            {"setWeight": 25},
            {"analysis": {"templates": [{"templateName": TEMPLATE}]}},
            {"setWeight": 50},
            {"pause": {"duration": "10s"}}
        ]}}}
    })
}

fn build(_seed: u64, rng: &mut Rng) -> Setup {
    let replicas = rng.range((2, 5));
    let verdict = match rng.range((0, 3)) {
        0 => AnalysisPhase::Failed,
        1 => AnalysisPhase::Error,
        _ => AnalysisPhase::Successful,
    };
    let (controllers, leases) = if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    };
    let passes = verdict == AnalysisPhase::Successful;
    Setup {
        rollout: rollout(),
        objects: vec![
            (Kind::StatefulSet, stateful_set(replicas)),
            // Three measurements: the good readings then the verdict's (which repeats).
            (Kind::AnalysisTemplate, template(Some(3))),
        ],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: MeasureScript {
            notice_ms: NOTICE_MS,
            readings: readings(verdict, rng),
        },
        script: vec![step(
            Wait::Phase("Healthy"),
            (0, 5_000),
            Op::SetStatefulSetImage(image("v2")),
        )],
        notifications: None,
        expect: Expect {
            phase: if passes { "Healthy" } else { "Degraded" },
            stable_image: image(if passes { "v2" } else { "v1" }),
            analysis_runs: None,
        },
    }
}
