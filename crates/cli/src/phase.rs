//! The phase a user is shown. The controller writes phase and message into the status, but a
//! client must not trust them while the controller has not yet seen the latest spec: a
//! `status` right after `set image` would otherwise report the old Healthy.

use sluice_api::rollout::{Rollout, RolloutPhase, RolloutStatus};

/// Annotation holding the generation of the workloadRef target the Rollout last copied.
const WORKLOAD_GENERATION: &str = "rollout.argoproj.io/workload-generation";

const SPEC_NOT_OBSERVED: &str = "waiting for rollout spec update to be observed";
const UNPAUSING: &str = "waiting for rollout to unpause";

/// Phase and message of a Rollout as seen from outside the controller.
pub fn rollout_phase(rollout: &Rollout) -> (RolloutPhase, String) {
    let default_status = RolloutStatus::default();
    let status = rollout.status.as_ref().unwrap_or(&default_status);
    if status.observed_generation() != rollout.metadata.generation {
        return (RolloutPhase::Progressing, SPEC_NOT_OBSERVED.into());
    }
    if rollout.spec.workload_ref.is_some() {
        let wanted = rollout
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(WORKLOAD_GENERATION));
        if status.workload_observed_generation.as_ref() != wanted {
            return (RolloutPhase::Progressing, SPEC_NOT_OBSERVED.into());
        }
    }
    let paused_by_controller = status.controller_pause.unwrap_or(false);
    let has_pause_conditions = status
        .pause_conditions
        .as_ref()
        .is_some_and(|p| !p.is_empty());
    if paused_by_controller && !has_pause_conditions {
        return (RolloutPhase::Progressing, UNPAUSING.into());
    }
    match &status.phase {
        Some(phase) if !phase.as_str().is_empty() => {
            (phase.clone(), status.message.clone().unwrap_or_default())
        }
        // Older controllers left the phase to clients.
        _ => sluice_engine::phase::calculate(rollout, status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(value: serde_json::Value) -> Rollout {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn unobserved_spec_is_progressing_whatever_the_status_says() {
        let ro = rollout(json!({
            "metadata": {"name": "demo", "generation": 3},
            "spec": {"strategy": {"canary": {}}},
            "status": {"observedGeneration": "2", "phase": "Healthy"}
        }));
        assert_eq!(
            rollout_phase(&ro),
            (
                RolloutPhase::Progressing,
                "waiting for rollout spec update to be observed".into()
            )
        );
        let fresh = rollout(json!({"metadata": {"name": "demo", "generation": 1}, "spec": {}}));
        assert_eq!(rollout_phase(&fresh).0, RolloutPhase::Progressing);
    }

    #[test]
    fn controller_pause_without_conditions_is_unpausing() {
        let ro = rollout(json!({
            "metadata": {"name": "demo", "generation": 2},
            "spec": {"strategy": {"canary": {}}},
            "status": {"observedGeneration": "2", "controllerPause": true, "phase": "Paused", "message": "CanaryPauseStep"}
        }));
        assert_eq!(
            rollout_phase(&ro),
            (
                RolloutPhase::Progressing,
                "waiting for rollout to unpause".into()
            )
        );
    }

    #[test]
    fn controller_phase_is_shown_once_observed() {
        let ro = rollout(json!({
            "metadata": {"name": "demo", "generation": 2},
            "spec": {"strategy": {"canary": {}}},
            "status": {"observedGeneration": "2", "phase": "Degraded", "message": "RolloutAborted: aborted"}
        }));
        assert_eq!(
            rollout_phase(&ro),
            (RolloutPhase::Degraded, "RolloutAborted: aborted".into())
        );
    }

    #[test]
    fn missing_phase_is_computed() {
        let ro = rollout(json!({
            "metadata": {"name": "demo", "generation": 1},
            "spec": {"replicas": 2, "paused": true, "strategy": {"canary": {}}},
            "status": {"observedGeneration": "1"}
        }));
        assert_eq!(
            rollout_phase(&ro),
            (RolloutPhase::Paused, "manually paused".into())
        );
    }

    #[test]
    fn workload_ref_generation_must_match() {
        let ro = rollout(json!({
            "metadata": {"name": "demo", "generation": 1,
                         "annotations": {"rollout.argoproj.io/workload-generation": "4"}},
            "spec": {"workloadRef": {"kind": "Deployment", "name": "web"}, "strategy": {"canary": {}}},
            "status": {"observedGeneration": "1", "workloadObservedGeneration": "3", "phase": "Healthy"}
        }));
        assert_eq!(
            rollout_phase(&ro).1,
            "waiting for rollout spec update to be observed"
        );
    }
}
