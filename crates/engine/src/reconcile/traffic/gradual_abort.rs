//! Gradual abort, a Sluice extension (Argo issue #3888): with the Rollout annotation
//! `rollouts.sluice.dev/gradual-abort: <duration>`, an aborted update hands its traffic back
//! to stable in steps, the reverse of the `setWeight` steps it took, each held for the
//! duration, instead of all at once; the canary keeps its pods until its weight is 0. The
//! annotation lives outside `argoproj.io`, so the Rollout stays valid for Argo, which ignores
//! it. Without a traffic router there is no weight to step down, and it has no effect.
//!
//! The descent is a pure function of the steps, the weight the update had reached, the time
//! since `status.abortedAt` and the hold. An abort resets `currentStepIndex` to 0 (as in
//! Argo), so the weight reached is recorded once, at the abort, in the Rollout annotation
//! `rollouts.sluice.dev/gradual-abort-from: <weight>@<abortedAt>`; until that write is seen
//! the weight holds where it was. The annotation is removed once the Rollout is no longer
//! aborted.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::rollout::{CanaryStep, Rollout};

/// The annotation that turns it on, with the time each weight is held.
pub const GRADUAL_ABORT: &str = "rollouts.sluice.dev/gradual-abort";

/// The weight an abort started from, and the abort it belongs to: `<weight>@<abortedAt>`.
pub const GRADUAL_ABORT_FROM: &str = "rollouts.sluice.dev/gradual-abort-from";

/// The value of [`GRADUAL_ABORT_FROM`] for an abort at `aborted_at` from `weight`.
pub(crate) fn from_value(weight: i32, aborted_at: &str) -> String {
    format!("{weight}@{aborted_at}")
}

/// The weight recorded for the abort at `aborted_at`; `None` when the annotation is absent,
/// malformed or belongs to another abort.
pub(crate) fn recorded_from(rollout: &Rollout, aborted_at: &str) -> Option<i32> {
    let value = rollout
        .metadata
        .annotations
        .as_ref()?
        .get(GRADUAL_ABORT_FROM)?;
    let (weight, at) = value.split_once('@')?;
    (at == aborted_at).then(|| weight.parse().ok()).flatten()
}

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

/// The weights traffic steps down through: the weight reached, then each lower `setWeight`
/// of the steps, highest first, then 0.
pub(crate) fn levels(steps: &[CanaryStep], top: i32) -> Vec<i32> {
    let mut lower: Vec<i32> = steps
        .iter()
        .filter_map(|s| s.set_weight)
        .filter(|&w| w > 0 && w < top)
        .collect();
    lower.sort_unstable_by(|a, b| b.cmp(a));
    lower.dedup();
    let mut out = vec![top.max(0)];
    out.extend(lower);
    if out.last() != Some(&0) {
        out.push(0);
    }
    out
}

/// The weight `elapsed` into the descent, and how long until it steps down next (`None` once
/// at 0).
pub(crate) fn weight_at(
    levels: &[i32],
    hold: Duration,
    elapsed: Duration,
) -> (i32, Option<Duration>) {
    let hold_s = hold.as_secs().max(1);
    let level = usize::try_from(elapsed.as_secs() / hold_s).unwrap_or(usize::MAX);
    match levels.get(level) {
        Some(&w) if w > 0 => {
            let next = hold_s - elapsed.as_secs() % hold_s;
            (w, Some(Duration::from_secs(next)))
        }
        _ => (0, None),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn steps(v: serde_json::Value) -> Vec<CanaryStep> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_descent_goes_through_the_lower_step_weights() {
        let s = steps(json!([
            {"setWeight": 10}, {"pause": {}}, {"setWeight": 25}, {"pause": {}},
            {"setWeight": 50}, {"pause": {}}
        ]));
        assert_eq!(levels(&s, 50), vec![50, 25, 10, 0]);
        assert_eq!(levels(&s, 25), vec![25, 10, 0]);
        assert_eq!(levels(&s, 10), vec![10, 0]);
        // Past the last step the canary had all of it.
        assert_eq!(levels(&s, 100), vec![100, 50, 25, 10, 0]);
        // A weight between steps (the pods were not all up yet) starts the descent.
        assert_eq!(levels(&s, 40), vec![40, 25, 10, 0]);
        let zigzag = steps(json!([{"setWeight": 40}, {"setWeight": 20}, {"setWeight": 30}]));
        assert_eq!(levels(&zigzag, 30), vec![30, 20, 0]);
        assert_eq!(levels(&[], 0), vec![0]);
    }

    #[test]
    fn the_weight_at_the_abort_is_recorded_per_abort() {
        let ro = |v: Option<&str>| -> Rollout {
            serde_json::from_value(json!({
                "metadata": {"name": "r", "annotations": v.map(|v| json!({GRADUAL_ABORT_FROM: v}))},
                "spec": {}
            }))
            .unwrap()
        };
        let at = "2026-11-25T09:00:00Z";
        assert_eq!(from_value(50, at), "50@2026-11-25T09:00:00Z");
        assert_eq!(recorded_from(&ro(Some(&from_value(50, at))), at), Some(50));
        assert_eq!(
            recorded_from(&ro(Some("50@2026-11-24T09:00:00Z")), at),
            None
        );
        assert_eq!(recorded_from(&ro(Some("x@2026-11-25T09:00:00Z")), at), None);
        assert_eq!(recorded_from(&ro(None), at), None);
    }

    #[test]
    fn each_weight_is_held_then_the_next_follows() {
        let l = [50, 25, 10, 0];
        let hold = Duration::from_secs(30);
        let at = |s| weight_at(&l, hold, Duration::from_secs(s));
        assert_eq!(at(0), (50, Some(Duration::from_secs(30))));
        assert_eq!(at(29), (50, Some(Duration::from_secs(1))));
        assert_eq!(at(30), (25, Some(Duration::from_secs(30))));
        assert_eq!(at(75), (10, Some(Duration::from_secs(15))));
        assert_eq!(at(90), (0, None));
        assert_eq!(at(10_000), (0, None));
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
