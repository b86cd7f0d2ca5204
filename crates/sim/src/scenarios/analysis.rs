//! Background analysis during a canary, with the verdict scripted. Argo before #3873, on an
//! Inconclusive background run, kept creating new runs while the Rollout sat at a pause step.
//! Here an Inconclusive verdict must hold the update on that run until a user resumes (a timed
//! pause step may run out meanwhile, the update stays held), and the resume measures again
//! with a new run, which the unchanged metric makes Inconclusive again; a Failed or Error verdict must abort it
//! back to the stable pods; a run whose revision is superseded or rolled back must be
//! terminated.
//!
//! The verdict always lands before the timed pause step could end: a run is made once the
//! canary ReplicaSet exists, before that step starts, and the AnalysisRun controller notices
//! it and measures for less than the pause lasts. So the expected end state follows from the
//! script alone, whatever step the update is at when the verdict lands.

use serde_json::{Value, json};
use sluice_api::common::AnalysisPhase;

use super::{Op, Scenario, Setup, Wait, image, kubelet, rollout, step};
use crate::analysis_runs::AnalysisScript;
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::{Expect, INCONCLUSIVE_PAUSE};
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "inconclusive-background-analysis",
            about: "background analysis is Inconclusive mid-canary: paused on that run until resumed, \
                    measured again only after a resume, held meanwhile",
            build: inconclusive,
        },
        Scenario {
            name: "failed-background-analysis",
            about: "background analysis ends Failed or Error mid-canary: aborted, stable pods intact",
            build: failed,
        },
        Scenario {
            name: "superseded-background-analysis",
            about: "a canary under background analysis is superseded or rolled back: its run is \
                    terminated, the new revision measured once",
            build: superseded,
        },
    ]
}

const TEMPLATE: &str = "success-rate";
/// The timed pause step.
const PAUSE_MS: u64 = 30_000;

fn template() -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": TEMPLATE, "namespace": "default"},
        "spec": {"metrics": [{
            "name": TEMPLATE,
            "interval": "10s",
            "successCondition": "result[0] >= 0.95",
            "provider": {"prometheus": {
                "address": "http://prometheus.monitoring:9090",
                "query": "sum(rate(http_requests_total{code!~\"5..\"}[1m])) / sum(rate(http_requests_total[1m]))"
            }}
        }]}
    })
}

/// A canary with a timed pause and background analysis from the first step on: the pause
/// right after the first weight, or after three weights. A second timed pause ends the steps,
/// so that a run started by a resume lands its verdict before the update could complete.
fn analysed_rollout(rng: &mut Rng) -> Value {
    let pause = json!({"pause": {"duration": format!("{}s", PAUSE_MS / 1_000)}});
    let steps = if rng.chance(0.5) {
        json!([{"setWeight": 25}, pause, {"setWeight": 60}, pause])
    } else {
        json!([{"setWeight": 20}, {"setWeight": 40}, {"setWeight": 60}, pause, {"setWeight": 80}, pause])
    };
    let mut ro = rollout(rng.range((1, 4)) as i32, steps);
    ro["spec"]["strategy"]["canary"]["analysis"] = json!({
        "templates": [{"templateName": TEMPLATE}],
        "startingStep": 0
    });
    // A paused update makes no progress: its deadline must not run out, let alone abort it.
    ro["spec"]["progressDeadlineAbort"] = json!(rng.chance(0.5));
    ro
}

/// Noticing plus measuring stays below the pause (see the module comment).
fn script(verdict: AnalysisPhase, rng: &mut Rng) -> AnalysisScript {
    let notice_ms = (5, 1_000);
    let longest = PAUSE_MS - notice_ms.1 - 4_000;
    AnalysisScript {
        verdict,
        notice_ms,
        measure_ms: (1_000, rng.range((5_000, longest))),
    }
}

fn setup(rng: &mut Rng, verdict: AnalysisPhase) -> (Value, usize, bool, Faults, AnalysisScript) {
    let ro = analysed_rollout(rng);
    let (controllers, leases) = if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    };
    let faults = Faults::swarm(rng);
    let analysis = script(verdict, rng);
    (ro, controllers, leases, faults, analysis)
}

fn inconclusive(_seed: u64, rng: &mut Rng) -> Setup {
    let (ro, controllers, leases, faults, analysis) = setup(rng, AnalysisPhase::Inconclusive);
    Setup {
        rollout: ro,
        objects: vec![(Kind::AnalysisTemplate, template())],
        controllers,
        leases,
        faults,
        kubelet: kubelet(rng, &[]),
        analysis,
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("v2")),
            ),
            // Well past the timed pause: it must not have run out under the Inconclusive one.
            step(
                Wait::Paused(INCONCLUSIVE_PAUSE),
                (2 * PAUSE_MS, 6 * PAUSE_MS),
                Op::ExpectPaused {
                    reason: INCONCLUSIVE_PAUSE,
                    background_runs: 1,
                },
            ),
            // A resume measures again; the metric is unchanged, so it pauses once more.
            step(Wait::Now, (0, 5_000), Op::Promote),
            step(
                Wait::Paused(INCONCLUSIVE_PAUSE),
                (0, 2 * PAUSE_MS),
                Op::ExpectPaused {
                    reason: INCONCLUSIVE_PAUSE,
                    background_runs: 2,
                },
            ),
            step(Wait::Now, (0, 5_000), Op::PromoteFull),
        ],
        expect: Expect {
            phase: "Healthy",
            stable_image: image("v2"),
            analysis_runs: Some(2),
        },
    }
}

fn failed(_seed: u64, rng: &mut Rng) -> Setup {
    let verdict = if rng.chance(0.5) {
        AnalysisPhase::Failed
    } else {
        AnalysisPhase::Error
    };
    let (ro, controllers, leases, faults, analysis) = setup(rng, verdict);
    Setup {
        rollout: ro,
        objects: vec![(Kind::AnalysisTemplate, template())],
        controllers,
        leases,
        faults,
        kubelet: kubelet(rng, &[]),
        analysis,
        script: vec![step(
            Wait::Phase("Healthy"),
            (0, 5_000),
            Op::SetImage(image("v2")),
        )],
        expect: Expect {
            phase: "Degraded",
            stable_image: image("v1"),
            analysis_runs: Some(1),
        },
    }
}

fn superseded(_seed: u64, rng: &mut Rng) -> Setup {
    let (ro, controllers, leases, faults, mut analysis) = setup(rng, AnalysisPhase::Successful);
    // Often still measuring when the update is superseded, so that it must be terminated.
    analysis.measure_ms = (1_000, rng.range((5_000, 120_000)));
    let at_step = rng.range((0, 3)) as i32;
    let (tag, runs) = if rng.chance(0.3) {
        // Back to the stable template: nothing left to measure.
        ("v1", 0)
    } else {
        ("v3", 1)
    };
    Setup {
        rollout: ro,
        objects: vec![(Kind::AnalysisTemplate, template())],
        controllers,
        leases,
        faults,
        kubelet: kubelet(rng, &[]),
        analysis,
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("v2")),
            ),
            step(
                Wait::CanaryStep(at_step),
                (0, 8_000),
                Op::SetImage(image(tag)),
            ),
        ],
        expect: Expect {
            phase: "Healthy",
            stable_image: image(tag),
            analysis_runs: Some(runs),
        },
    }
}
