//! The Experiment's phase from its templates and its analyses, `availableAt`, the
//! `Progressing` condition, and the phase-change event. A finished phase is never recomputed:
//! later passes only wind the templates down.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::common::{AnalysisPhase, ConditionStatus};
use sluice_api::experiment::{
    Experiment, ExperimentCondition, ExperimentConditionType, ExperimentSpec, ExperimentStatus,
    TemplateStatusCode,
};

use super::plan::transition_event;
use super::state::{duration_passed, required_analyses_successful};
use crate::plan::Event;

/// Condition reasons and messages (Argo's).
pub const EXPERIMENT_COMPLETED: &str = "ExperimentCompleted";
pub const REPLICA_SET_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_REPLICA_SET_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const INVALID_SPEC: &str = "InvalidSpec";
/// Message of a Successful analysis phase reached through the required analyses.
pub const REQUIRED_RUNS_COMPLETED: &str = "Required AnalysisRuns completed";

fn non_empty(s: Option<&str>) -> Option<String> {
    s.filter(|m| !m.is_empty()).map(str::to_owned)
}

/// The worst template status, as an Experiment phase, with that template's message. A
/// template without a status counts as Progressing.
pub(crate) fn assess_templates(
    spec: &ExperimentSpec,
    status: &ExperimentStatus,
) -> (AnalysisPhase, Option<String>) {
    fn rank(code: Option<&TemplateStatusCode>) -> u8 {
        match code {
            Some(TemplateStatusCode::Successful) => 0,
            Some(TemplateStatusCode::Running) => 1,
            Some(TemplateStatusCode::Error) => 3,
            Some(TemplateStatusCode::Failed) => 4,
            _ => 2,
        }
    }
    let mut worst = (0, None);
    for t in spec.templates.iter().flatten() {
        let ts = t.name.as_deref().and_then(|n| status.template_status(n));
        let r = rank(ts.and_then(|s| s.status.as_ref()));
        if r > worst.0 {
            worst = (r, non_empty(ts.and_then(|s| s.message.as_deref())));
        }
    }
    let phase = match worst.0 {
        0 => AnalysisPhase::Successful,
        1 => AnalysisPhase::Running,
        2 => AnalysisPhase::Pending,
        3 => AnalysisPhase::Error,
        _ => AnalysisPhase::Failed,
    };
    (phase, worst.1)
}

/// The worst AnalysisRun phase, with that run's message. A run not yet created counts as
/// Successful; Pending is reported as Running. When every required analysis succeeded and
/// nothing is worse, the message says so.
pub(crate) fn assess_analyses(
    spec: &ExperimentSpec,
    status: &ExperimentStatus,
) -> (AnalysisPhase, Option<String>) {
    fn rank(phase: Option<&AnalysisPhase>) -> u8 {
        match phase {
            Some(AnalysisPhase::Running) => 1,
            Some(AnalysisPhase::Pending) => 2,
            Some(AnalysisPhase::Inconclusive) => 3,
            Some(AnalysisPhase::Error) => 4,
            Some(AnalysisPhase::Failed) => 5,
            _ => 0,
        }
    }
    let mut worst: (u8, Option<&AnalysisPhase>, Option<String>) = (0, None, None);
    for a in spec.analyses.iter().flatten() {
        let run = status
            .analysis_runs
            .iter()
            .flatten()
            .find(|r| r.name == a.name);
        let phase = run.and_then(|r| r.phase.as_ref());
        let r = rank(phase);
        if r > worst.0 {
            worst = (r, phase, non_empty(run.and_then(|r| r.message.as_deref())));
        }
    }
    let phase = match worst.1 {
        None => AnalysisPhase::Successful,
        Some(AnalysisPhase::Pending) => AnalysisPhase::Running,
        Some(p) => p.clone(),
    };
    if phase == AnalysisPhase::Successful && required_analyses_successful(spec, status) {
        return (phase, Some(REQUIRED_RUNS_COMPLETED.to_owned()));
    }
    (phase, worst.2)
}

/// The phase from both assessments (rules 5 and 6 of the aggregation).
pub(crate) fn combine(
    spec: &ExperimentSpec,
    status: &ExperimentStatus,
    templates: (AnalysisPhase, Option<String>),
    analyses: (AnalysisPhase, Option<String>),
) -> (AnalysisPhase, Option<String>) {
    let has_required = spec
        .analyses
        .iter()
        .flatten()
        .any(|a| a.required_for_completion == Some(true));
    if templates.0.is_completed() {
        if templates.0 == AnalysisPhase::Successful && (analyses.0.is_completed() || has_required) {
            analyses
        } else {
            templates
        }
    } else if (analyses.0.is_completed() && analyses.0 != AnalysisPhase::Successful)
        || required_analyses_successful(spec, status)
    {
        analyses
    } else {
        templates
    }
}

/// Sets a condition as Argo does: unchanged when status and reason are the same (even if the
/// message differs); `lastTransitionTime` kept when only the reason changes; the condition
/// then moves to the end of the list.
pub(crate) fn set_condition(
    conditions: &mut Vec<ExperimentCondition>,
    type_: ExperimentConditionType,
    status: ConditionStatus,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let stamp = Some(Time(sluice_api::time::whole_seconds(now)));
    let current = conditions
        .iter()
        .position(|c| c.type_.as_ref() == Some(&type_));
    let mut transition = stamp.clone();
    if let Some(i) = current {
        let c = &conditions[i];
        if c.status.as_ref() == Some(&status) {
            if c.reason.as_deref() == Some(reason) {
                return;
            }
            transition = c.last_transition_time.clone();
        }
        conditions.remove(i);
    }
    conditions.push(ExperimentCondition {
        type_: Some(type_),
        status: Some(status),
        last_update_time: stamp,
        last_transition_time: transition,
        reason: Some(reason.to_owned()),
        message: Some(message),
    });
}

/// Records the spec problem: the `InvalidSpec` condition, replaced when the problem changes.
pub(crate) fn set_invalid_spec(status: &mut ExperimentStatus, message: String, now: Timestamp) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let same = conditions.iter().any(|c| {
        c.type_ == Some(ExperimentConditionType::InvalidSpec)
            && c.message.as_deref() == Some(message.as_str())
    });
    if same {
        return;
    }
    conditions.retain(|c| c.type_ != Some(ExperimentConditionType::InvalidSpec));
    set_condition(
        conditions,
        ExperimentConditionType::InvalidSpec,
        ConditionStatus::True,
        INVALID_SPEC,
        message,
        now,
    );
}

/// Whether a template appeared or one of its four replica counts changed in this pass.
fn replica_counts_changed(before: &ExperimentStatus, after: &ExperimentStatus) -> bool {
    after.template_statuses.iter().flatten().any(|t| {
        let prev = t.name.as_deref().and_then(|n| before.template_status(n));
        prev.is_none_or(|p| {
            (
                p.replicas,
                p.updated_replicas,
                p.ready_replicas,
                p.available_replicas,
            ) != (
                t.replicas,
                t.updated_replicas,
                t.ready_replicas,
                t.available_replicas,
            )
        })
    })
}

/// Fills phase, message, `availableAt` and the `Progressing` condition of `status` (whose
/// template and analysis statuses are already this pass's), and returns the phase-change
/// event, if any.
pub(crate) fn calculate_status(
    e: &Experiment,
    status: &mut ExperimentStatus,
    now: Timestamp,
) -> Option<Event> {
    let default = ExperimentStatus::default();
    let before = e.status.as_ref().unwrap_or(&default);
    let previous = before.phase.clone().filter(|p| !p.as_str().is_empty());
    match &previous {
        Some(p) if p.is_completed() => {}
        None => status.phase = Some(AnalysisPhase::Pending),
        Some(_) => {
            let templates = assess_templates(&e.spec, status);
            let analyses = assess_analyses(&e.spec, status);
            if templates.0 == AnalysisPhase::Running && status.available_at.is_none() {
                status.available_at = Some(Time(sluice_api::time::whole_seconds(now)));
            }
            let (phase, message) = combine(&e.spec, status, templates, analyses);
            status.phase = Some(phase);
            status.message = message;
        }
    }

    let name = e.metadata.name.as_deref().unwrap_or_default();
    let phase = status.phase.clone();
    let changed = replica_counts_changed(before, status);
    let available_at = status.available_at.as_ref().map(|t| t.0);
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let progressing = ExperimentConditionType::Progressing;
    if phase.as_ref().is_some_and(AnalysisPhase::is_completed) {
        if phase == Some(AnalysisPhase::Successful) {
            set_condition(
                conditions,
                progressing,
                ConditionStatus::False,
                EXPERIMENT_COMPLETED,
                format!("Experiment \"{name}\" has successfully ran and completed."),
                now,
            );
        }
    } else if changed {
        set_condition(
            conditions,
            progressing,
            ConditionStatus::True,
            REPLICA_SET_UPDATED,
            format!("Experiment \"{name}\" is progressing."),
            now,
        );
    } else if available_at.is_some() && !duration_passed(&e.spec, available_at, now) {
        set_condition(
            conditions,
            progressing,
            ConditionStatus::True,
            NEW_REPLICA_SET_AVAILABLE,
            format!("Experiment \"{name}\" is running."),
            now,
        );
    }
    if conditions.is_empty() {
        status.conditions = None;
    }

    let old = previous.as_ref().map_or("", |p| p.as_str());
    let new = status.phase.as_ref().map_or("", |p| p.as_str());
    (old != new).then(|| {
        transition_event(
            "Experiment",
            new,
            format!("Experiment transitioned from {old} -> {new}"),
        )
    })
}

#[cfg(test)]
mod tests;
