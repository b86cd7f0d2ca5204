//! A Rollout driving a DaemonSet (`rollouts.sluice.dev/daemonset`, Sluice only) on four to six
//! nodes: `setWeight` and `setCanaryScale.replicas` steps evict old pods node by node, under the
//! seed's faults (conflicting writes to the DaemonSet, lost replies, crashes, partitions,
//! lagging watches, leader changes). By the seed, the update completes (through a timed or an
//! indefinite pause and a promotion, or a full promotion), is superseded by another image
//! halfway, is aborted halfway, or runs an image that never gets ready and is aborted by its
//! progress deadline. In some seeds a node joins or one leaves while the update runs. No more
//! nodes may ever run the update than its step allows (a node that joined aside: it gets the
//! current template, whatever the step), and at the end every node runs the revision the
//! verdict chose.

use serde_json::{Value, json};

use super::{Op, Scenario, Setup, Step, Wait, image, kubelet, step};
use crate::analysis_runs::MeasureScript;
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "daemonset-canary",
        about: "a Rollout updates a DaemonSet's nodes through weight, node-count and pause \
                steps: completed, promoted in full, superseded by another image, aborted, or \
                aborted by the progress deadline of an image that never gets ready",
        build,
    }]
}

fn node_name(i: u64) -> String {
    format!("node-{i}")
}

fn node(i: u64) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name(i)}})
}

fn daemon_set() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "demo"}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": {"app": "demo"}},
                "spec": {"containers": [{"name": "app", "image": image("v1")}]}
            }
        }
    })
}

/// The steps: a quarter of the nodes, a pause (indefinite when a user is to promote), three
/// nodes, a timed pause, three quarters, a short pause.
fn rollout(indefinite: bool, max_unavailable: Value) -> Value {
    let pause = if indefinite {
        json!({})
    } else {
        json!({"duration": "10s"})
    };
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "demo", "namespace": "default",
                     "annotations": {"rollouts.sluice.dev/daemonset": "demo"}},
        "spec": {"strategy": {"canary": {"maxUnavailable": max_unavailable, "steps": [
            {"setWeight": 25},
            {"pause": pause},
            {"setCanaryScale": {"replicas": 3}},
            {"pause": {"duration": "10s"}},
            {"setWeight": 75},
            {"pause": {"duration": "5s"}}
        ]}}}
    })
}

/// What a seed does with the update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Course {
    /// Through every step, an indefinite pause promoted by a user when `promote`.
    Complete { promote: bool },
    /// `promote --full` at the first pause.
    PromoteFull,
    /// The user sets a third image while the second is at its node-count step.
    Superseded,
    /// The user aborts at the node-count step.
    Abort,
    /// The new image never gets ready: the progress deadline aborts it.
    BadImage,
}

fn build(_seed: u64, rng: &mut Rng) -> Setup {
    let nodes = rng.range((4, 6));
    let course = match rng.range((0, 5)) {
        0 => Course::Complete { promote: false },
        1 => Course::Complete { promote: true },
        2 => Course::PromoteFull,
        3 => Course::Superseded,
        4 => Course::Abort,
        _ => Course::BadImage,
    };
    // One node at a time, or the default (25% of the nodes, so one here too, as a
    // percentage), or two.
    let max_unavailable = match rng.range((0, 2)) {
        0 => json!(1),
        1 => json!("25%"),
        _ => json!(2),
    };
    let (controllers, leases) = if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    };
    let mut ro = rollout(
        course == Course::Complete { promote: true },
        max_unavailable,
    );
    let set = |tag: &str| Op::SetDaemonSetImage(image(tag));
    let mut script: Vec<Step> = vec![step(Wait::Phase("Healthy"), (0, 5_000), set("v2"))];
    // Before what the course does, so that its wait (an update in progress) still comes.
    let churn = match rng.range((0, 3)) {
        0 => Some(Op::AddNode(node_name(nodes))),
        1 => Some(Op::RemoveNode(node_name(rng.below(nodes)))),
        _ => None,
    };
    if let Some(op) = churn {
        script.push(step(Wait::UpdateStep(0), (0, 15_000), op));
    }
    let (phase, stable) = match course {
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
        Course::PromoteFull => {
            script.push(step(Wait::UpdateStep(1), (0, 3_000), Op::PromoteFull));
            ("Healthy", "v2")
        }
        Course::Superseded => {
            script.push(step(Wait::UpdateStep(2), (0, 3_000), set("v3")));
            ("Healthy", "v3")
        }
        Course::Abort => {
            script.push(step(Wait::UpdateStep(2), (0, 3_000), Op::Abort));
            ("Degraded", "v1")
        }
        Course::BadImage => {
            ro["spec"]["progressDeadlineSeconds"] = json!(30);
            ro["spec"]["progressDeadlineAbort"] = json!(true);
            ("Degraded", "v1")
        }
    };
    let bad: &[&str] = if course == Course::BadImage {
        &["v2"]
    } else {
        &[]
    };
    let mut objects: Vec<(Kind, Value)> = (0..nodes).map(|i| (Kind::Node, node(i))).collect();
    objects.push((Kind::DaemonSet, daemon_set()));
    Setup {
        rollout: ro,
        objects,
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, bad),
        analysis: MeasureScript::default(),
        script,
        notifications: None,
        expect: Expect {
            phase,
            stable_image: image(stable),
            analysis_runs: None,
        },
    }
}
