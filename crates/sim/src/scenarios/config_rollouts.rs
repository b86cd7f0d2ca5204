//! A canary Rollout with config rollouts on (`rollouts.sluice.dev/config-rollout: "true"`),
//! whose pods read ConfigMap `demo-config` as a volume and as environment and Secret
//! `demo-secret` as one variable, keeping one old ReplicaSet (`revisionHistoryLimit: 1`). The
//! user edits the ConfigMap under the seed's faults (lost replies, conflicting writes to the
//! copies, crashes, partitions, lagging watches, leader changes); by the seed the update
//! completes (through an indefinite pause a user promotes), is superseded by a second edit
//! halfway, is set back to the old content halfway, is aborted (and perhaps set back after),
//! or is followed by two more updates, the last back to the first content, whose copy the
//! garbage collector has taken or is about to. Every copy a ReplicaSet reads must exist, and
//! at the end the stable revision reads the content the verdict chose.

use serde_json::{Value, json};

use super::{
    CONFIG_MAP, Op, Scenario, Setup, Step, Wait, config_data, image, kubelet, rollout, step,
};
use crate::analysis_runs::MeasureScript;
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "config-rollout",
        about: "a ConfigMap a canary Rollout reads is edited: the update completes, is \
                superseded by a second edit, is set back, is aborted, or is followed by more \
                updates back to the first content; the copies every revision reads must exist",
        build,
    }]
}

/// The Secret the pods read (never edited: its one copy is shared by every revision).
const SECRET: &str = "demo-secret";

fn config_map() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": CONFIG_MAP, "namespace": "default"},
           "data": config_data("v1")})
}

fn secret() -> Value {
    // "token-1", base64 as the API server stores it.
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": SECRET, "namespace": "default"},
           "data": {"token": "dG9rZW4tMQ=="}})
}

/// A pause: indefinite when a user is to promote, else short.
fn pause(indefinite: bool) -> Value {
    if indefinite {
        json!({"pause": {}})
    } else {
        json!({"pause": {"duration": "5s"}})
    }
}

fn config_rollout(replicas: i32, indefinite: bool) -> Value {
    let steps = json!([
        {"setWeight": 25}, pause(indefinite),
        {"setWeight": 50}, {"pause": {"duration": "5s"}},
        {"setWeight": 75}, {"pause": {"duration": "5s"}}
    ]);
    let mut ro = rollout(replicas, steps);
    ro["metadata"]["annotations"] = json!({"rollouts.sluice.dev/config-rollout": "true"});
    ro["spec"]["revisionHistoryLimit"] = json!(1);
    let template = &mut ro["spec"]["template"]["spec"];
    template["volumes"] = json!([{"name": "config", "configMap": {"name": CONFIG_MAP}}]);
    template["containers"][0]["volumeMounts"] =
        json!([{"name": "config", "mountPath": "/etc/demo"}]);
    template["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": CONFIG_MAP}}]);
    template["containers"][0]["env"] = json!([{"name": "TOKEN", "valueFrom":
        {"secretKeyRef": {"name": SECRET, "key": "token"}}}]);
    ro
}

/// What a seed does with the ConfigMap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Course {
    /// Edited once; through every step, an indefinite pause promoted by a user when
    /// `promote`.
    Complete { promote: bool },
    /// Edited again while the first edit is at its first pause.
    Twice,
    /// Set back to the old content while the edit is at its first pause.
    SetBack,
    /// Aborted halfway; the user then sets the old content back when `set_back`.
    Abort { set_back: bool },
    /// Two updates completed one after the other, then the first content again: the first
    /// revision's ReplicaSet is beyond the history limit by then, its copy collected or about
    /// to be.
    Sequence,
}

fn build(_seed: u64, rng: &mut Rng) -> Setup {
    let replicas = rng.range((2, 5)) as i32;
    let course = match rng.range((0, 6)) {
        0 => Course::Complete { promote: false },
        1 => Course::Complete { promote: true },
        2 => Course::Twice,
        3 => Course::SetBack,
        4 => Course::Abort { set_back: false },
        5 => Course::Abort { set_back: true },
        _ => Course::Sequence,
    };
    let (controllers, leases) = if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    };
    let promote = course == Course::Complete { promote: true };
    let edit = |wait: Wait, tag: &'static str| step(wait, (0, 3_000), Op::SetConfig(tag));
    let mut script: Vec<Step> = vec![edit(Wait::Phase("Healthy"), "v2")];
    let (phase, content) = match course {
        Course::Complete { promote } => {
            if promote {
                script.push(step(
                    Wait::Paused("CanaryPauseStep"),
                    (0, 8_000),
                    Op::Promote,
                ));
            }
            ("Healthy", "v2")
        }
        Course::Twice => {
            script.push(edit(Wait::UpdateStep(1), "v3"));
            ("Healthy", "v3")
        }
        Course::SetBack => {
            script.push(edit(Wait::UpdateStep(1), "v1"));
            ("Healthy", "v1")
        }
        Course::Abort { set_back } => {
            script.push(step(Wait::UpdateStep(2), (0, 3_000), Op::Abort));
            if set_back {
                script.push(edit(Wait::Phase("Degraded"), "v1"));
                ("Healthy", "v1")
            } else {
                ("Degraded", "v1")
            }
        }
        Course::Sequence => {
            script.push(edit(Wait::StableConfig("v2"), "v3"));
            // Soon after the second update, while the first revision is being let go.
            script.push(step(
                Wait::StableConfig("v3"),
                (0, 1_500),
                Op::SetConfig("v1"),
            ));
            ("Healthy", "v1")
        }
    };
    script.insert(0, step(Wait::Now, (0, 0), Op::ExpectConfig(content)));
    Setup {
        rollout: config_rollout(replicas, promote),
        objects: vec![(Kind::ConfigMap, config_map()), (Kind::Secret, secret())],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: MeasureScript::default(),
        script,
        notifications: None,
        expect: Expect {
            phase,
            stable_image: image("v1"),
            analysis_runs: None,
        },
    }
}
