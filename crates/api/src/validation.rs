//! Static checks of user-written specs, the ones Argo's controller and its lint command make
//! before acting on an object. Each problem is one message naming the offending field path,
//! so it can be shown to the user as is (in a condition, an event or the CLI).
//!
//! The checks never fail themselves: any input, however malformed, gives a list of problems.

mod analysis;
mod blue_green;
mod canary;
mod int_or_percent;
mod rollout;
mod selector;
mod steps;
mod traffic;

use std::fmt::Display;

use crate::rollout::AntiAffinity;
use crate::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate, Rollout};

/// Problems with a Rollout's spec, each a message a user can act on. Empty means valid.
pub fn validate_rollout(rollout: &Rollout) -> Vec<String> {
    let mut problems = Problems::default();
    rollout::check_spec(&rollout.spec, &mut problems);
    problems.into_messages()
}

/// Problems with an AnalysisTemplate's spec. Argument placeholders (`{{args.x}}`) are
/// accepted wherever a value is only known once a run is created.
pub fn validate_analysis_template(template: &AnalysisTemplate) -> Vec<String> {
    let mut problems = Problems::default();
    analysis::check_template_spec(&template.spec, &mut problems);
    problems.into_messages()
}

/// Problems with a ClusterAnalysisTemplate's spec (the same rules as an AnalysisTemplate).
pub fn validate_cluster_analysis_template(template: &ClusterAnalysisTemplate) -> Vec<String> {
    let mut problems = Problems::default();
    analysis::check_template_spec(&template.spec, &mut problems);
    problems.into_messages()
}

/// Problems with an AnalysisRun's spec.
pub fn validate_analysis_run(run: &AnalysisRun) -> Vec<String> {
    let mut problems = Problems::default();
    analysis::check_run_spec(&run.spec, &mut problems);
    problems.into_messages()
}

/// Collects problems as `<field path>: <message>` lines.
#[derive(Debug, Default)]
struct Problems {
    messages: Vec<String>,
}

impl Problems {
    fn add(&mut self, path: &str, message: impl Display) {
        self.messages.push(format!("{path}: {message}"));
    }

    fn into_messages(self) -> Vec<String> {
        self.messages
    }
}

/// `antiAffinity` of either strategy: exactly one kind, a soft one weighted 1 to 100.
fn check_anti_affinity(anti_affinity: &AntiAffinity, at: &str, problems: &mut Problems) {
    let preferred = &anti_affinity.preferred_during_scheduling_ignored_during_execution;
    let required = &anti_affinity.required_during_scheduling_ignored_during_execution;
    if preferred.is_some() == required.is_some() {
        problems.add(
            at,
            "must set exactly one of preferredDuringSchedulingIgnoredDuringExecution or requiredDuringSchedulingIgnoredDuringExecution",
        );
    }
    if let Some(preferred) = preferred {
        let at = format!("{at}.preferredDuringSchedulingIgnoredDuringExecution.weight");
        match preferred.weight {
            None => problems.add(&at, "required"),
            Some(weight) if !(1..=100).contains(&weight) => {
                problems.add(&at, format!("must be between 1 and 100, got {weight}"))
            }
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod tests;
