//! The pause conditions of a Rollout's status, by reason.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::rollout::{PauseCondition, PauseReason, RolloutStatus};

use crate::plan::Event;

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
