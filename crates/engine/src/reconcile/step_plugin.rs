//! Canary `plugin` steps, as Argo runs them (1.8+):
//!
//! - At a plugin step the plugin's `Run` is called with the step's `config` and the status it
//!   kept; Running is asked again after its back-off (what it asked for when over 10 s, else
//!   30 s), an error after 30 s; Successful completes the step; Failed aborts the update with
//!   `Step Plugin <n> (<name>) failed: <message>`. A plugin disabled in `argo-rollouts-config`
//!   is not called and its step completes.
//! - On abort, every step whose `Run` is Running or Successful gets one `Abort`, newest first;
//!   on a full promotion the last `Run` still Running gets one `Terminate`.
//! - Each answer is kept in `status.canary.stepPluginStatuses` (one entry per step and
//!   operation) and a change of phase is told with a `StepPluginTransition` event. A new pod
//!   template or step list starts them over, and so does a retry after an abort.
//!
//! The engine only asks for calls ([`Plan::step_plugin_calls`]); the controller makes them and
//! lets the engine decide again with the answers.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::rollout::{
    PluginStep, RolloutStatus, StepPluginOperation as Op, StepPluginPhase as Phase,
    StepPluginStatus,
};

use super::analysis::AnalysisState;
use super::world::World;
use crate::plan::{Event, Plan, set_requeue};
use crate::step_plugins::{self, REQUEUE_SLACK, StepPluginAnswer, StepPluginCall, backoff};
use crate::{Wait, steps};

impl World<'_> {
    /// Records the answers of this reconcile's plugin calls; a `Run` of the current step that
    /// answered Failed aborts the update.
    pub(super) fn record_step_plugin_answers(
        &self,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        state: &mut AnalysisState,
    ) {
        if self.step_plugin_answers.is_empty() {
            return;
        }
        let index = status.current_step_index.unwrap_or(0);
        let entries = status
            .canary
            .get_or_insert_with(Default::default)
            .step_plugin_statuses
            .get_or_insert_with(Vec::new);
        let mut failed = None;
        for answer in self.step_plugin_answers {
            events.extend(record(entries, answer, self.now));
            let call = &answer.call;
            if call.operation == Op::Run && call.index == index && answer.phase == Phase::Failed {
                failed = Some(format!(
                    "Step Plugin {} ({}) failed: {}",
                    index + 1,
                    call.name,
                    answer.message
                ));
            }
        }
        if let Some(why) = failed
            && status.abort != Some(true)
        {
            status.abort = Some(true);
            state.abort_message = Some(why);
        }
    }

    /// The current step, a plugin step: whether it is complete; else the call it needs now,
    /// or when to look again.
    pub(super) fn plugin_step(
        &self,
        step: &PluginStep,
        index: i32,
        status: &RolloutStatus,
        plan: &mut Plan,
    ) -> bool {
        let name = step.name.clone().unwrap_or_default();
        let entry = step_plugins::entry(entries(status), index, Op::Run);
        if entry.is_some_and(|e| e.disabled == Some(true) || e.phase == Some(Phase::Successful)) {
            return true;
        }
        // After a failure the update was aborted; a retry runs the step again.
        let next = entry
            .filter(|e| e.phase != Some(Phase::Failed))
            .and_then(step_plugins::due_at);
        let answered = self
            .step_plugin_answers
            .iter()
            .any(|a| a.call.index == index && a.call.operation == Op::Run);
        match next {
            Some(at) if at > self.now || answered => {
                let slack = if entry.and_then(|e| e.phase.as_ref()) == Some(&Phase::Running) {
                    REQUEUE_SLACK
                } else {
                    Duration::ZERO
                };
                let wait = Duration::try_from(at.duration_since(self.now)).unwrap_or_default();
                set_requeue(&mut plan.requeue_after, wait + slack);
            }
            _ => plan.step_plugin_calls.push(StepPluginCall {
                index,
                name: name.clone(),
                operation: Op::Run,
                config: step.config.clone().unwrap_or(serde_json::Value::Null),
                status: entry.and_then(|e| e.status.clone()),
            }),
        }
        plan.waits.push(Wait::StepPlugin {
            step: index,
            name,
            phase: entry
                .and_then(|e| e.phase.as_ref())
                .map(|p| p.as_str().to_owned()),
            message: entry.and_then(|e| e.message.clone()),
            next,
        });
        false
    }

    /// After a retry (no longer aborted, with the abort's calls recorded), the steps run again
    /// from the start with fresh statuses, as Argo clears them.
    pub(super) fn clear_step_plugins_after_retry(&self, status: &mut RolloutStatus, aborted: bool) {
        let retried = !aborted
            && entries(status)
                .iter()
                .any(|e| e.operation == Some(Op::Abort));
        if retried && let Some(canary) = status.canary.as_mut() {
            canary.step_plugin_statuses = None;
        }
    }

    /// The calls an update's end owes the plugins: `Abort` for every step whose `Run` is
    /// Running or Successful (newest first) when aborted; `Terminate` for the last `Run` still
    /// Running when fully promoted. Each is made once.
    pub(super) fn wind_down_step_plugins(
        &self,
        status: &RolloutStatus,
        aborted: bool,
        promoted: bool,
        plan: &mut Plan,
    ) {
        let entries = entries(status);
        let runs = entries
            .iter()
            .filter(|e| e.operation == Some(Op::Run))
            .filter_map(|e| Some((e.index?, e)));
        let mut owed: Vec<(i32, &StepPluginStatus, Op)> = if aborted {
            runs.filter(|(_, e)| matches!(e.phase, Some(Phase::Running | Phase::Successful)))
                .map(|(i, e)| (i, e, Op::Abort))
                .collect()
        } else if promoted {
            runs.filter(|(_, e)| e.phase == Some(Phase::Running))
                .max_by_key(|(i, _)| *i)
                .map(|(i, e)| (i, e, Op::Terminate))
                .into_iter()
                .collect()
        } else {
            return;
        };
        owed.sort_by_key(|(i, _, _)| std::cmp::Reverse(*i));
        for (index, run, operation) in owed {
            if step_plugins::entry(entries, index, operation.clone()).is_some() {
                continue;
            }
            let config = steps::current_step(self.spec.canary(), index)
                .and_then(|s| s.plugin.as_ref())
                .and_then(|p| p.config.clone())
                .unwrap_or(serde_json::Value::Null);
            plan.step_plugin_calls.push(StepPluginCall {
                index,
                name: run.name.clone().unwrap_or_default(),
                operation,
                config,
                status: run.status.clone(),
            });
        }
    }
}

/// Records `answer` in `entries` at `now`; returns Argo's `StepPluginTransition` event when the
/// phase changed (none for a Run that succeeded: the step's completion says so).
pub fn record(
    entries: &mut Vec<StepPluginStatus>,
    answer: &StepPluginAnswer,
    now: Timestamp,
) -> Option<Event> {
    let call = &answer.call;
    let at = Time(sluice_api::time::whole_seconds(now));
    let position = entries
        .iter()
        .position(|e| e.index == Some(call.index) && e.operation.as_ref() == Some(&call.operation));
    let entry = match position {
        Some(i) => &mut entries[i],
        None => {
            entries.push(StepPluginStatus {
                index: Some(call.index),
                name: Some(call.name.clone()),
                operation: Some(call.operation.clone()),
                started_at: Some(at.clone()),
                executions: Some(0),
                ..StepPluginStatus::default()
            });
            let last = entries.len() - 1;
            &mut entries[last]
        }
    };
    let before = entry.phase.clone();
    entry.executions = Some(entry.executions.unwrap_or(0) + 1);
    entry.phase = Some(answer.phase.clone());
    entry.message = (!answer.message.is_empty()).then(|| answer.message.clone());
    entry.updated_at = Some(at.clone());
    entry.backoff = backoff(answer)
        .map(|d| sluice_api::format_go_duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)));
    if answer.phase != Phase::Error {
        entry.status = answer.status.clone();
    }
    if matches!(answer.phase, Phase::Successful | Phase::Failed) {
        entry.finished_at = Some(at);
    }
    if answer.disabled {
        entry.disabled = Some(true);
    }
    if before.as_ref() == Some(&answer.phase) {
        return None;
    }
    let phase = answer.phase.as_str();
    let message = match call.operation {
        Op::Run if answer.phase == Phase::Successful => return None,
        Op::Run => format!(
            "Step plugin {} (step {}) transitioned to {phase}",
            call.name, call.index
        ),
        Op::Abort | Op::Other(_) => {
            format!(
                "Step plugin {} (step {}) aborted ({phase})",
                call.name, call.index
            )
        }
        Op::Terminate => format!(
            "Step plugin {} (step {}) terminated ({phase})",
            call.name, call.index
        ),
    };
    Some(if matches!(answer.phase, Phase::Failed | Phase::Error) {
        Event::warning("StepPluginTransition", message)
    } else {
        Event::normal("StepPluginTransition", message)
    })
}

fn entries(status: &RolloutStatus) -> &[StepPluginStatus] {
    status
        .canary
        .as_ref()
        .and_then(|c| c.step_plugin_statuses.as_deref())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
