//! Gradual abort, a Sluice extension (Argo issue #3888): with the Rollout annotation
//! `rollouts.sluice.dev/gradual-abort: <duration>`, an aborted update hands its traffic back
//! to stable in steps, the reverse of the `setWeight` steps it took, each held for the
//! duration, instead of all at once; the canary keeps its pods until its weight is 0. The
//! annotation lives outside `argoproj.io`, so the Rollout stays valid for Argo, which ignores
//! it. Without a traffic router there is no weight to step down, and it has no effect.
//!
//! The descent is a pure function of the steps, the step the update had reached, the time
//! since `status.abortedAt` and the hold: nothing is stored besides what Argo stores.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::rollout::{CanaryStep, Rollout};

/// The annotation that turns it on, with the time each weight is held.
pub const GRADUAL_ABORT: &str = "rollouts.sluice.dev/gradual-abort";

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
/// taken before it, latest first, then 0.
pub(crate) fn levels(steps: &[CanaryStep], step_index: i32, max: i32) -> Vec<i32> {
    let end = usize::try_from(step_index.saturating_add(1))
        .unwrap_or(0)
        .min(steps.len());
    let taken: Vec<i32> = steps[..end].iter().filter_map(|s| s.set_weight).collect();
    // Without steps traffic never left stable (it moves with the Service at promotion).
    let top = if steps.is_empty() {
        0
    } else if step_index >= steps.len() as i32 {
        max
    } else {
        taken.last().copied().unwrap_or(0)
    };
    let mut out = vec![top];
    for w in taken.into_iter().rev() {
        if w < *out.last().unwrap_or(&0) && w > 0 {
            out.push(w);
        }
    }
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
    fn the_descent_reverses_the_weights_taken() {
        let s = steps(json!([
            {"setWeight": 10}, {"pause": {}}, {"setWeight": 25}, {"pause": {}},
            {"setWeight": 50}, {"pause": {}}
        ]));
        assert_eq!(levels(&s, 5, 100), vec![50, 25, 10, 0]);
        assert_eq!(levels(&s, 3, 100), vec![25, 10, 0]);
        assert_eq!(levels(&s, 0, 100), vec![10, 0]);
        // Past the last step the canary had all of it.
        assert_eq!(levels(&s, 6, 100), vec![100, 50, 25, 10, 0]);
        // A weight that went up and down again is not revisited upwards.
        let zigzag = steps(json!([{"setWeight": 40}, {"setWeight": 20}, {"setWeight": 30}]));
        assert_eq!(levels(&zigzag, 2, 100), vec![30, 20, 0]);
        assert_eq!(levels(&[], 0, 100), vec![0]);
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
