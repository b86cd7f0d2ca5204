//! Background analysis during a canary, measured by the real AnalysisRun driver from scripted
//! provider readings. Argo before #3873, on an Inconclusive background run, kept creating new
//! runs while the Rollout sat at a pause step. Here an Inconclusive verdict must hold the update
//! on that run until a user resumes (a timed pause step may run out meanwhile, the update stays
//! held), and the resume measures again with a new run, which the unchanged metric makes
//! Inconclusive again; a Failed or Error verdict must abort it back to the stable pods; a run
//! whose revision is superseded or rolled back must be terminated.
//!
//! Each verdict comes from what the metric reads, judged by the template's conditions and
//! limits: good readings (`>= 0.95`) first, as many as the seed says, then a value that meets
//! neither condition (Inconclusive), one that meets the failure condition (Failed), or
//! provider errors past the consecutive error limit (Error).
//!
//! The verdict always lands before the timed pause step could end: a run is made once the
//! canary ReplicaSet exists, before that step starts, and the AnalysisRun controller notices
//! it and reaches the verdict in less than the pause lasts (at most [`GOOD_READINGS`] good
//! measurements [`INTERVAL_S`] apart, then the verdict's: see [`verdict_within_the_pause`]).
//! So the expected end state follows from the script alone, whatever step the update is at
//! when the verdict lands.

use serde_json::{Value, json};
use sluice_api::common::AnalysisPhase;

use super::{Op, Scenario, Setup, Wait, image, kubelet, rollout, step};
use crate::analysis_runs::{MeasureScript, Reading};
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

pub(super) const TEMPLATE: &str = "success-rate";
/// The timed pause step.
const PAUSE_MS: u64 = 30_000;
/// The metric's interval.
const INTERVAL_S: u64 = 5;
/// Errors in a row a run tolerates (the template's `consecutiveErrorLimit`).
const ERROR_LIMIT: u64 = 1;
/// Most good readings before the verdict's.
const GOOD_READINGS: u64 = 2;
/// How long the AnalysisRun controller may take to notice a change.
pub(super) const NOTICE_MS: (u64, u64) = (5, 1_000);

/// The success rate: good from 0.95, failed below 0.8, Inconclusive in between; one error
/// is tolerated, a second in a row ends the run in Error. `count` ends a run that stays
/// good; without one it measures until terminated.
pub(super) fn template(count: Option<u64>) -> Value {
    let mut metric = json!({
        "name": TEMPLATE,
        "interval": format!("{INTERVAL_S}s"),
        "successCondition": "result[0] >= 0.95",
        "failureCondition": "result[0] < 0.8",
        "consecutiveErrorLimit": ERROR_LIMIT,
        "provider": {"prometheus": {
            "address": "http://prometheus.monitoring:9090",
            "query": "sum(rate(http_requests_total{code!~\"5..\"}[1m])) / sum(rate(http_requests_total[1m]))"
        }}
    });
    if let Some(count) = count {
        metric["count"] = json!(count);
    }
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": TEMPLATE, "namespace": "default"},
        "spec": {"metrics": [metric]}
    })
}

/// A reading of the success rate, in hundredths.
fn rate(hundredths: u64) -> Reading {
    Reading::Value(json!([hundredths as f64 / 100.0]))
}

/// Provider errors, as Prometheus unreachable gives them.
fn unreachable() -> Reading {
    Reading::Error(
        "Post \"http://prometheus.monitoring:9090/api/v1/query\": dial tcp: lookup prometheus.monitoring: no such host".into(),
    )
}

/// Good readings, as many as the seed says, then the ones that make `verdict`; the last
/// reading repeats.
pub(super) fn readings(verdict: AnalysisPhase, rng: &mut Rng) -> Vec<Reading> {
    let good = rng.range((0, GOOD_READINGS));
    let mut readings: Vec<Reading> = (0..good).map(|_| rate(rng.range((95, 100)))).collect();
    readings.push(match verdict {
        AnalysisPhase::Inconclusive => rate(rng.range((80, 94))),
        AnalysisPhase::Failed => rate(rng.range((0, 79))),
        AnalysisPhase::Error => unreachable(),
        _ => rate(rng.range((95, 100))),
    });
    readings
}

/// Worst case from a run's creation to its verdict, in ms: noticing it, the good measurements
/// an interval apart, the errors past the limit each after the engine's error retry, then the
/// pass that ends the run; every pass a status write (up to 200 ms each way) and a rounding of
/// the measurement time down to the second.
const fn verdict_within_the_pause() -> u64 {
    let retry_ms = sluice_engine::analysis::ERROR_RETRY_INTERVAL.as_millis() as u64;
    let passes = GOOD_READINGS + ERROR_LIMIT + 2;
    NOTICE_MS.1 + GOOD_READINGS * INTERVAL_S * 1_000 + ERROR_LIMIT * retry_ms + passes * 1_400
}

// Tuning the readings or the template must keep every verdict inside the pause.
const _: () = assert!(verdict_within_the_pause() < PAUSE_MS);

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

fn script(verdict: AnalysisPhase, rng: &mut Rng) -> MeasureScript {
    MeasureScript {
        notice_ms: NOTICE_MS,
        readings: readings(verdict, rng),
    }
}

pub(super) fn setup(
    rng: &mut Rng,
    verdict: AnalysisPhase,
) -> (Value, usize, bool, Faults, MeasureScript) {
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
        objects: vec![(Kind::AnalysisTemplate, template(None))],
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
        notifications: None,
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
        objects: vec![(Kind::AnalysisTemplate, template(None))],
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
        notifications: None,
        expect: Expect {
            phase: "Degraded",
            stable_image: image("v1"),
            analysis_runs: Some(1),
        },
    }
}

fn superseded(_seed: u64, rng: &mut Rng) -> Setup {
    let (ro, controllers, leases, faults, analysis) = setup(rng, AnalysisPhase::Successful);
    // Often still measuring when the update is superseded, so that it must be terminated:
    // measuring until terminated, or for up to two minutes.
    let count = rng.chance(0.5).then(|| rng.range((2, 24)));
    let at_step = rng.range((0, 3)) as i32;
    let (tag, runs) = if rng.chance(0.3) {
        // Back to the stable template: nothing left to measure.
        ("v1", 0)
    } else {
        ("v3", 1)
    };
    Setup {
        rollout: ro,
        objects: vec![(Kind::AnalysisTemplate, template(count))],
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
        notifications: None,
        expect: Expect {
            phase: "Healthy",
            stable_image: image(tag),
            analysis_runs: Some(runs),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verdict_lands_before_the_timed_pause_could_end() {
        assert!(
            verdict_within_the_pause() < PAUSE_MS,
            "{}",
            verdict_within_the_pause()
        );
    }

    #[test]
    fn the_readings_make_the_verdict_after_good_ones() {
        for seed in 0..32 {
            let mut rng = Rng::new(seed);
            for verdict in [
                AnalysisPhase::Inconclusive,
                AnalysisPhase::Failed,
                AnalysisPhase::Error,
            ] {
                let r = readings(verdict.clone(), &mut rng);
                assert!(r.len() as u64 <= GOOD_READINGS + 1);
                let (last, good) = r.split_last().unwrap();
                assert!(
                    good.iter()
                        .all(|g| matches!(g, Reading::Value(v) if v[0].as_f64().unwrap() >= 0.95))
                );
                let value = match last {
                    Reading::Value(v) => v[0].as_f64(),
                    Reading::Error(_) => None,
                };
                match verdict {
                    AnalysisPhase::Inconclusive => {
                        assert!(value.is_some_and(|v| (0.8..0.95).contains(&v)))
                    }
                    AnalysisPhase::Failed => assert!(value.is_some_and(|v| v < 0.8)),
                    _ => assert_eq!(value, None),
                }
            }
        }
    }
}
