//! Canary `plugin` steps under faults: the controller's driver calls the simulator's step
//! plugin (`crate::step_plugins`) and decides again with its answers while writes conflict,
//! watches lag and leaders crash or change. A plugin that answers Running is asked again after
//! its back-off; Successful completes the step; Failed aborts the update back to the stable
//! pods.

use serde_json::json;

use super::{Op, Scenario, Setup, Target, Wait, image, kubelet, rollout, step};
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "step-plugin-canary",
            about: "a canary through plugin steps (one running before it succeeds); the leader crashes mid-way",
            build: |_seed, rng| plugin_canary(rng, "Successful"),
        },
        Scenario {
            name: "step-plugin-failed",
            about: "a plugin step fails mid-canary: the update is aborted back to the stable pods",
            build: |_seed, rng| plugin_canary(rng, "Failed"),
        },
    ]
}

fn plugin_canary(rng: &mut Rng, last: &str) -> Setup {
    let plugin =
        |config: serde_json::Value| json!({"plugin": {"name": "step/sim", "config": config}});
    let steps = json!([
        {"setWeight": 25},
        plugin(json!({"return": "Successful", "runningFor": 1})),
        {"setWeight": 75},
        plugin(json!({"return": last})),
    ]);
    let ro = rollout(rng.range((1, 4)) as i32, steps);
    let (controllers, leases) = if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    };
    let healthy = last == "Successful";
    // A crash at a step the update reaches (a failed one is aborted at its last step, index 3).
    let crash_at = rng.range((1, if healthy { 4 } else { 3 })) as i32;
    Setup {
        rollout: ro,
        objects: Vec::new(),
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: Default::default(),
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("v2")),
            ),
            step(
                Wait::CanaryStep(crash_at),
                (0, 3_000),
                Op::Crash(Target::Leader),
            ),
        ],
        notifications: None,
        expect: Expect {
            phase: if healthy { "Healthy" } else { "Degraded" },
            stable_image: image(if healthy { "v2" } else { "v1" }),
            analysis_runs: None,
        },
    }
}
