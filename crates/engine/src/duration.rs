//! `status.duration` (Argo's master, its pull request 4774): when the latest update began and
//! ended, how it ended, and how long it waited for a person, decided from the status before
//! and after a reconcile.
//!
//! An update begins when a new pod template is seen while another ReplicaSet is stable; it ends
//! when its pods become stable (`Promoted`, `FastPromoted` after `promote --full`,
//! `FastRolledBack` for a fast rollback or one within the rollback window, `RolledBack` when
//! the template went back to the stable pods), when it is aborted (`Aborted`), or when another
//! template replaces it (`Superseded`, recorded on the old update only in the moment the new
//! one starts, since the field holds the latest). A person is waited for while `spec.paused`
//! is set, at an indefinite pause step, and at a blue-green promotion that is not automatic.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::rollout::{PauseReason, Rollout, RolloutDurationStatus, RolloutStatus};

use crate::plan::Event;

/// Updates `new.duration` from `old` (the status read) and `new` (the status decided), with
/// the events of the same reconcile (a completion's reason says how it was promoted).
pub(crate) fn track(
    ro: &Rollout,
    old: &RolloutStatus,
    new: &mut RolloutStatus,
    events: &[Event],
    now: Timestamp,
) {
    let hash = new.current_pod_hash.as_deref();
    let stable = new.stable_rs.as_deref();
    let mut d = new.duration.clone().unwrap_or_default();
    let running =
        |d: &RolloutDurationStatus| d.rollout_started_at.is_some() && d.finished_at.is_none();

    let new_template = old.current_pod_hash.as_deref() != hash;
    if new_template && hash.is_some() && stable.is_some() && hash != stable {
        // The field holds the latest update: one still running is superseded by this one.
        d = RolloutDurationStatus {
            rollout_started_at: Some(Time(now)),
            ..Default::default()
        };
    }
    if running(&d) {
        let waiting = waits_for_a_person(ro, new);
        match (&d.manual_pause_started_at, waiting) {
            (None, true) => d.manual_pause_started_at = Some(Time(now)),
            (Some(_), false) => end_pause(&mut d, now),
            _ => {}
        }
        let ended = if new.abort == Some(true) {
            Some("Aborted")
        } else if hash.is_some() && stable == hash {
            Some(if old.promote_full == Some(true) {
                "FastPromoted"
            } else if events.iter().any(|e| {
                e.reason == "RolloutCompleted"
                    && (e.message.ends_with("Fast rollback")
                        || e.message.ends_with("Rollback within window"))
            }) {
                "FastRolledBack"
            } else if old.stable_rs.as_deref() == hash {
                "RolledBack"
            } else {
                "Promoted"
            })
        } else {
            None
        };
        if let Some(how) = ended {
            end_pause(&mut d, now);
            d.finished_at = Some(Time(now));
            d.completion_status = Some(how.to_string());
        }
    }
    new.duration = (d != RolloutDurationStatus::default()).then_some(d);
}

fn end_pause(d: &mut RolloutDurationStatus, now: Timestamp) {
    if let Some(Time(since)) = d.manual_pause_started_at.take() {
        let waited = now.duration_since(since).as_secs().max(0);
        d.total_manual_pause_duration_seconds =
            Some(d.total_manual_pause_duration_seconds.unwrap_or(0) + waited);
    }
}

/// Whether the update waits for a person: a user pause, an indefinite pause step, or a
/// blue-green promotion that is not automatic.
fn waits_for_a_person(ro: &Rollout, status: &RolloutStatus) -> bool {
    if ro.spec.paused == Some(true) {
        return true;
    }
    let strategy = ro.spec.strategy.as_ref();
    status
        .pause_conditions
        .iter()
        .flatten()
        .any(|p| match p.reason {
            Some(PauseReason::CanaryPauseStep) => {
                let canary = strategy.and_then(|s| s.canary.as_ref());
                let index = status.current_step_index.unwrap_or(0);
                canary
                    .and_then(|c| crate::steps::current_step(c, index))
                    .and_then(|s| s.pause.as_ref())
                    .is_some_and(|p| p.duration.is_none())
            }
            Some(PauseReason::BlueGreenPause) => strategy
                .and_then(|s| s.blue_green.as_ref())
                .is_some_and(|bg| !bg.auto_promotion_enabled()),
            _ => false,
        })
}
