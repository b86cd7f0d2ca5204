//! Random update sequences over random Rollout shapes, with every fault kind in play: the
//! scenario for long runs. The expected end state follows from the script alone: a good image
//! becomes stable when it is the last one or when the next update waits for Healthy; a bad
//! image ends Degraded (aborted or timed out) and never becomes stable.

use serde_json::json;

use super::{Op, Scenario, Setup, Step, Wait, default_steps, image, kubelet, rollout, step};
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenario() -> Scenario {
    Scenario {
        name: "chaos",
        about: "random updates (good and bad images), shapes and faults",
        build,
    }
}

/// Surge and unavailability pairs that validate (both 0 is refused).
const LIMITS: &[(&str, &str)] = &[
    ("25%", "25%"),
    ("1", "0"),
    ("0", "1"),
    ("50%", "0"),
    ("1", "1"),
];

fn build(_seed: u64, rng: &mut Rng) -> Setup {
    let replicas = rng.range((1, 6)) as i32;
    let mut ro = rollout(replicas, default_steps());
    let (surge, unavailable) = LIMITS[rng.below(LIMITS.len() as u64) as usize];
    let int_or_str = |s: &str| s.parse::<i64>().map_or(json!(s), |n| json!(n));
    ro["spec"]["strategy"]["canary"]["maxSurge"] = int_or_str(surge);
    ro["spec"]["strategy"]["canary"]["maxUnavailable"] = int_or_str(unavailable);
    let abort = rng.chance(0.5);
    ro["spec"]["progressDeadlineAbort"] = json!(abort);
    // Longer than the other scenarios' minute: crashes can keep every controller from leading
    // for most of a minute (seed 34295: the leader crashed, its successor crashed just before
    // its lease wait was over, and the third led 52 s after the first crash), and the deadline
    // runs on through such a gap, as Argo's does, so a good update stuck behind it timed out
    // with a 60-second deadline. Three minutes outlasts the gaps the crash rates here make; a
    // bad image still ends Degraded, three minutes in.
    ro["spec"]["progressDeadlineSeconds"] = json!(180);
    ro["spec"]["revisionHistoryLimit"] = json!(rng.range((0, 3)));
    if rng.chance(0.3) {
        ro["spec"]["minReadySeconds"] = json!(2);
    }

    let updates = rng.range((1, 4)) as usize;
    let goods: Vec<bool> = (0..updates).map(|_| rng.chance(0.7)).collect();
    let mut script: Vec<Step> = Vec::new();
    let mut bad = Vec::new();
    let mut stable = image("v1");
    let mut wait = Wait::Phase("Healthy");
    for (n, &good) in goods.iter().enumerate() {
        let tag = if good {
            format!("v{}", n + 2)
        } else {
            format!("bad{}", n + 2)
        };
        if !good {
            bad.push(tag.clone());
        }
        script.push(step(wait.clone(), (0, 8_000), Op::SetImage(image(&tag))));
        // What the next update waits for decides whether this image becomes stable. A bad
        // update always waits for the previous one to settle, so that which image is stable
        // when it aborts does not depend on timing.
        let next_good = goods.get(n + 1).copied();
        wait = if !good {
            Wait::Phase("Degraded")
        } else if next_good == Some(true) && rng.chance(0.5) {
            Wait::CanaryStep(rng.range((1, 5)) as i32)
        } else {
            Wait::Phase("Healthy")
        };
        if good && (next_good.is_none() || wait == Wait::Phase("Healthy")) {
            stable = image(&tag);
        }
    }
    let last_good = goods.last().copied().unwrap_or(true);
    let bad_refs: Vec<&str> = bad.iter().map(String::as_str).collect();
    Setup {
        rollout: ro,
        objects: Vec::new(),
        controllers: rng.range((1, 2)) as usize,
        leases: true,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &bad_refs),
        analysis: Default::default(),
        script,
        notifications: None,
        expect: Expect {
            phase: if last_good { "Healthy" } else { "Degraded" },
            stable_image: stable,
            analysis_runs: None,
        },
    }
}
