//! `promote`: leave the current pause, move a canary to its next step, or (`--full`) skip all
//! remaining steps. The patches are the ones `kubectl argo rollouts promote` writes.

use anyhow::bail;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::common::AnalysisPhase;

use super::{emit, get_rollout, merge_patch, rollouts, try_patch_status};
use crate::cli::PromoteArgs;
use crate::kube_target::Target;

/// How far to promote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// Leave the current pause, or move past the current step.
    Next,
    /// Skip all remaining steps and analysis.
    Full,
    /// Deprecated: skip the current canary step.
    SkipCurrentStep,
    /// Deprecated: jump to the end of the canary steps.
    SkipAllSteps,
}

/// The merge patches of one promotion: for the object, for the status subresource, and both
/// in one for a CRD without the status subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct PromotePatches {
    pub spec: Option<Value>,
    pub status: Option<Value>,
    pub unified: Value,
}

pub async fn run(target: &Target, args: &PromoteArgs) -> anyhow::Result<()> {
    let promotion = if args.full {
        Promotion::Full
    } else if args.skip_current_step {
        Promotion::SkipCurrentStep
    } else if args.skip_all_steps {
        Promotion::SkipAllSteps
    } else {
        Promotion::Next
    };
    apply(target, &args.name, promotion).await?;
    let how = if promotion == Promotion::Full {
        "fully promoted"
    } else {
        "promoted"
    };
    emit(&format!("rollout '{}' {how}\n", args.name))
}

/// Promotes rollout `name` as requested. Shared by the command and the dashboard.
pub async fn apply(target: &Target, name: &str, promotion: Promotion) -> anyhow::Result<()> {
    let api = rollouts(target);
    let rollout = get_rollout(&api, name).await?;
    let mut patches = promote_patches(&rollout, promotion)?;
    if let Some(status) = &patches.status
        && try_patch_status(&api, name, status).await?.is_none()
    {
        // No status subresource: spec and status go in one patch of the object.
        patches.spec = Some(patches.unified);
    }
    if let Some(spec) = &patches.spec {
        merge_patch(&api, name, spec).await?;
    }
    Ok(())
}

/// The patches that promote `rollout` as requested.
pub fn promote_patches(rollout: &Rollout, promotion: Promotion) -> anyhow::Result<PromotePatches> {
    let steps = rollout.steps().len();
    let status = rollout.status.clone().unwrap_or_default();
    // The canary step index after this one, never past the end; None without steps.
    let next_step = || {
        (rollout.canary().is_some() && steps > 0).then(|| {
            let current = status.current_step_index.unwrap_or(0).max(0);
            let last = i32::try_from(steps).unwrap_or(i32::MAX);
            if current < last { current + 1 } else { current }
        })
    };
    let skipping = matches!(
        promotion,
        Promotion::SkipCurrentStep | Promotion::SkipAllSteps
    );
    if skipping && rollout.blue_green().is_some() {
        bail!("a blue-green rollout has no steps to skip: promote it without --skip-* flags");
    }
    if skipping && steps == 0 {
        bail!("the rollout has no steps to skip: promote it without --skip-* flags");
    }
    let unpause = json!({"spec": {"paused": false}});
    let with_status = |status: Value| {
        let mut unified = json!({"spec": {"paused": false}, "status": {}});
        unified["status"] = status["status"].clone();
        unified
    };

    Ok(match promotion {
        Promotion::SkipCurrentStep | Promotion::SkipAllSteps => {
            let index = if promotion == Promotion::SkipAllSteps {
                i32::try_from(steps).unwrap_or(i32::MAX)
            } else {
                next_step().unwrap_or(0)
            };
            let status = json!({"status": {"pauseConditions": null, "currentStepIndex": index}});
            PromotePatches {
                spec: None,
                unified: with_status(status.clone()),
                status: Some(status),
            }
        }
        Promotion::Full => {
            let status = json!({"status": {"promoteFull": true}});
            PromotePatches {
                spec: Some(unpause),
                unified: with_status(status.clone()),
                status: Some(status),
            }
        }
        Promotion::Next => {
            let has_pause_conditions = status
                .pause_conditions
                .as_ref()
                .is_some_and(|p| !p.is_empty());
            let inconclusive_step = rollout.canary().is_some()
                && status
                    .canary
                    .as_ref()
                    .and_then(|c| c.current_step_analysis_run_status.as_ref())
                    .and_then(|a| a.status.as_ref())
                    == Some(&AnalysisPhase::Inconclusive);
            let status_patch = if inconclusive_step
                && has_pause_conditions
                && status.controller_pause.unwrap_or(false)
            {
                // An inconclusive step analysis is judged by the user: promoting accepts it
                // and moves on, or the rollout would stay on the analysis step.
                next_step().map(|index| {
                    json!({"status": {"pauseConditions": null, "controllerPause": false, "currentStepIndex": index}})
                })
            } else if has_pause_conditions {
                Some(json!({"status": {"pauseConditions": null}}))
            } else {
                // Not paused by the controller: the user skips a running analysis or
                // experiment step. Clearing pauses and moving on are never both done.
                next_step().map(|index| json!({"status": {"currentStepIndex": index}}))
            };
            PromotePatches {
                spec: rollout.spec.is_paused().then_some(unpause),
                status: status_patch,
                unified: json!({"spec": {"paused": false}, "status": {"pauseConditions": null}}),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canary(status: Value, paused: bool) -> Rollout {
        serde_json::from_value(json!({
            "metadata": {"name": "demo"},
            "spec": {
                "paused": paused,
                "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"analysis": {}}, {"setWeight": 80}]}}
            },
            "status": status
        }))
        .unwrap()
    }

    fn patches(
        rollout: &Rollout,
        promotion: Promotion,
    ) -> (Option<String>, Option<String>, String) {
        let p = promote_patches(rollout, promotion).unwrap();
        (
            p.spec.map(|v| v.to_string()),
            p.status.map(|v| v.to_string()),
            p.unified.to_string(),
        )
    }

    #[test]
    fn pause_step_clears_pause_conditions_only() {
        let ro = canary(
            json!({"currentStepIndex": 1, "controllerPause": true,
                   "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2024-05-01T12:00:00Z"}]}),
            false,
        );
        assert_eq!(
            patches(&ro, Promotion::Next),
            (
                None,
                Some(r#"{"status":{"pauseConditions":null}}"#.into()),
                r#"{"spec":{"paused":false},"status":{"pauseConditions":null}}"#.into()
            )
        );
    }

    #[test]
    fn running_step_moves_to_the_next_index() {
        let ro = canary(json!({"currentStepIndex": 2}), false);
        assert_eq!(
            patches(&ro, Promotion::Next).1.as_deref(),
            Some(r#"{"status":{"currentStepIndex":3}}"#)
        );
    }

    #[test]
    fn missing_index_counts_as_step_zero() {
        let ro = canary(json!({}), false);
        assert_eq!(
            patches(&ro, Promotion::Next).1.as_deref(),
            Some(r#"{"status":{"currentStepIndex":1}}"#)
        );
    }

    #[test]
    fn index_never_goes_past_the_steps() {
        let ro = canary(json!({"currentStepIndex": 4}), false);
        assert_eq!(
            patches(&ro, Promotion::Next).1.as_deref(),
            Some(r#"{"status":{"currentStepIndex":4}}"#)
        );
    }

    #[test]
    fn manual_pause_is_lifted_by_a_spec_patch() {
        let ro = canary(json!({"currentStepIndex": 1}), true);
        let (spec, status, _) = patches(&ro, Promotion::Next);
        assert_eq!(spec.as_deref(), Some(r#"{"spec":{"paused":false}}"#));
        assert_eq!(
            status.as_deref(),
            Some(r#"{"status":{"currentStepIndex":2}}"#)
        );
    }

    #[test]
    fn inconclusive_analysis_is_accepted_and_passed() {
        let ro = canary(
            json!({"currentStepIndex": 2, "controllerPause": true,
                   "pauseConditions": [{"reason": "InconclusiveAnalysisRun", "startTime": "2024-05-01T12:00:00Z"}],
                   "canary": {"currentStepAnalysisRunStatus": {"name": "ar", "status": "Inconclusive"}}}),
            false,
        );
        assert_eq!(
            patches(&ro, Promotion::Next).1.as_deref(),
            Some(
                r#"{"status":{"pauseConditions":null,"controllerPause":false,"currentStepIndex":3}}"#
            )
        );
    }

    #[test]
    fn full_promotion_unpauses_and_sets_promote_full() {
        let ro = canary(json!({"currentStepIndex": 1}), false);
        assert_eq!(
            patches(&ro, Promotion::Full),
            (
                Some(r#"{"spec":{"paused":false}}"#.into()),
                Some(r#"{"status":{"promoteFull":true}}"#.into()),
                r#"{"spec":{"paused":false},"status":{"promoteFull":true}}"#.into()
            )
        );
    }

    #[test]
    fn blue_green_promotion_clears_its_pause() {
        let ro: Rollout = serde_json::from_value(json!({
            "metadata": {"name": "bg"},
            "spec": {"strategy": {"blueGreen": {"activeService": "a", "autoPromotionEnabled": false}}},
            "status": {"controllerPause": true,
                       "pauseConditions": [{"reason": "BlueGreenPause", "startTime": "2024-05-01T12:00:00Z"}]}
        }))
        .unwrap();
        assert_eq!(
            patches(&ro, Promotion::Next).1.as_deref(),
            Some(r#"{"status":{"pauseConditions":null}}"#)
        );
        // Without a pause there is nothing to do for a blue-green rollout.
        let mut idle = ro.clone();
        idle.status = None;
        assert_eq!(
            patches(&idle, Promotion::Next),
            (
                None,
                None,
                r#"{"spec":{"paused":false},"status":{"pauseConditions":null}}"#.into()
            )
        );
        assert!(promote_patches(&ro, Promotion::SkipCurrentStep).is_err());
    }

    #[test]
    fn deprecated_skip_flags() {
        let ro = canary(json!({"currentStepIndex": 1}), false);
        assert_eq!(
            patches(&ro, Promotion::SkipCurrentStep).1.as_deref(),
            Some(r#"{"status":{"pauseConditions":null,"currentStepIndex":2}}"#)
        );
        assert_eq!(
            patches(&ro, Promotion::SkipAllSteps).1.as_deref(),
            Some(r#"{"status":{"pauseConditions":null,"currentStepIndex":4}}"#)
        );
        let stepless: Rollout = serde_json::from_value(
            json!({"metadata": {"name": "c"}, "spec": {"strategy": {"canary": {}}}}),
        )
        .unwrap();
        assert!(promote_patches(&stepless, Promotion::SkipAllSteps).is_err());
        assert_eq!(patches(&stepless, Promotion::Next).1, None);
    }
}
