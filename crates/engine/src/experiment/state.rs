//! Facts about an Experiment that several decisions share: whether it is terminating, its
//! run time, and how many pods each template should have. They are read from the *observed*
//! status, as Argo reads them once at the start of a reconcile.

use std::time::Duration;

use jiff::Timestamp;
use sluice_api::common::AnalysisPhase;
use sluice_api::experiment::{
    Experiment, ExperimentSpec, ExperimentStatus, TemplateSpec, TemplateStatusCode,
};

/// Whether a template status is final (Successful, Failed or Error).
pub(crate) fn template_finished(code: Option<&TemplateStatusCode>) -> bool {
    matches!(
        code,
        Some(
            TemplateStatusCode::Successful | TemplateStatusCode::Failed | TemplateStatusCode::Error
        )
    )
}

/// The Experiment is winding down: asked to terminate, already finished, a template Failed
/// or Errored, an AnalysisRun Failed, Errored or was Inconclusive, or every analysis required
/// for completion succeeded. Its templates then want no pods and no new run is started.
pub fn is_terminating(experiment: &Experiment) -> bool {
    let default = ExperimentStatus::default();
    let status = experiment.status.as_ref().unwrap_or(&default);
    experiment.spec.is_terminating()
        || status
            .phase
            .as_ref()
            .is_some_and(AnalysisPhase::is_completed)
        || status.template_statuses.iter().flatten().any(|t| {
            matches!(
                t.status,
                Some(TemplateStatusCode::Failed | TemplateStatusCode::Error)
            )
        })
        || status.analysis_runs.iter().flatten().any(|r| {
            matches!(
                r.phase,
                Some(AnalysisPhase::Failed | AnalysisPhase::Error | AnalysisPhase::Inconclusive)
            )
        })
        || required_analyses_successful(&experiment.spec, status)
}

/// Every analysis marked `requiredForCompletion` has a Successful run, and there is at least
/// one such analysis.
pub(crate) fn required_analyses_successful(
    spec: &ExperimentSpec,
    status: &ExperimentStatus,
) -> bool {
    let mut required = spec
        .analyses
        .iter()
        .flatten()
        .filter(|a| a.required_for_completion == Some(true))
        .peekable();
    if required.peek().is_none() {
        return false;
    }
    required.all(|a| {
        status
            .analysis_runs
            .iter()
            .flatten()
            .find(|r| r.name == a.name)
            .is_some_and(|r| r.phase == Some(AnalysisPhase::Successful))
    })
}

/// The run time; `None` without one. A duration Go could not parse counts as none (the
/// Experiment then runs until terminated), as Argo ignores it.
pub(crate) fn duration(spec: &ExperimentSpec) -> Option<Duration> {
    spec.duration().and_then(Result::ok)
}

/// When the run time ends: `availableAt` + duration.
pub(crate) fn finished_at(
    spec: &ExperimentSpec,
    available_at: Option<Timestamp>,
) -> Option<Timestamp> {
    let d = duration(spec)?;
    let span = jiff::SignedDuration::try_from(d).ok()?;
    available_at?.checked_add(span).ok()
}

/// Whether a deadline recorded to the whole second has passed at `now`, the time of the pass
/// read down to the whole second. Argo compares the exact time with the deadline
/// (`now.After(deadline)`), which holds from the first instant after it; read to the second,
/// that is the deadline's own second. A pass booked for the deadline
/// ([`crate::experiment::reconcile_experiment`]'s requeue) therefore finds it passed; a strict
/// comparison of the truncated time would find it not yet passed and book nothing more.
pub(crate) fn reached(now: Timestamp, deadline: Timestamp) -> bool {
    now >= deadline
}

/// Whether the run time has passed.
pub(crate) fn duration_passed(
    spec: &ExperimentSpec,
    available_at: Option<Timestamp>,
    now: Timestamp,
) -> bool {
    finished_at(spec, available_at).is_some_and(|end| reached(now, end))
}

/// How many pods the template wants: none once the Experiment is terminating or the template
/// is finished, else its `replicas` (default 1).
pub(crate) fn desired_replicas(
    template: &TemplateSpec,
    previous: Option<&TemplateStatusCode>,
    terminating: bool,
) -> i32 {
    if terminating || template_finished(previous) {
        0
    } else {
        template.replicas.unwrap_or(1).max(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn experiment(spec_extra: Value, status: Value) -> Experiment {
        let mut spec = json!({"templates": [], "analyses": [
            {"name": "a", "templateName": "t"},
            {"name": "r", "templateName": "t", "requiredForCompletion": true}]});
        for (k, v) in spec_extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        serde_json::from_value(json!({"metadata": {"name": "e"}, "spec": spec, "status": status}))
            .unwrap()
    }

    #[test]
    fn terminating_rules() {
        let cases = [
            (json!({}), json!({}), false),
            (json!({"terminate": true}), json!({}), true),
            (json!({}), json!({"phase": "Successful"}), true),
            (json!({}), json!({"phase": "Running"}), false),
            (
                json!({}),
                json!({"templateStatuses": [{"name": "x", "status": "Failed"}]}),
                true,
            ),
            (
                json!({}),
                json!({"templateStatuses": [{"name": "x", "status": "Error"}]}),
                true,
            ),
            (
                json!({}),
                json!({"templateStatuses": [{"name": "x", "status": "Successful"}]}),
                false,
            ),
            (
                json!({}),
                json!({"analysisRuns": [{"name": "a", "analysisRun": "x", "phase": "Inconclusive"}]}),
                true,
            ),
            (
                json!({}),
                json!({"analysisRuns": [{"name": "a", "analysisRun": "x", "phase": "Successful"}]}),
                false,
            ),
            (
                json!({}),
                json!({"analysisRuns": [{"name": "r", "analysisRun": "x", "phase": "Successful"}]}),
                true,
            ),
        ];
        for (spec, status, want) in cases {
            assert_eq!(
                is_terminating(&experiment(spec.clone(), status.clone())),
                want,
                "{spec} {status}"
            );
        }
    }

    #[test]
    fn no_required_analysis_never_completes_the_experiment() {
        let spec: ExperimentSpec = serde_json::from_value(json!({"analyses": [
            {"name": "a", "templateName": "t"}]}))
        .unwrap();
        let status: ExperimentStatus = serde_json::from_value(json!({"analysisRuns": [
            {"name": "a", "analysisRun": "x", "phase": "Successful"}]}))
        .unwrap();
        assert!(!required_analyses_successful(&spec, &status));
    }

    #[test]
    fn desired_replicas_rules() {
        let t: TemplateSpec = serde_json::from_value(json!({"name": "x", "replicas": 3})).unwrap();
        let one: TemplateSpec = serde_json::from_value(json!({"name": "x"})).unwrap();
        assert_eq!(desired_replicas(&t, None, false), 3);
        assert_eq!(desired_replicas(&one, None, false), 1);
        assert_eq!(
            desired_replicas(&t, Some(&TemplateStatusCode::Running), false),
            3
        );
        assert_eq!(desired_replicas(&t, None, true), 0);
        for done in [
            TemplateStatusCode::Successful,
            TemplateStatusCode::Failed,
            TemplateStatusCode::Error,
        ] {
            assert_eq!(desired_replicas(&t, Some(&done), false), 0);
        }
    }

    #[test]
    fn duration_counts_from_available_at() {
        let spec: ExperimentSpec = serde_json::from_value(json!({"duration": "30s"})).unwrap();
        let at = Timestamp::from_second(100).unwrap();
        let t = |s| Timestamp::from_second(s).unwrap();
        assert!(!duration_passed(&spec, None, t(1000)));
        assert!(!duration_passed(&spec, Some(at), t(129)));
        // The second of the end: the exact time is past it (or at it, a measure of nothing).
        assert!(duration_passed(&spec, Some(at), t(130)));
        assert_eq!(finished_at(&spec, Some(at)), Some(t(130)));
        let bad: ExperimentSpec = serde_json::from_value(json!({"duration": "soon"})).unwrap();
        assert_eq!(duration(&bad), None);
    }
}
