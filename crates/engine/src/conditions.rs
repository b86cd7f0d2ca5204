//! Rollout conditions with Argo's types, reasons and messages, and the rule for their times:
//! `lastTransitionTime` moves only when the status flips; `lastUpdateTime` moves when the
//! condition is re-stated with news (a new reason or message, or fresh progress).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::rollout::{RolloutCondition, RolloutConditionType};

pub const TRUE: &str = "True";
pub const FALSE: &str = "False";
pub const UNKNOWN: &str = "Unknown";

// Reasons (Argo's strings).
pub const INVALID_SPEC: &str = "InvalidSpec";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
pub const ROLLOUT_ABORTED: &str = "RolloutAborted";
pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
pub const ROLLOUT_RETRY: &str = "RolloutRetry";
pub const AVAILABLE_REASON: &str = "AvailableReason";
pub const ROLLOUT_COMPLETED: &str = "RolloutCompleted";
pub const ROLLOUT_HEALTHY: &str = "RolloutHealthy";

pub fn find(
    conditions: &[RolloutCondition],
    type_: RolloutConditionType,
) -> Option<&RolloutCondition> {
    conditions.iter().find(|c| c.type_.as_ref() == Some(&type_))
}

pub fn remove(conditions: &mut Vec<RolloutCondition>, type_: RolloutConditionType) {
    conditions.retain(|c| c.type_.as_ref() != Some(&type_));
}

/// Sets a condition. When `touch` is false and the condition already says the same thing
/// (status, reason and message), it is left exactly as it was, so that steady state produces
/// no status write. With `touch`, `lastUpdateTime` is refreshed (fresh progress).
pub fn set(
    conditions: &mut Vec<RolloutCondition>,
    type_: RolloutConditionType,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
    touch: bool,
) {
    let message = message.into();
    let now_time = Some(Time(now));
    if let Some(existing) = conditions
        .iter_mut()
        .find(|c| c.type_.as_ref() == Some(&type_))
    {
        let same_status = existing.status.as_ref().map(|s| s.as_str()) == Some(status);
        let same_words = existing.reason.as_deref() == Some(reason)
            && existing.message.as_deref() == Some(message.as_str());
        if same_status && same_words && !touch {
            return;
        }
        if !same_status {
            existing.last_transition_time = now_time.clone();
        }
        existing.status = Some(status.into());
        existing.reason = Some(reason.to_string());
        existing.message = Some(message);
        existing.last_update_time = now_time;
        return;
    }
    conditions.push(RolloutCondition {
        type_: Some(type_),
        status: Some(status.into()),
        last_update_time: now_time.clone(),
        last_transition_time: now_time,
        reason: Some(reason.to_string()),
        message: Some(message),
    });
}

pub fn has_reason(
    conditions: &[RolloutCondition],
    type_: RolloutConditionType,
    reason: &str,
) -> bool {
    find(conditions, type_).is_some_and(|c| c.reason.as_deref() == Some(reason))
}

/// `Available`: whether the Rollout has its minimum of available pods.
pub fn set_available(conditions: &mut Vec<RolloutCondition>, available: bool, now: Timestamp) {
    let (status, message) = if available {
        (TRUE, "Rollout has minimum availability")
    } else {
        (FALSE, "Rollout does not have minimum availability")
    };
    set(
        conditions,
        RolloutConditionType::Available,
        status,
        AVAILABLE_REASON,
        message,
        now,
        false,
    );
}

/// `Paused`: set while paused; once lifted it turns False, with the reason and message Argo
/// gives it while paused too (`RolloutPaused`, "Rollout is paused": Argo has one condition for
/// both states and changes only its status). Returns whether this lifted a pause.
pub fn set_paused(conditions: &mut Vec<RolloutCondition>, paused: bool, now: Timestamp) -> bool {
    if paused {
        set(
            conditions,
            RolloutConditionType::Paused,
            TRUE,
            ROLLOUT_PAUSED,
            "Rollout is paused",
            now,
            false,
        );
        return false;
    }
    let Some(was) = find(conditions, RolloutConditionType::Paused) else {
        return false;
    };
    let was_paused = was.status == Some(sluice_api::common::ConditionStatus::True);
    set(
        conditions,
        RolloutConditionType::Paused,
        FALSE,
        ROLLOUT_PAUSED,
        "Rollout is paused",
        now,
        false,
    );
    was_paused
}

/// `Completed`, and `Healthy` when completed with every pod available.
pub fn set_completed(
    conditions: &mut Vec<RolloutCondition>,
    completed: bool,
    all_available: bool,
    now: Timestamp,
) {
    let status = if completed { TRUE } else { FALSE };
    set(
        conditions,
        RolloutConditionType::Completed,
        status,
        ROLLOUT_COMPLETED,
        ROLLOUT_COMPLETED,
        now,
        false,
    );
    let (status, message) = if completed && all_available {
        (TRUE, "Rollout is healthy")
    } else {
        (FALSE, "Rollout is not healthy")
    };
    set(
        conditions,
        RolloutConditionType::Healthy,
        status,
        ROLLOUT_HEALTHY,
        message,
        now,
        false,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn unchanged_condition_keeps_its_times() {
        let mut c = Vec::new();
        set(
            &mut c,
            RolloutConditionType::Available,
            TRUE,
            AVAILABLE_REASON,
            "m",
            t(10),
            false,
        );
        set(
            &mut c,
            RolloutConditionType::Available,
            TRUE,
            AVAILABLE_REASON,
            "m",
            t(20),
            false,
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].last_update_time, Some(Time(t(10))));
        assert_eq!(c[0].last_transition_time, Some(Time(t(10))));
    }

    #[test]
    fn touch_refreshes_update_time_but_not_transition() {
        let mut c = Vec::new();
        set(
            &mut c,
            RolloutConditionType::Progressing,
            TRUE,
            RS_UPDATED,
            "m",
            t(10),
            true,
        );
        set(
            &mut c,
            RolloutConditionType::Progressing,
            TRUE,
            RS_UPDATED,
            "m",
            t(20),
            true,
        );
        assert_eq!(c[0].last_update_time, Some(Time(t(20))));
        assert_eq!(c[0].last_transition_time, Some(Time(t(10))));
    }

    #[test]
    fn status_flip_moves_transition_time() {
        let mut c = Vec::new();
        set(
            &mut c,
            RolloutConditionType::Progressing,
            TRUE,
            RS_UPDATED,
            "m",
            t(10),
            false,
        );
        set(
            &mut c,
            RolloutConditionType::Progressing,
            FALSE,
            PROGRESS_DEADLINE_EXCEEDED,
            "x",
            t(30),
            false,
        );
        assert_eq!(c[0].last_transition_time, Some(Time(t(30))));
        assert_eq!(c[0].reason.as_deref(), Some(PROGRESS_DEADLINE_EXCEEDED));
        assert!(has_reason(
            &c,
            RolloutConditionType::Progressing,
            PROGRESS_DEADLINE_EXCEEDED
        ));
        remove(&mut c, RolloutConditionType::Progressing);
        assert!(c.is_empty());
    }
}
