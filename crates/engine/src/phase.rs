//! The Rollout phase and message, computed from status and spec by Argo's ordered rules (the
//! first rule that matches wins). Argo CD's health check and dashboards read these strings.

use sluice_api::rollout::{Rollout, RolloutConditionType, RolloutPhase, RolloutStatus};

use crate::conditions::{self, PROGRESS_DEADLINE_EXCEEDED, ROLLOUT_ABORTED};

/// Phase and message for a Rollout whose status is `status`.
pub fn calculate(rollout: &Rollout, status: &RolloutStatus) -> (RolloutPhase, String) {
    let conds = status.conditions.as_deref().unwrap_or_default();
    if let Some(c) = conditions::find(conds, RolloutConditionType::InvalidSpec)
        && c.status
            .as_ref()
            .is_some_and(|s| s.as_str() == conditions::TRUE)
    {
        return (
            RolloutPhase::Degraded,
            format!("InvalidSpec: {}", c.message.as_deref().unwrap_or_default()),
        );
    }
    for c in conds {
        let reason = c.reason.as_deref().unwrap_or_default();
        if reason == ROLLOUT_ABORTED || reason == PROGRESS_DEADLINE_EXCEEDED {
            return (
                RolloutPhase::Degraded,
                format!("{reason}: {}", c.message.as_deref().unwrap_or_default()),
            );
        }
    }
    let spec = &rollout.spec;
    if spec.paused == Some(true) {
        return (RolloutPhase::Paused, "manually paused".into());
    }
    if let Some(first) = status.pause_conditions.as_ref().and_then(|p| p.first()) {
        let reason = first
            .reason
            .as_ref()
            .map(|r| r.as_str().to_string())
            .unwrap_or_default();
        return (RolloutPhase::Paused, reason);
    }
    if let Some(restart_at) = &spec.restart_at
        && status.restarted_at.as_ref() != Some(restart_at)
    {
        return (RolloutPhase::Progressing, "rollout is restarting".into());
    }
    let replicas = spec
        .replicas
        .unwrap_or(sluice_api::rollout::DEFAULT_REPLICAS);
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    let current = status.replicas.unwrap_or(0);
    if updated < replicas {
        return (
            RolloutPhase::Progressing,
            "more replicas need to be updated".into(),
        );
    }
    if available < updated {
        return (
            RolloutPhase::Progressing,
            "updated replicas are still becoming available".into(),
        );
    }
    let current_hash = status.current_pod_hash.as_deref().unwrap_or_default();
    let strategy = spec.strategy.as_ref();
    if strategy.and_then(|s| s.blue_green.as_ref()).is_some() {
        let active = status
            .blue_green
            .as_ref()
            .and_then(|b| b.active_selector.as_deref())
            .unwrap_or_default();
        if active.is_empty() || active != current_hash {
            return (
                RolloutPhase::Progressing,
                "active service cutover pending".into(),
            );
        }
        if status.stable_rs.as_deref() != Some(current_hash) {
            return (
                RolloutPhase::Progressing,
                "waiting for post-promotion verification to complete".into(),
            );
        }
    } else if let Some(canary) = strategy.and_then(|s| s.canary.as_ref()) {
        if canary.traffic_routing.is_none() && current > updated {
            return (
                RolloutPhase::Progressing,
                "old replicas are pending termination".into(),
            );
        }
        if status.stable_rs.as_deref() != Some(current_hash) {
            return (
                RolloutPhase::Progressing,
                "waiting for all steps to complete".into(),
            );
        }
    }
    (RolloutPhase::Healthy, String::new())
}
