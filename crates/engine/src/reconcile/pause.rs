//! The pause conditions of a Rollout's status, by reason.

use sluice_api::rollout::{PauseReason, RolloutStatus};

/// Whether the status holds a pause condition for `reason`.
pub(super) fn has_pause(status: &RolloutStatus, reason: &PauseReason) -> bool {
    status
        .pause_conditions
        .iter()
        .flatten()
        .any(|p| p.reason.as_ref() == Some(reason))
}

/// Removes the pause condition for `reason`; no conditions left reads as none.
pub(super) fn remove_pause(status: &mut RolloutStatus, reason: &PauseReason) {
    if let Some(p) = status.pause_conditions.as_mut() {
        p.retain(|c| c.reason.as_ref() != Some(reason));
        if p.is_empty() {
            status.pause_conditions = None;
        }
    }
}
