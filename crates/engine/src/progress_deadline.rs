//! The progress deadline, judged alike for a ReplicaSet update and a StatefulSet update:
//! `progressDeadlineSeconds` (Argo's default when unset) counted from the Progressing
//! condition's `lastUpdateTime`, the last time the update made progress.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use sluice_api::Rollout;
use sluice_api::rollout::RolloutCondition;

use crate::waits::Wait;

/// Where an update in progress stands against its deadline.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Deadline {
    /// Not passed: look again in `left`; `wait` says so to the user.
    Running {
        left: Duration,
        wait: Wait,
    },
    Passed,
}

/// Judges `progressing` (the Progressing condition) against `rollout`'s deadline at `now`. A
/// condition without a time counts from `now`; one stamped ahead of `now` (a skewed clock)
/// counts as having just progressed.
pub(crate) fn judge(rollout: &Rollout, progressing: &RolloutCondition, now: Timestamp) -> Deadline {
    let seconds = rollout.spec.progress_deadline_seconds().max(0);
    let last = progressing.last_update_time.as_ref().map_or(now, |t| t.0);
    let elapsed = Duration::try_from(now.duration_since(last)).unwrap_or_default();
    let deadline = Duration::from_secs(seconds.unsigned_abs().into());
    if elapsed >= deadline {
        return Deadline::Passed;
    }
    let at = last
        .checked_add(SignedDuration::from_secs(seconds.into()))
        .unwrap_or(last);
    Deadline::Running {
        left: deadline - elapsed,
        wait: Wait::ProgressDeadline { since: last, at },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn rollout(seconds: Option<i32>) -> Rollout {
        let mut ro: Rollout = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "r"}, "spec": {}
        }))
        .unwrap();
        ro.spec.progress_deadline_seconds = seconds;
        ro
    }

    fn progressing(at: Option<i64>) -> RolloutCondition {
        RolloutCondition {
            last_update_time: at.map(|s| Time(Timestamp::from_second(s).unwrap())),
            ..Default::default()
        }
    }

    fn now(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn the_deadline_counts_from_the_last_progress() {
        let judged = judge(&rollout(Some(60)), &progressing(Some(100)), now(130));
        assert_eq!(
            judged,
            Deadline::Running {
                left: Duration::from_secs(30),
                wait: Wait::ProgressDeadline {
                    since: now(100),
                    at: now(160)
                },
            }
        );
        assert_eq!(
            judge(&rollout(Some(60)), &progressing(Some(100)), now(160)),
            Deadline::Passed
        );
    }

    #[test]
    fn unset_is_argos_default_and_a_negative_deadline_has_passed() {
        let judged = judge(&rollout(None), &progressing(Some(0)), now(599));
        assert!(matches!(judged, Deadline::Running { left, .. } if left == Duration::from_secs(1)));
        assert_eq!(
            judge(&rollout(Some(-5)), &progressing(Some(0)), now(0)),
            Deadline::Passed
        );
    }

    #[test]
    fn no_time_or_a_time_ahead_counts_as_just_progressed() {
        for cond in [progressing(None), progressing(Some(500))] {
            let judged = judge(&rollout(Some(60)), &cond, now(400));
            assert!(
                matches!(judged, Deadline::Running { left, .. } if left == Duration::from_secs(60))
            );
        }
    }
}
