//! What a failed write of the plan means, in Argo's words. The engine cannot know a write
//! fails; the apply layer reports it here, and the plan's status and events are amended as
//! Argo's controller would have decided had it seen the error in the same pass: the template
//! or analysis goes to `Error` with Argo's message (which makes the Experiment `Error`), and
//! the write's own error event is added.

use std::time::Duration;

use sluice_api::common::AnalysisPhase;
use sluice_api::experiment::TemplateStatusCode;

use super::observed::ExperimentObserved;
use super::plan::{ExperimentAction, ExperimentPlan, transition_event};
use crate::labels::EXPERIMENT_TEMPLATE_NAME;
use crate::plan::{Event, set_requeue};

/// How a write failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteFailure {
    /// The object to create exists: the next pass sees it.
    AlreadyExists,
    /// The object changed since it was observed: decide again shortly.
    Conflict,
    /// Anything else, with the API server's message.
    Other(String),
}

/// Which status entry a write belongs to.
enum Owner {
    Template(String),
    Analysis(String),
}

fn template_of_replica_set(o: &ExperimentObserved, name: &str) -> Option<String> {
    o.replica_sets
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
        .and_then(|r| r.metadata.annotations.as_ref())
        .and_then(|a| a.get(EXPERIMENT_TEMPLATE_NAME))
        .cloned()
}

/// Amends `plan` for the failure of `action` (one of its actions).
pub fn record_write_failure(
    o: &ExperimentObserved,
    plan: &mut ExperimentPlan,
    action: &ExperimentAction,
    failure: &WriteFailure,
) {
    let err = match failure {
        WriteFailure::AlreadyExists if !matches!(action, ExperimentAction::CreateService(_)) => {
            return;
        }
        WriteFailure::AlreadyExists => "already exists".to_owned(),
        WriteFailure::Conflict => {
            set_requeue(&mut plan.requeue_after, Duration::from_secs(1));
            if let ExperimentAction::ScaleReplicaSet { name, from, to, .. } = action {
                plan.events.push(scale_error(name, *from, *to, "conflict"));
            }
            return;
        }
        WriteFailure::Other(message) => message.clone(),
    };
    let (owner, message) = match action {
        ExperimentAction::CreateReplicaSet(rs) => {
            let name = rs.metadata.name.clone().unwrap_or_default();
            let template = rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXPERIMENT_TEMPLATE_NAME))
                .cloned()
                .unwrap_or_default();
            plan.events.push(Event::warning(
                "ReplicaSetCreateError",
                format!("Failed to create new replica set \"{name}\": {err}"),
            ));
            let message = format!("Failed to create ReplicaSet for template '{template}': {err}");
            (Owner::Template(template), message)
        }
        ExperimentAction::ScaleReplicaSet { name, from, to, .. } => {
            let template = template_of_replica_set(o, name).unwrap_or_default();
            plan.events.push(scale_error(name, *from, *to, &err));
            let message = format!(
                "Unable to scale ReplicaSet for template '{template}' to desired replica count \
                 '{to}': {err}"
            );
            (Owner::Template(template), message)
        }
        // Only the scale-down deadline: the next pass records it again.
        ExperimentAction::AnnotateReplicaSet { .. } => return,
        ExperimentAction::CreateService(svc) => {
            let name = svc.metadata.name.clone().unwrap_or_default();
            let template = svc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(EXPERIMENT_TEMPLATE_NAME))
                .cloned()
                .unwrap_or_default();
            let message =
                format!("Failed to create Service {name} for template '{template}': {err}");
            (Owner::Template(template), message)
        }
        ExperimentAction::DeleteService { name, .. } => {
            let template = o
                .services
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                .and_then(|s| s.metadata.annotations.as_ref())
                .and_then(|a| a.get(EXPERIMENT_TEMPLATE_NAME))
                .cloned()
                .unwrap_or_default();
            let message = format!("Failed to delete Service for template '{template}': {err}");
            (Owner::Template(template), message)
        }
        ExperimentAction::CreateAnalysisRun(run) => {
            let run_name = run.metadata.name.clone();
            let analysis = plan
                .status
                .analysis_runs
                .iter()
                .flatten()
                .find(|r| r.analysis_run == run_name)
                .and_then(|r| r.name.clone())
                .unwrap_or_default();
            let message = format!("Failed to create AnalysisRun for analysis '{analysis}': {err}");
            (Owner::Analysis(analysis), message)
        }
        // Retried on the next pass, which finds the run still unfinished.
        ExperimentAction::TerminateAnalysisRun { .. } => return,
    };
    mark_error(o, plan, owner, message);
}

fn scale_error(name: &str, from: i32, to: i32, err: &str) -> Event {
    let direction = if to > from { "up" } else { "down" };
    Event::warning(
        "ReplicaSetUpdateError",
        format!("Failed to scale {name} {direction}: {err}"),
    )
}

/// Sets the entry to Error, replaces its transition event of this pass, and recomputes the
/// phase (replacing the phase event).
fn mark_error(o: &ExperimentObserved, plan: &mut ExperimentPlan, owner: Owner, message: String) {
    let e = &o.experiment;
    let observed = e.status.clone().unwrap_or_default();
    match owner {
        Owner::Template(t) => {
            let Some(ts) = plan
                .status
                .template_statuses
                .iter_mut()
                .flatten()
                .find(|s| s.name.as_deref() == Some(t.as_str()))
            else {
                return;
            };
            ts.status = Some(TemplateStatusCode::Error);
            ts.message = Some(message.clone());
            let prefix = format!("Template '{t}' transitioned");
            plan.events.retain(|e| !e.message.starts_with(&prefix));
            let old = observed
                .template_status(&t)
                .and_then(|s| s.status.clone())
                .map_or(String::new(), |s| s.as_str().to_owned());
            if old != "Error" {
                plan.events.push(transition_event(
                    "Template",
                    "Error",
                    format!("{prefix} from {old} -> Error: {message}"),
                ));
            }
        }
        Owner::Analysis(a) => {
            let Some(entry) = plan
                .status
                .analysis_runs
                .iter_mut()
                .flatten()
                .find(|s| s.name.as_deref() == Some(a.as_str()))
            else {
                return;
            };
            entry.phase = Some(AnalysisPhase::Error);
            entry.message = Some(message.clone());
            entry.analysis_run = Some(String::new());
            let prefix = format!("AnalysisRun '{a}' transitioned");
            plan.events.retain(|e| !e.message.starts_with(&prefix));
            let old = observed
                .analysis_runs
                .iter()
                .flatten()
                .find(|r| r.name.as_deref() == Some(a.as_str()))
                .and_then(|r| r.phase.clone())
                .map_or(String::new(), |p| p.as_str().to_owned());
            if old != "Error" {
                plan.events.push(transition_event(
                    "AnalysisRun",
                    "Error",
                    format!("{prefix} from {old} -> Error: {message}"),
                ));
            }
        }
    }
    plan.events
        .retain(|e| !e.message.starts_with("Experiment transitioned"));
    plan.events
        .extend(super::phase::calculate_status(e, &mut plan.status, o.now));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::experiment::fixtures::{experiment, observed, owned_rs, t, template};
    use crate::experiment::reconcile_experiment;
    use crate::plan::EventType;

    #[test]
    fn a_failed_scale_errs_the_template_and_the_experiment() {
        let e = experiment(
            json!({"templates": [template("a", 2)]}),
            json!({"phase": "Pending", "templateStatuses": [{"name": "a", "status": "Progressing",
                "replicas": 0, "updatedReplicas": 0, "readyReplicas": 0, "availableReplicas": 0}]}),
        );
        let rs = owned_rs(&e, "a", 0, 0);
        let o = observed(e, vec![rs], t(10));
        let mut plan = reconcile_experiment(&o);
        let action = plan.actions[0].clone();
        record_write_failure(
            &o,
            &mut plan,
            &action,
            &WriteFailure::Other("denied".into()),
        );
        let ts = &plan.status.template_statuses.as_ref().unwrap()[0];
        assert_eq!(ts.status, Some(TemplateStatusCode::Error));
        assert_eq!(
            ts.message.as_deref(),
            Some(
                "Unable to scale ReplicaSet for template 'a' to desired replica count '2': denied"
            )
        );
        assert_eq!(plan.status.phase, Some(AnalysisPhase::Error));
        let reasons: Vec<(&str, EventType)> =
            plan.events.iter().map(|e| (e.reason, e.type_)).collect();
        assert!(reasons.contains(&("ReplicaSetUpdateError", EventType::Warning)));
        assert!(reasons.contains(&("TemplateError", EventType::Warning)));
        assert!(reasons.contains(&("ExperimentError", EventType::Warning)));
        let scale = plan
            .events
            .iter()
            .find(|e| e.reason == "ReplicaSetUpdateError")
            .unwrap();
        assert_eq!(scale.message, "Failed to scale ex-a up: denied");
    }

    #[test]
    fn conflicts_and_existing_objects_are_retried() {
        let e = experiment(json!({"templates": [template("a", 1)]}), json!({}));
        let o = observed(e, vec![], t(10));
        let mut plan = reconcile_experiment(&o);
        let before = plan.clone();
        let action = plan.actions[0].clone();
        record_write_failure(&o, &mut plan, &action, &WriteFailure::AlreadyExists);
        assert_eq!(plan, before);
        record_write_failure(&o, &mut plan, &action, &WriteFailure::Conflict);
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(1)));
        record_write_failure(&o, &mut plan, &action, &WriteFailure::Other("quota".into()));
        let ts = &plan.status.template_statuses.as_ref().unwrap()[0];
        assert_eq!(
            ts.message.as_deref(),
            Some("Failed to create ReplicaSet for template 'a': quota")
        );
        let messages: Vec<&str> = plan.events.iter().map(|e| e.message.as_str()).collect();
        assert!(messages.contains(&"Failed to create new replica set \"ex-a\": quota"));
        assert!(messages.contains(&"Template 'a' transitioned from  -> Error: Failed to create ReplicaSet for template 'a': quota"));
        assert!(!messages.iter().any(|m| m.contains("-> Progressing")));
    }
}
