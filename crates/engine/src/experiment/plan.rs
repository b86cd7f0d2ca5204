//! What one Experiment reconcile decided: the writes, the status to record, the events, and
//! when to come back. The controller applies it; tests and the simulator can too.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::ExperimentStatus;

use crate::plan::{Event, EventType};

/// One write against the API server. Writes that must not land on newer state than the one
/// decided on carry the observed resourceVersion (a conflict makes the controller observe
/// again and decide afresh); deletes carry the observed uid, so that an object recreated in
/// between is not deleted by mistake.
#[derive(Debug, Clone, PartialEq)]
pub enum ExperimentAction {
    /// Create a template's ReplicaSet (always at 0 replicas: it is scaled up on the next pass).
    CreateReplicaSet(Box<ReplicaSet>),
    /// Set `spec.replicas` of a template's ReplicaSet, and set (`Some`) or remove (`None`) the
    /// named annotations in the same write.
    ScaleReplicaSet {
        name: String,
        resource_version: Option<String>,
        from: i32,
        to: i32,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Set or remove annotations of a ReplicaSet without scaling it (the scale-down deadline
    /// of a finished template).
    AnnotateReplicaSet {
        name: String,
        resource_version: Option<String>,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Create the Service of a template.
    CreateService(Box<Service>),
    /// Delete the Service of a template that no longer needs one.
    DeleteService { name: String, uid: Option<String> },
    /// Start the AnalysisRun of one of the Experiment's analyses.
    CreateAnalysisRun(Box<AnalysisRun>),
    /// Stop an unfinished run of a terminating Experiment: `{"spec":{"terminate":true}}`.
    TerminateAnalysisRun { name: String },
}

/// What one reconcile of an Experiment decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExperimentPlan {
    /// Writes in the order they must happen.
    pub actions: Vec<ExperimentAction>,
    /// The status the Experiment should have afterwards. Argo writes it as a merge patch of
    /// `status` on the main resource (the kind has no status subresource); the apply layer
    /// writes only when it differs from the observed one.
    pub status: ExperimentStatus,
    /// Events to publish on the Experiment. Those whose reason starts with `AnalysisRun`
    /// (except `AnalysisRunTerminating`) are also published on the owning Rollout, as a
    /// Warning: see [`echo_on_rollout`].
    pub events: Vec<Event>,
    /// Come back after this long even if nothing changes (a duration, a progress deadline or
    /// a scale-down deadline expires).
    pub requeue_after: Option<Duration>,
    /// Set when nothing could be decided (two ReplicaSets claim one template, the Experiment
    /// has no uid): the controller logs it and retries with backoff. The plan is then empty
    /// and `status` is the observed one.
    pub error: Option<String>,
}

/// The copy of an Experiment event that Argo also publishes on the Rollout owning the
/// Experiment: AnalysisRun phase changes, always as a Warning. `None` for other events.
pub fn echo_on_rollout(event: &Event) -> Option<Event> {
    (event.reason.starts_with("AnalysisRun") && event.reason != TERMINATING_RUN).then(|| Event {
        type_: EventType::Warning,
        reason: event.reason,
        message: event.message.clone(),
    })
}

/// Reason of the event for a run terminated because the Experiment is ending.
pub(crate) const TERMINATING_RUN: &str = "AnalysisRunTerminating";

/// Argo's event reasons are a prefix and a phase or status (`TemplateRunning`,
/// `ExperimentFailed`, `AnalysisRunPending`). [`Event`] holds static reasons, so the known
/// phases are spelled out here; an unknown phase gives the bare prefix.
pub(crate) fn phase_reason(prefix: &str, phase: &str) -> &'static str {
    const REASONS: &[(&str, &str, &str)] = &[
        ("Experiment", "Pending", "ExperimentPending"),
        ("Experiment", "Running", "ExperimentRunning"),
        ("Experiment", "Successful", "ExperimentSuccessful"),
        ("Experiment", "Failed", "ExperimentFailed"),
        ("Experiment", "Error", "ExperimentError"),
        ("Experiment", "Inconclusive", "ExperimentInconclusive"),
        ("AnalysisRun", "Pending", "AnalysisRunPending"),
        ("AnalysisRun", "Running", "AnalysisRunRunning"),
        ("AnalysisRun", "Successful", "AnalysisRunSuccessful"),
        ("AnalysisRun", "Failed", "AnalysisRunFailed"),
        ("AnalysisRun", "Error", "AnalysisRunError"),
        ("AnalysisRun", "Inconclusive", "AnalysisRunInconclusive"),
        ("Template", "Progressing", "TemplateProgressing"),
        ("Template", "Running", "TemplateRunning"),
        ("Template", "Successful", "TemplateSuccessful"),
        ("Template", "Failed", "TemplateFailed"),
        ("Template", "Error", "TemplateError"),
    ];
    REASONS
        .iter()
        .find(|(p, s, _)| *p == prefix && *s == phase)
        .map(|(_, _, r)| *r)
        .unwrap_or(match prefix {
            "Experiment" => "Experiment",
            "AnalysisRun" => "AnalysisRun",
            _ => "Template",
        })
}

/// A phase-change event: a Warning for the bad outcomes.
pub(crate) fn transition_event(prefix: &str, new: &str, message: String) -> Event {
    let reason = phase_reason(prefix, new);
    if matches!(new, "Failed" | "Error" | "Inconclusive") {
        Event::warning(reason, message)
    } else {
        Event::normal(reason, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_join_prefix_and_phase() {
        assert_eq!(phase_reason("Template", "Running"), "TemplateRunning");
        assert_eq!(phase_reason("Experiment", "Error"), "ExperimentError");
        assert_eq!(phase_reason("AnalysisRun", "Weird"), "AnalysisRun");
        let e = transition_event("AnalysisRun", "Inconclusive", "m".into());
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(
            transition_event("Template", "Running", "m".into()).type_,
            EventType::Normal
        );
    }

    #[test]
    fn run_events_echo_on_the_rollout_as_warnings() {
        let echoed = echo_on_rollout(&Event::normal("AnalysisRunSuccessful", "m")).unwrap();
        assert_eq!(echoed.type_, EventType::Warning);
        assert!(echo_on_rollout(&Event::normal(TERMINATING_RUN, "m")).is_none());
        assert!(echo_on_rollout(&Event::normal("TemplateRunning", "m")).is_none());
    }
}
