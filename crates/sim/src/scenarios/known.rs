//! The original controller's known failures, one scenario each.

use serde_json::json;

use super::{Op, Scenario, Setup, Target, Wait, default_steps, image, kubelet, rollout, step};
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "supersede",
            about: "a third revision supersedes a canary in progress, at 1 to 4 replicas (Argo #3331)",
            build: supersede,
        },
        Scenario {
            name: "write-conflict",
            about: "ReplicaSet scale and annotation writes meet 409s (Argo's conflict fallback, #3762)",
            build: write_conflict,
        },
        Scenario {
            name: "bad-good-bad",
            about: "bad revision aborted by progressDeadlineAbort, then good, then bad again (#3988)",
            build: bad_good_bad,
        },
        Scenario {
            name: "lease-renewal-failure",
            about: "the leader's lease renewals fail mid-canary; the other replica takes over (#3355)",
            build: lease_renewal_failure,
        },
        Scenario {
            name: "crash-mid-canary",
            about: "the controller process dies in the middle of a canary, possibly mid-plan",
            build: crash_mid_canary,
        },
        Scenario {
            name: "leader-partition",
            about: "the leader is cut off from the API server mid-canary",
            build: leader_partition,
        },
    ]
}

fn healthy(tag: &str) -> Expect {
    Expect {
        phase: "Healthy",
        stable_image: image(tag),
        analysis_runs: None,
    }
}

fn two_replicas_sometimes(rng: &mut Rng) -> (usize, bool) {
    if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    }
}

fn supersede(seed: u64, rng: &mut Rng) -> Setup {
    // The replica count cycles with the seed so that every CI batch covers 1 to 4.
    let replicas = 1 + (seed % 4) as i32;
    let (controllers, leases) = two_replicas_sometimes(rng);
    let at_step = rng.range((1, 5)) as i32;
    Setup {
        rollout: rollout(replicas, default_steps()),
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
                Wait::CanaryStep(at_step),
                (0, 8_000),
                Op::SetImage(image("v3")),
            ),
        ],
        notifications: None,
        expect: healthy("v3"),
    }
}

fn write_conflict(_seed: u64, rng: &mut Rng) -> Setup {
    let mut faults = Faults::swarm(rng);
    faults.conflict_before_patch = 0.2 + 0.1 * rng.range((0, 4)) as f64;
    faults.meddle_every_ms = Some((500, 10_000));
    let (controllers, leases) = two_replicas_sometimes(rng);
    Setup {
        rollout: rollout(rng.range((2, 5)) as i32, default_steps()),
        objects: Vec::new(),
        controllers,
        leases,
        faults,
        kubelet: kubelet(rng, &[]),
        analysis: Default::default(),
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("v2")),
            ),
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("v3")),
            ),
        ],
        notifications: None,
        expect: healthy("v3"),
    }
}

fn bad_good_bad(_seed: u64, rng: &mut Rng) -> Setup {
    let mut ro = rollout(rng.range((1, 5)) as i32, default_steps());
    ro["spec"]["progressDeadlineAbort"] = json!(true);
    let (controllers, leases) = two_replicas_sometimes(rng);
    Setup {
        rollout: ro,
        objects: Vec::new(),
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &["bad1", "bad2"]),
        analysis: Default::default(),
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("bad1")),
            ),
            step(
                Wait::Phase("Degraded"),
                (0, 5_000),
                Op::SetImage(image("v3")),
            ),
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("bad2")),
            ),
        ],
        notifications: None,
        expect: Expect {
            phase: "Degraded",
            stable_image: image("v3"),
            analysis_runs: None,
        },
    }
}

fn lease_renewal_failure(_seed: u64, rng: &mut Rng) -> Setup {
    let at_step = rng.range((0, 4)) as i32;
    let outage = rng.range((5_000, 40_000));
    Setup {
        rollout: rollout(rng.range((1, 5)) as i32, default_steps()),
        objects: Vec::new(),
        controllers: 2,
        leases: true,
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
                Wait::CanaryStep(at_step),
                (0, 5_000),
                Op::FailLeaseRenewals(Target::Leader, outage),
            ),
        ],
        notifications: None,
        expect: healthy("v2"),
    }
}

fn crash_mid_canary(_seed: u64, rng: &mut Rng) -> Setup {
    let (controllers, leases) = two_replicas_sometimes(rng);
    let at_step = rng.range((0, 5)) as i32;
    Setup {
        rollout: rollout(rng.range((1, 5)) as i32, default_steps()),
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
            // Any millisecond: with network latency in play, often between two writes of a plan.
            step(
                Wait::CanaryStep(at_step),
                (0, 3_000),
                Op::Crash(Target::Leader),
            ),
        ],
        notifications: None,
        expect: healthy("v2"),
    }
}

fn leader_partition(_seed: u64, rng: &mut Rng) -> Setup {
    let at_step = rng.range((0, 4)) as i32;
    let len = rng.range((2_000, 40_000));
    Setup {
        rollout: rollout(rng.range((1, 5)) as i32, default_steps()),
        objects: Vec::new(),
        controllers: 2,
        leases: true,
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
                Wait::CanaryStep(at_step),
                (0, 5_000),
                Op::Partition(Target::Leader, len),
            ),
        ],
        notifications: None,
        expect: healthy("v2"),
    }
}
