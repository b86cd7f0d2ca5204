//! The Experiment controller's decisions, as a pure function of what was observed and when.
//!
//! An Experiment runs one ReplicaSet per template (with a Service where asked), side by side,
//! for its duration or until its required analyses finish, and starts an AnalysisRun per
//! analysis once all templates are available. One pass ([`reconcile_experiment`]):
//!
//! 1. checks the spec ([`validate`]); an invalid one only gets the `InvalidSpec` condition;
//! 2. reconciles each template ([`templates`]): ReplicaSet, Service, counts, status code;
//! 3. reconciles each analysis ([`analysis`]): check, start, copy, terminate;
//! 4. aggregates the phase ([`phase`]) and decides when to come back.
//!
//! A write of the plan that fails is reported back through [`record_write_failure`], which
//! amends the status and events as Argo would have in the same pass.
//!
//! Whether the Experiment is terminating is decided once, from the observed status, as Argo
//! decides it at the start of its reconcile.

pub mod analysis;
pub mod args;
pub mod failures;
pub mod observed;
pub mod phase;
pub mod plan;
pub mod replica_sets;
pub mod services;
pub mod state;
pub mod templates;
pub mod validate;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use std::time::Duration;

use sluice_api::experiment::{ExperimentConditionType, TemplateStatusCode};

pub use failures::{WriteFailure, record_write_failure};
pub use observed::{ExperimentObserved, analysis_template_refs};
pub use plan::{ExperimentAction, ExperimentPlan, echo_on_rollout};
pub use state::is_terminating;
pub use validate::verify_spec;

use crate::plan::set_requeue;
use templates::{TemplatePass, progress_deadline, reconcile_template};

/// Decides one reconcile of an Experiment.
pub fn reconcile_experiment(o: &ExperimentObserved) -> ExperimentPlan {
    let e = &o.experiment;
    let mut plan = ExperimentPlan {
        status: e.status.clone().unwrap_or_default(),
        ..Default::default()
    };
    let Some(uid) = e.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
        plan.error = Some("the Experiment has no uid to own its objects".into());
        return plan;
    };
    if let Some(message) = verify_spec(e) {
        phase::set_invalid_spec(&mut plan.status, message, o.now);
        return plan;
    }
    if let Some(conditions) = plan.status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != Some(ExperimentConditionType::InvalidSpec));
        if conditions.is_empty() {
            plan.status.conditions = None;
        }
    }
    let claimed = match observed::claim_replica_sets(o, uid) {
        Ok(claimed) => claimed,
        Err(err) => {
            plan.error = Some(err);
            return plan;
        }
    };
    let terminating = is_terminating(e);

    let pass = TemplatePass {
        observed: o,
        uid,
        claimed: &claimed,
        terminating,
    };
    for template in e.spec.templates.iter().flatten() {
        let outcome = reconcile_template(&pass, template);
        plan.actions.extend(outcome.actions);
        plan.events.extend(outcome.events);
        if let Some(after) = outcome.requeue {
            set_requeue(&mut plan.requeue_after, after);
        }
        let statuses = plan.status.template_statuses.get_or_insert_with(Vec::new);
        match statuses.iter_mut().find(|s| s.name == outcome.status.name) {
            Some(slot) => *slot = outcome.status,
            None => statuses.push(outcome.status),
        }
    }

    analysis::reconcile_analyses(
        o,
        uid,
        &claimed,
        terminating,
        &mut plan.status,
        &mut plan.actions,
        &mut plan.events,
    );

    plan.events
        .extend(phase::calculate_status(e, &mut plan.status, o.now));

    if !terminating && let Some(after) = deadline_requeue(o, &plan) {
        set_requeue(&mut plan.requeue_after, after);
    }
    plan
}

/// The sooner of the end of the duration and the earliest progress deadline of a
/// Progressing template, from this pass's status. A deadline this pass already found passed
/// has done its work here (the template's status changed), so only later ones count; the
/// pass booked for one finds it passed ([`state::reached`]), without waiting for any event.
fn deadline_requeue(o: &ExperimentObserved, plan: &ExperimentPlan) -> Option<Duration> {
    let e = &o.experiment;
    let available_at = plan.status.available_at.as_ref().map(|t| t.0);
    let end = state::finished_at(&e.spec, available_at).filter(|end| *end > o.now);
    let deadlines = plan
        .status
        .template_statuses
        .iter()
        .flatten()
        .filter(|t| t.status == Some(TemplateStatusCode::Progressing))
        .filter_map(|t| progress_deadline(e, t));
    end.into_iter().chain(deadlines).min().map(|at| {
        if at > o.now {
            at.duration_since(o.now).unsigned_abs()
        } else {
            Duration::ZERO
        }
    })
}
