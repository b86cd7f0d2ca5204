//! The pause conditions of a Rollout's status, by reason.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::rollout::{PauseCondition, PauseReason, RolloutPause, RolloutStatus};

use crate::plan::{Event, set_requeue};
use crate::waits::Wait;

/// Whether the status holds a pause condition for `reason`.
pub(crate) fn has_pause(status: &RolloutStatus, reason: &PauseReason) -> bool {
    status
        .pause_conditions
        .iter()
        .flatten()
        .any(|p| p.reason.as_ref() == Some(reason))
}

/// Removes the pause condition for `reason`; no conditions left reads as none.
pub(crate) fn remove_pause(status: &mut RolloutStatus, reason: &PauseReason) {
    if let Some(p) = status.pause_conditions.as_mut() {
        p.retain(|c| c.reason.as_ref() != Some(reason));
        if p.is_empty() {
            status.pause_conditions = None;
        }
    }
}

/// The controller pauses the Rollout for `reason` (from `now`), as Argo does: the condition, the
/// controller's pause flag, and the `RolloutPaused` event that says why.
pub(crate) fn add_pause(status: &mut RolloutStatus, reason: PauseReason, now: Timestamp) -> Event {
    let message = format!("Rollout is paused ({})", reason.as_str());
    status
        .pause_conditions
        .get_or_insert_with(Vec::new)
        .push(PauseCondition {
            reason: Some(reason),
            start_time: Some(Time(now)),
        });
    status.controller_pause = Some(true);
    Event::normal("RolloutPaused", message)
}

/// A canary's `pause` step at `step_index`, for ReplicaSets and driven workloads alike: the
/// first time it pauses the Rollout (`CanaryPauseStep`); it is done when its duration has run
/// out, or when a user cleared the pause conditions the controller set (`promote`). Returns
/// whether it is done; otherwise records what it waits for, and when to look again.
pub(crate) fn pause_step(
    status: &mut RolloutStatus,
    requeue: &mut Option<Duration>,
    waits: &mut Vec<Wait>,
    events: &mut Vec<Event>,
    pause: &RolloutPause,
    step_index: i32,
    now: Timestamp,
) -> bool {
    let existing = status
        .pause_conditions
        .iter()
        .flatten()
        .find(|p| p.reason.as_ref() == Some(&PauseReason::CanaryPauseStep))
        .cloned();
    let any_pause = status
        .pause_conditions
        .as_ref()
        .is_some_and(|p| !p.is_empty());
    if status.controller_pause == Some(true) && !any_pause {
        // The controller paused and somebody cleared the pause conditions: promoted.
        return true;
    }
    let until = |started: Timestamp, d: Duration| {
        jiff::SignedDuration::try_from(d)
            .ok()
            .and_then(|d| started.checked_add(d).ok())
    };
    let Some(existing) = existing else {
        events.push(add_pause(status, PauseReason::CanaryPauseStep, now));
        let duration = pause.duration().and_then(Result::ok);
        if let Some(d) = duration {
            set_requeue(requeue, d);
        }
        waits.push(Wait::PauseStep {
            step: step_index,
            until: duration.and_then(|d| until(now, d)),
        });
        return false;
    };
    let Some(Ok(duration)) = pause.duration() else {
        waits.push(Wait::PauseStep {
            step: step_index,
            until: None,
        });
        return false;
    };
    let started = existing.start_time.map(|t| t.0).unwrap_or(now);
    let elapsed = Duration::try_from(now.duration_since(started)).unwrap_or_default();
    if elapsed >= duration {
        return true;
    }
    set_requeue(requeue, duration - elapsed);
    waits.push(Wait::PauseStep {
        step: step_index,
        until: until(started, duration),
    });
    false
}
