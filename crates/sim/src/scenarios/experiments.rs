//! Canary `experiment` steps: the Rollout controller creates an Experiment from the step
//! (a baseline template from the stable pods, a canary template from the canary's, an
//! analysis), the Experiment controller runs its ReplicaSets (and, by the seed, a Service for
//! the canary template) and starts its AnalysisRun once every template is available, and the
//! AnalysisRun controller measures it from scripted readings. A Successful Experiment completes
//! the step; a Failed or Errored one must abort the update back to the stable pods. Either way
//! the Experiment's ReplicaSets end scaled down (after the step's scale-down delay), and an
//! Experiment the update no longer waits on must be terminated, as when a user aborts or
//! promotes in full while it runs.
//!
//! By the seed a second update follows the first once it has settled, with no old
//! ReplicaSet kept: the first update's ReplicaSet goes, so the Rollout deletes its Experiment
//! and the garbage collector whatever the Experiment made.
//!
//! The Experiment finishes one of two ways, by the seed: its analysis is required for
//! completion and takes a fixed number of measurements, or it runs for a fixed duration while
//! its analysis measures until terminated. In the second, a failing verdict always lands
//! before the duration ends ([`verdict_within_the_duration`]), so the end state follows from
//! the script alone.

use serde_json::{Value, json};
use sluice_api::common::AnalysisPhase;

use super::{Op, Scenario, Setup, Wait, image, kubelet, rollout, step};
use crate::analysis_runs::{MeasureScript, Reading};
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "experiment-step",
            about: "a canary experiment step whose analysis succeeds (the update completes) or \
                    fails or errs (the update aborts); its ReplicaSets end scaled down",
            build: experiment_step,
        },
        Scenario {
            name: "timed-experiment",
            about: "a canary experiment step that only runs for its duration, with no analysis \
                    beside it: nothing but the Experiment controller's timed requeue ends it, \
                    and the update completes",
            build: timed,
        },
        Scenario {
            name: "interrupted-experiment",
            about: "a user aborts or fully promotes a canary while its experiment step runs: \
                    the Experiment is terminated and its ReplicaSets scaled down",
            build: interrupted,
        },
    ]
}

const TEMPLATE: &str = "experiment-success-rate";
/// The metric's interval.
const INTERVAL_S: u64 = 5;
/// Errors in a row a run tolerates (the template's `consecutiveErrorLimit`).
const ERROR_LIMIT: u64 = 1;
/// Most good readings before the verdict's.
const GOOD_READINGS: u64 = 2;
/// How long the AnalysisRun controller may take to notice a change.
const NOTICE_MS: (u64, u64) = (5, 1_000);
/// The duration of an Experiment that runs for one.
const DURATION_S: u64 = 90;

/// The success rate: good from 0.95, failed below 0.8; one error is tolerated, a second in a
/// row ends the run in Error. With `count` a run that stays good ends Successful after that
/// many measurements; without, it measures until terminated.
fn template(count: Option<u64>) -> Value {
    let mut metric = json!({
        "name": "success-rate",
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

/// Good readings, as many as the seed says, then the ones that make `verdict`; the last
/// reading repeats, so a Successful verdict reads good for ever.
fn readings(verdict: &AnalysisPhase, rng: &mut Rng) -> Vec<Reading> {
    let good = rng.range((0, GOOD_READINGS));
    let mut readings: Vec<Reading> = (0..good).map(|_| rate(rng.range((95, 100)))).collect();
    readings.push(match verdict {
        AnalysisPhase::Failed => rate(rng.range((0, 79))),
        AnalysisPhase::Error => Reading::Error(
            "Post \"http://prometheus.monitoring:9090/api/v1/query\": dial tcp: i/o timeout".into(),
        ),
        _ => rate(rng.range((95, 100))),
    });
    readings
}

/// Worst case, in ms, from the Experiment recording `availableAt` (when its duration starts) to
/// it recording the verdict of its analysis: the Experiment controller noticing its own write
/// (a watch, up to 5 s) and creating the run, the AnalysisRun controller noticing it, the good
/// measurements an interval apart, the errors past the limit each after the engine's error
/// retry, the pass that ends the run, then the Experiment controller noticing that and
/// writing its phase; every pass of either a dozen requests of up to 400 ms each, and a failed
/// status write retried after 5 s once.
const fn verdict_within_the_duration() -> u64 {
    let retry_ms = sluice_engine::analysis::ERROR_RETRY_INTERVAL.as_millis() as u64;
    let watch_ms = 5_000;
    let passes = GOOD_READINGS + ERROR_LIMIT + 4;
    watch_ms
        + NOTICE_MS.1
        + GOOD_READINGS * INTERVAL_S * 1_000
        + ERROR_LIMIT * retry_ms
        + watch_ms
        + passes * 12 * 400
        + 5_000
}

// Tuning the readings or the template must keep every verdict inside the duration.
const _: () = assert!(verdict_within_the_duration() < DURATION_S * 1_000);

/// How the Experiment of the step ends on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Its analysis is required for completion and takes this many measurements.
    Required(u64),
    /// It runs for [`DURATION_S`]; its analysis measures until terminated.
    Duration,
    /// It runs until terminated, its analysis too.
    Unbounded,
    /// It runs for this many seconds, with no analysis: once its pods are up nothing happens
    /// to it but its own requeue.
    Timed(u64),
}

/// The experiment step: a baseline from the stable pods and the canary's pods side by side,
/// measured by one analysis, with the seed's scale-down delay (Argo's default of 30 s, none,
/// or a few seconds) and, sometimes, a Service for the canary template.
fn experiment(shape: Shape, rng: &mut Rng) -> Value {
    let mut canary = json!({"name": "canary", "specRef": "canary", "replicas": rng.range((1, 2))});
    if rng.chance(0.5) {
        canary["service"] = json!({});
    }
    let mut analysis = json!({"name": "success-rate", "templateName": TEMPLATE});
    if let Shape::Required(_) = shape {
        analysis["requiredForCompletion"] = json!(true);
    }
    let mut step = json!({
        "templates": [{"name": "baseline", "specRef": "stable", "replicas": 1}, canary],
    });
    match shape {
        Shape::Timed(seconds) => step["duration"] = json!(format!("{seconds}s")),
        Shape::Duration => {
            step["duration"] = json!(format!("{DURATION_S}s"));
            step["analyses"] = json!([analysis]);
        }
        Shape::Required(_) | Shape::Unbounded => step["analyses"] = json!([analysis]),
    }
    match rng.below(3) {
        0 => {}
        1 => step["scaleDownDelaySeconds"] = json!(0),
        _ => step["scaleDownDelaySeconds"] = json!(rng.range((2, 15))),
    }
    json!({"experiment": step})
}

/// A canary whose pods declare a port (so an experiment template can have a Service), with
/// the experiment step first or after a first weight. Returns it and the step's index.
fn experiment_rollout(shape: Shape, rng: &mut Rng) -> (Value, i32) {
    let step = experiment(shape, rng);
    let (steps, index) = if rng.chance(0.5) {
        (
            json!([step, {"setWeight": 50}, {"pause": {"duration": "5s"}}]),
            0,
        )
    } else {
        (
            json!([{"setWeight": 25}, step, {"setWeight": 60}, {"pause": {"duration": "5s"}}]),
            1,
        )
    };
    let mut ro = rollout(rng.range((1, 4)) as i32, steps);
    ro["spec"]["template"]["spec"]["containers"][0]["ports"] =
        json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"}]);
    // The Experiment may outlast the progress deadline (60 s): waiting on it is no lack of
    // progress, so the deadline must neither run out nor abort the update.
    ro["spec"]["progressDeadlineAbort"] = json!(rng.chance(0.5));
    (ro, index)
}

fn controllers(rng: &mut Rng) -> (usize, bool) {
    if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    }
}

fn experiment_step(_seed: u64, rng: &mut Rng) -> Setup {
    // A count above the readings before the verdict's, so that a failing one is measured.
    let shape = if rng.chance(0.5) {
        Shape::Required(rng.range((GOOD_READINGS + ERROR_LIMIT + 1, GOOD_READINGS + 4)))
    } else {
        Shape::Duration
    };
    let verdict = match rng.below(4) {
        0 => AnalysisPhase::Failed,
        1 => AnalysisPhase::Error,
        _ => AnalysisPhase::Successful,
    };
    let (mut ro, _) = experiment_rollout(shape, rng);
    // Sometimes a second update follows the first, with no old ReplicaSet kept: the first
    // one's ReplicaSet goes, and with it its Experiment, deleted by the Rollout and collected
    // with everything it made.
    let second = rng.chance(0.5);
    ro["spec"]["revisionHistoryLimit"] = json!(rng.range((0, 1)));
    let (controllers, leases) = controllers(rng);
    let count = match shape {
        Shape::Required(count) => Some(count),
        _ => None,
    };
    let passes = verdict == AnalysisPhase::Successful;
    let (settled, last) = if passes {
        ("Healthy", if second { "v3" } else { "v2" })
    } else {
        ("Degraded", "v1")
    };
    let mut script = vec![step(
        Wait::Phase("Healthy"),
        (0, 5_000),
        Op::SetImage(image("v2")),
    )];
    if second {
        script.push(step(
            Wait::Phase(settled),
            (0, 5_000),
            Op::SetImage(image("v3")),
        ));
    }
    let expect = Expect {
        phase: settled,
        stable_image: image(last),
        analysis_runs: None,
    };
    Setup {
        rollout: ro,
        objects: vec![(Kind::AnalysisTemplate, template(count))],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: MeasureScript {
            notice_ms: NOTICE_MS,
            readings: readings(&verdict, rng),
        },
        script,
        notifications: None,
        expect,
    }
}

fn timed(_seed: u64, rng: &mut Rng) -> Setup {
    let (ro, _) = experiment_rollout(Shape::Timed(rng.range((3, 30))), rng);
    let (controllers, leases) = controllers(rng);
    Setup {
        rollout: ro,
        objects: vec![],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: MeasureScript {
            notice_ms: NOTICE_MS,
            readings: Vec::new(),
        },
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

fn interrupted(_seed: u64, rng: &mut Rng) -> Setup {
    let (ro, index) = experiment_rollout(Shape::Unbounded, rng);
    let (controllers, leases) = controllers(rng);
    let (op, expect) = if rng.chance(0.5) {
        (
            Op::Abort,
            Expect {
                phase: "Degraded",
                stable_image: image("v1"),
                analysis_runs: None,
            },
        )
    } else {
        (
            Op::PromoteFull,
            Expect {
                phase: "Healthy",
                stable_image: image("v2"),
                analysis_runs: None,
            },
        )
    };
    Setup {
        rollout: ro,
        objects: vec![(Kind::AnalysisTemplate, template(None))],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: MeasureScript {
            notice_ms: NOTICE_MS,
            readings: readings(&AnalysisPhase::Successful, rng),
        },
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("v2")),
            ),
            // From before the Experiment exists to well into its analysis.
            step(Wait::CanaryStep(index), (0, 40_000), op),
        ],
        notifications: None,
        expect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failing_verdict_lands_before_the_duration_ends() {
        assert!(
            verdict_within_the_duration() < DURATION_S * 1_000,
            "{}",
            verdict_within_the_duration()
        );
    }

    #[test]
    fn the_step_takes_its_templates_from_the_stable_and_the_canary() {
        for seed in 0..16 {
            let mut rng = Rng::new(seed);
            let (ro, index) = experiment_rollout(Shape::Duration, &mut rng);
            let steps = ro["spec"]["strategy"]["canary"]["steps"]
                .as_array()
                .unwrap();
            let x = &steps[index as usize]["experiment"];
            let refs: Vec<&str> = x["templates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["specRef"].as_str().unwrap())
                .collect();
            assert_eq!(refs, ["stable", "canary"]);
            assert_eq!(x["duration"], json!("90s"));
            assert_eq!(x["analyses"][0]["templateName"], json!(TEMPLATE));
        }
    }
}
