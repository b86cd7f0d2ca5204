//! Canary `plugin` steps (Argo 1.8+) as data: the calls the engine asks the controller to make
//! of a step plugin ([`StepPluginCall`], in [`crate::Plan::step_plugin_calls`]) and the answers
//! the controller brings back ([`StepPluginAnswer`], in [`crate::Observed::step_plugin_answers`]),
//! which the engine records in `status.canary.stepPluginStatuses` as Argo does: one entry per
//! step index and operation, with its executions, times, back-off and the plugin's own status.
//!
//! A call is an observation like any other: the controller makes the calls of a plan, then lets
//! the engine decide again with their answers, and applies that second plan. The engine's
//! reconcile records the answers (`reconcile/step_plugin.rs`).

use std::time::Duration;

use jiff::Timestamp;
use sluice_api::rollout::{StepPluginOperation, StepPluginPhase, StepPluginStatus};

/// How long a Running plugin is left alone when it asks for 10 s or less (or nothing).
pub const RUNNING_BACKOFF: Duration = Duration::from_secs(30);
/// How long before a plugin call that failed (the plugin's error, or no answer) is made again.
pub const ERROR_BACKOFF: Duration = Duration::from_secs(30);
/// Added to a Running plugin's back-off before the Rollout is looked at again, as Argo does.
pub const REQUEUE_SLACK: Duration = Duration::from_secs(5);

/// A call of a step plugin's `Run`, `Terminate` or `Abort`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPluginCall {
    /// The step's index.
    pub index: i32,
    /// The plugin's name (`<namespace>/<name>` in `argo-rollouts-config`).
    pub name: String,
    pub operation: StepPluginOperation,
    /// The step's `config`, as written.
    pub config: serde_json::Value,
    /// What the plugin kept from its last answer for this step (its `status`).
    pub status: Option<serde_json::Value>,
}

/// What a call of a step plugin answered.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPluginAnswer {
    pub call: StepPluginCall,
    /// `Error` also for a call that got no answer (a plugin not configured, not running, past
    /// its deadline); `message` says why.
    pub phase: StepPluginPhase,
    pub message: String,
    /// How long the plugin asks to be left alone while Running.
    pub requeue_after: Option<Duration>,
    /// The plugin's own state, handed back to it on its next call.
    pub status: Option<serde_json::Value>,
    /// The plugin is disabled in `argo-rollouts-config`: it was not called, and its step is
    /// skipped.
    pub disabled: bool,
}

/// The back-off after an answer: Running waits what the plugin asked for when that is more
/// than 10 s, else 30 s; an error waits 30 s; a finished operation none.
pub fn backoff(answer: &StepPluginAnswer) -> Option<Duration> {
    match answer.phase {
        StepPluginPhase::Running => Some(
            answer
                .requeue_after
                .filter(|d| *d > Duration::from_secs(10))
                .unwrap_or(RUNNING_BACKOFF),
        ),
        StepPluginPhase::Successful | StepPluginPhase::Failed => None,
        // An error, or a phase no plugin should answer: tried again later.
        StepPluginPhase::Error | StepPluginPhase::Other(_) => Some(ERROR_BACKOFF),
    }
}

/// The entry of step `index` for `operation`.
pub fn entry(
    entries: &[StepPluginStatus],
    index: i32,
    operation: StepPluginOperation,
) -> Option<&StepPluginStatus> {
    entries
        .iter()
        .find(|e| e.index == Some(index) && e.operation.as_ref() == Some(&operation))
}

/// When the plugin of `entry` is to be called again: at once without a back-off, else when its
/// back-off since its last answer has passed.
pub fn due_at(entry: &StepPluginStatus) -> Option<Timestamp> {
    let updated = entry.updated_at.as_ref()?.0;
    let backoff = entry
        .backoff
        .as_deref()
        .and_then(|b| sluice_api::parse_go_duration(b).ok())
        .unwrap_or(Duration::ZERO);
    updated.checked_add(backoff).ok()
}

#[cfg(test)]
pub(crate) mod tests;
