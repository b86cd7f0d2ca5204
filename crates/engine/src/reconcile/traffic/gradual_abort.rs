//! Gradual abort, a Sluice extension (Argo issue #3888): with the Rollout annotation
//! `rollouts.sluice.dev/gradual-abort: <duration>`, an aborted update hands its traffic back
//! to stable in steps, the reverse of the `setWeight` steps it took, each held for the
//! duration, instead of all at once; the canary keeps its pods until its weight is 0. The
//! annotation lives outside `argoproj.io`, so the Rollout stays valid for Argo, which ignores
//! it. Without a traffic router there is no weight to step down, and it has no effect.
//!
//! The descent is a pure function of the steps, the weight routed now, when it started being
//! routed, the hold and the time. An abort resets `currentStepIndex` to 0 (as in Argo), and a
//! controller may look late, so the weight and the moment it was set are recorded on the
//! Rollout, in the annotation `rollouts.sluice.dev/gradual-abort-at: <weight>@<time>`,
//! written with each step down (before the router write, so a weight is never routed
//! without its record): every weight is held for the full duration, however late the
//! reconciles come, and none is skipped. The annotation is removed once the Rollout is no
//! longer aborted.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::rollout::{CanaryStep, Rollout};

/// The annotation that turns it on, with the time each weight is held.
pub const GRADUAL_ABORT: &str = "rollouts.sluice.dev/gradual-abort";

/// The weight a gradual abort routes now and since when: `<weight>@<RFC 3339 time>`.
pub const GRADUAL_ABORT_AT: &str = "rollouts.sluice.dev/gradual-abort-at";

/// The hold time the annotation asks for; `Ok(None)` when it is absent. A value that is not a
/// duration is a spec error, in the field-error form of the rest.
pub fn hold(rollout: &Rollout) -> Result<Option<Duration>, String> {
    let Some(value) = rollout
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GRADUAL_ABORT))
    else {
        return Ok(None);
    };
    match sluice_api::duration::pause_duration(&IntOrString::String(value.clone())) {
        Ok(d) if d > Duration::ZERO => Ok(Some(d)),
        Ok(_) => Err(format!(
            "metadata.annotations[{GRADUAL_ABORT}]: Invalid value: \"{value}\": must be a positive duration"
        )),
        Err(e) => Err(format!(
            "metadata.annotations[{GRADUAL_ABORT}]: Invalid value: \"{value}\": {e}"
        )),
    }
}

/// The recorded weight and the moment it was set; `None` when absent or malformed.
pub(crate) fn recorded(rollout: &Rollout) -> Option<(i32, Timestamp)> {
    let value = rollout
        .metadata
        .annotations
        .as_ref()?
        .get(GRADUAL_ABORT_AT)?;
    let (weight, at) = value.split_once('@')?;
    Some((weight.parse().ok()?, at.parse().ok()?))
}

/// The annotation's value for `weight` set at `at`.
pub(crate) fn record(weight: i32, at: Timestamp) -> String {
    format!("{weight}@{at}")
}

/// The next weight down from `weight`: the highest step weight below it, or 0.
pub(crate) fn next_level(steps: &[CanaryStep], weight: i32) -> i32 {
    steps
        .iter()
        .filter_map(|s| s.set_weight)
        .filter(|&w| w > 0 && w < weight)
        .max()
        .unwrap_or(0)
}

/// What one reconcile of a gradual abort does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The canary weight to route.
    pub weight: i32,
    /// A new record to write first (a first weight, or a step down).
    pub record: Option<(i32, Timestamp)>,
    /// When to look again (`None` once at 0).
    pub requeue: Option<Duration>,
}

/// The weight to route now, given the record (if any) and the weight routed now (`current`).
pub(crate) fn decide(
    steps: &[CanaryStep],
    hold: Duration,
    recorded: Option<(i32, Timestamp)>,
    current: i32,
    now: Timestamp,
) -> Step {
    let Some((weight, since)) = recorded else {
        // The abort's first reconcile: the weight reached holds, from now.
        return Step {
            weight: current,
            record: Some((current, now)),
            requeue: (current > 0).then_some(hold),
        };
    };
    // A step down recorded but not yet routed (its router write was refused): the weight
    // is held from when it lands, not from when it was decided, so that a refused write
    // never shortens a hold or skips a level.
    if weight < current {
        let weight = weight.max(0);
        return Step {
            weight,
            record: Some((weight, now)),
            requeue: (weight > 0).then_some(hold),
        };
    }
    // Never back up: a weight already lower stays (the record may predate a lower write).
    let weight = weight.min(current).max(0);
    if weight == 0 {
        return Step {
            weight: 0,
            record: None,
            requeue: None,
        };
    }
    let held = now.duration_since(since).unsigned_abs();
    if held < hold {
        return Step {
            weight,
            record: None,
            requeue: Some(hold - held),
        };
    }
    let next = next_level(steps, weight);
    Step {
        weight: next,
        record: Some((next, now)),
        requeue: (next > 0).then_some(hold),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn steps(v: serde_json::Value) -> Vec<CanaryStep> {
        serde_json::from_value(v).unwrap()
    }

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn the_next_level_is_the_highest_step_weight_below() {
        let s = steps(json!([
            {"setWeight": 10}, {"pause": {}}, {"setWeight": 25}, {"pause": {}},
            {"setWeight": 50}, {"pause": {}}
        ]));
        assert_eq!(next_level(&s, 100), 50);
        assert_eq!(next_level(&s, 50), 25);
        assert_eq!(next_level(&s, 40), 25);
        assert_eq!(next_level(&s, 25), 10);
        assert_eq!(next_level(&s, 10), 0);
        assert_eq!(next_level(&[], 30), 0);
    }

    #[test]
    fn a_step_down_whose_router_write_was_refused_is_held_from_when_it_lands() {
        let s = steps(json!([{"setWeight": 10}, {"setWeight": 25}, {"setWeight": 50}]));
        let hold = Duration::from_secs(30);
        // 25 was recorded at 0, but the router write of that plan was refused: 50 is still
        // what is routed. Long after the hold, the step down is tried again (not skipped to
        // 10) and its hold starts now.
        assert_eq!(
            decide(&s, hold, Some((25, t(0))), 50, t(120)),
            Step {
                weight: 25,
                record: Some((25, t(120))),
                requeue: Some(Duration::from_secs(30))
            }
        );
        // Once routed, it is held from that moment.
        assert_eq!(
            decide(&s, hold, Some((25, t(120))), 25, t(140)),
            Step {
                weight: 25,
                record: None,
                requeue: Some(Duration::from_secs(10))
            }
        );
    }

    #[test]
    fn each_weight_is_held_for_the_duration_however_late_the_reconcile() {
        let s = steps(json!([{"setWeight": 10}, {"setWeight": 25}, {"setWeight": 50}]));
        let hold = Duration::from_secs(30);
        let secs = Duration::from_secs;
        // First reconcile of the abort: hold at 50 and record it.
        assert_eq!(
            decide(&s, hold, None, 50, t(0)),
            Step {
                weight: 50,
                record: Some((50, t(0))),
                requeue: Some(secs(30))
            }
        );
        // Within the hold: stay, look again when it ends.
        assert_eq!(
            decide(&s, hold, Some((50, t(0))), 50, t(12)),
            Step {
                weight: 50,
                record: None,
                requeue: Some(secs(18))
            }
        );
        // Two minutes late: one level down only, held afresh from now.
        assert_eq!(
            decide(&s, hold, Some((50, t(0))), 50, t(120)),
            Step {
                weight: 25,
                record: Some((25, t(120))),
                requeue: Some(secs(30))
            }
        );
        assert_eq!(
            decide(&s, hold, Some((10, t(200))), 10, t(230)),
            Step {
                weight: 0,
                record: Some((0, t(230))),
                requeue: None
            }
        );
        assert_eq!(
            decide(&s, hold, Some((0, t(230))), 0, t(999)),
            Step {
                weight: 0,
                record: None,
                requeue: None
            }
        );
        // A record above what is routed never raises the weight.
        assert_eq!(decide(&s, hold, Some((50, t(0))), 25, t(1)).weight, 25);
    }

    #[test]
    fn the_record_round_trips() {
        let ro = |v: Option<&str>| -> Rollout {
            serde_json::from_value(json!({
                "metadata": {"name": "r", "annotations": v.map(|v| json!({GRADUAL_ABORT_AT: v}))},
                "spec": {}
            }))
            .unwrap()
        };
        let value = record(25, t(0));
        assert_eq!(recorded(&ro(Some(&value))), Some((25, t(0))));
        assert_eq!(recorded(&ro(Some("x@2026-11-25T09:00:00Z"))), None);
        assert_eq!(recorded(&ro(Some("25"))), None);
        assert_eq!(recorded(&ro(None)), None);
    }

    #[test]
    fn the_annotation_is_a_duration() {
        let ro = |v: &str| -> Rollout {
            serde_json::from_value(json!({
                "metadata": {"name": "r", "annotations": {GRADUAL_ABORT: v}},
                "spec": {}
            }))
            .unwrap()
        };
        assert_eq!(hold(&ro("30s")), Ok(Some(Duration::from_secs(30))));
        assert_eq!(hold(&ro("2m")), Ok(Some(Duration::from_secs(120))));
        assert_eq!(hold(&ro("15")), Ok(Some(Duration::from_secs(15))));
        let err = hold(&ro("soon")).unwrap_err();
        assert!(
            err.starts_with(
                "metadata.annotations[rollouts.sluice.dev/gradual-abort]: Invalid value: \"soon\""
            ),
            "{err}"
        );
        assert!(hold(&ro("0s")).is_err());
        let plain: Rollout =
            serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {}})).unwrap();
        assert_eq!(hold(&plain), Ok(None));
    }
}
