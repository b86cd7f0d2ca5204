//! The canary step machine's read side: which step we are on, what weight it asks for, and
//! the hash that tells whether the step list changed under a running rollout.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::rollout::{CanaryStep, CanaryStepAction, CanaryStrategy};

/// `status.currentStepHash`: hash of the step list as JSON. Our step types serialize their
/// fields in Argo's declaration order, so the bytes match for the same steps.
pub fn step_hash(canary: &CanaryStrategy) -> String {
    let json = match &canary.steps {
        Some(steps) => serde_json::to_string(steps).unwrap_or_default(),
        None => "null".to_string(),
    };
    sluice_api::pod_template_hash::hash_go_ordered_json(&json)
}

pub fn steps(canary: &CanaryStrategy) -> &[CanaryStep] {
    canary.steps.as_deref().unwrap_or_default()
}

/// The step at `index`, if the rollout has not gone past the last one.
pub fn current_step(canary: &CanaryStrategy, index: i32) -> Option<&CanaryStep> {
    usize::try_from(index)
        .ok()
        .and_then(|i| steps(canary).get(i))
}

/// The canary weight in force at step `index`: the last `setWeight` at or before it; 100 once
/// past the last step; 0 before any `setWeight`.
pub fn weight_at(canary: &CanaryStrategy, index: i32) -> i32 {
    let all = steps(canary);
    let index = usize::try_from(index).unwrap_or(0);
    if index >= all.len() {
        return 100;
    }
    all[..=index]
        .iter()
        .rev()
        .find_map(|s| s.set_weight)
        .unwrap_or(0)
        .clamp(0, 100)
}

/// The last `setWeight` at or before step `index` of `steps` (0 if none): the weight a routed
/// canary's router is given there.
pub fn set_weight_at(steps: &[CanaryStep], index: i32) -> i32 {
    let end = usize::try_from(index.saturating_add(1))
        .unwrap_or(0)
        .min(steps.len());
    steps[..end]
        .iter()
        .rev()
        .find_map(|s| s.set_weight)
        .unwrap_or(0)
}

/// The name of a step's kind, as in the spec.
pub fn step_kind(action: &CanaryStepAction<'_>) -> &'static str {
    match action {
        CanaryStepAction::SetWeight(_) => "setWeight",
        CanaryStepAction::Pause(_) => "pause",
        CanaryStepAction::Experiment(_) => "experiment",
        CanaryStepAction::Analysis(_) => "analysis",
        CanaryStepAction::SetCanaryScale(_) => "setCanaryScale",
        CanaryStepAction::SetHeaderRoute(_) => "setHeaderRoute",
        CanaryStepAction::SetMirrorRoute(_) => "setMirrorRoute",
        CanaryStepAction::Plugin(_) => "plugin",
    }
}

/// Human description of a step for `RolloutStepCompleted` events.
pub fn describe(action: Option<CanaryStepAction<'_>>) -> String {
    match action {
        Some(CanaryStepAction::SetWeight(w)) => format!("setWeight: {w}"),
        Some(CanaryStepAction::Pause(p)) => match &p.duration {
            Some(d) => format!(
                "pause: {}",
                match d {
                    IntOrString::Int(i) => i.to_string(),
                    IntOrString::String(s) => s.clone(),
                }
            ),
            None => "pause".into(),
        },
        Some(other) => step_kind(&other).into(),
        None => "empty".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::rollout::RolloutPause;

    fn canary(steps: Vec<CanaryStep>) -> CanaryStrategy {
        CanaryStrategy {
            steps: Some(steps),
            ..Default::default()
        }
    }

    fn weight(w: i32) -> CanaryStep {
        CanaryStep {
            set_weight: Some(w),
            ..Default::default()
        }
    }

    fn pause() -> CanaryStep {
        CanaryStep {
            pause: Some(RolloutPause::default()),
            ..Default::default()
        }
    }

    #[test]
    fn weight_follows_last_set_weight() {
        let c = canary(vec![pause(), weight(20), pause(), weight(40), pause()]);
        assert_eq!(weight_at(&c, 0), 0);
        assert_eq!(weight_at(&c, 1), 20);
        assert_eq!(weight_at(&c, 2), 20);
        assert_eq!(weight_at(&c, 4), 40);
        assert_eq!(weight_at(&c, 5), 100);
        assert_eq!(weight_at(&canary(vec![]), 0), 100);
    }

    #[test]
    fn step_hash_changes_with_steps_and_is_stable() {
        let a = canary(vec![weight(20), pause()]);
        let b = canary(vec![weight(30), pause()]);
        assert_eq!(step_hash(&a), step_hash(&a.clone()));
        assert_ne!(step_hash(&a), step_hash(&b));
        assert!(
            step_hash(&a)
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
        );
    }
}
