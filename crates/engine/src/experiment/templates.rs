//! One template per pass: its ReplicaSet (created, scaled, held for the scale-down delay), its
//! Service, its replica counts, and its status code, with the event Argo emits when the code
//! changes.
//!
//! The status machine: `Progressing` while the pods are not all available (until the progress
//! deadline, counted from `lastTransitionTime`, makes it `Failed`), `Running` once they are,
//! and `Successful` when the duration has passed or the Experiment is terminating.
//! `Successful`, `Failed` and `Error` are final; `Error` comes from a write that cannot be made
//! (a ReplicaSet that cannot be built, a Service name taken by someone else).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::experiment::{
    DEFAULT_PROGRESS_DEADLINE_SECONDS, Experiment, TemplateSpec, TemplateStatus, TemplateStatusCode,
};

use super::observed::ExperimentObserved;
use super::plan::{ExperimentAction, transition_event};
use super::replica_sets::{build_replica_set, replica_set_name, scale};
use super::services::reconcile_service;
use super::state::{desired_replicas, duration_passed, reached, template_finished};
use crate::observed::ReplicaSetExt;
use crate::plan::Event;

/// What a template needs to know about the pass it is reconciled in.
pub(crate) struct TemplatePass<'a> {
    pub observed: &'a ExperimentObserved,
    pub uid: &'a str,
    /// The claimed ReplicaSet of each template.
    pub claimed: &'a BTreeMap<&'a str, &'a ReplicaSet>,
    pub terminating: bool,
}

/// What reconciling one template decided.
#[derive(Debug, Default)]
pub(crate) struct TemplateOutcome {
    pub status: TemplateStatus,
    pub actions: Vec<ExperimentAction>,
    pub events: Vec<Event>,
    pub requeue: Option<Duration>,
}

/// The progress deadline of the Experiment, in seconds.
pub(crate) fn progress_deadline_seconds(e: &Experiment) -> i32 {
    e.spec
        .progress_deadline_seconds
        .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS)
}

/// When a template that is not all available fails: `lastTransitionTime` + the deadline.
pub(crate) fn progress_deadline(e: &Experiment, status: &TemplateStatus) -> Option<Timestamp> {
    let since = status.last_transition_time.as_ref()?.0;
    since
        .checked_add(SignedDuration::from_secs(
            progress_deadline_seconds(e).into(),
        ))
        .ok()
}

/// The status row of the table for a template that is not finished.
pub(crate) fn next_code(
    available: i32,
    desired: i32,
    duration_passed: bool,
    terminating: bool,
    deadline_exceeded: bool,
) -> TemplateStatusCode {
    if available == desired {
        if duration_passed || terminating {
            TemplateStatusCode::Successful
        } else {
            TemplateStatusCode::Running
        }
    } else if deadline_exceeded {
        TemplateStatusCode::Failed
    } else if terminating {
        TemplateStatusCode::Successful
    } else {
        TemplateStatusCode::Progressing
    }
}

fn counts(status: &TemplateStatus) -> [Option<i32>; 4] {
    [
        status.replicas,
        status.updated_replicas,
        status.ready_replicas,
        status.available_replicas,
    ]
}

/// Reconciles `template`, starting from its recorded status.
pub(crate) fn reconcile_template(pass: &TemplatePass, template: &TemplateSpec) -> TemplateOutcome {
    let o = pass.observed;
    let e = &o.experiment;
    let now = o.now;
    let stamp = Some(Time(sluice_api::time::whole_seconds(now)));
    let name = template.name.clone().unwrap_or_default();
    let previous = e
        .status
        .as_ref()
        .and_then(|s| s.template_status(&name))
        .cloned()
        .unwrap_or_else(|| TemplateStatus {
            name: Some(name.clone()),
            ..Default::default()
        });
    let mut out = TemplateOutcome {
        status: previous.clone(),
        ..Default::default()
    };
    let ts = &mut out.status;
    let desired = desired_replicas(template, previous.status.as_ref(), pass.terminating);
    let rs = pass.claimed.get(name.as_str()).copied();
    let mut held = false;

    match rs {
        None if desired > 0 => {
            let rs_name = replica_set_name(e.metadata.name.as_deref().unwrap_or_default(), &name);
            let taken = o
                .replica_sets
                .iter()
                .any(|r| r.metadata.name.as_deref() == Some(rs_name.as_str()));
            if taken {
                // The name belongs to a ReplicaSet the template does not own: Argo counts a
                // collision and retries (the name does not change with the hash).
                ts.collision_count.get_or_insert(1);
            } else {
                match build_replica_set(e, pass.uid, template, ts.collision_count) {
                    Ok(new_rs) => {
                        out.actions
                            .push(ExperimentAction::CreateReplicaSet(Box::new(new_rs)));
                        ts.last_transition_time = stamp.clone();
                    }
                    Err(err) => {
                        ts.status = Some(TemplateStatusCode::Error);
                        ts.message = Some(format!(
                            "Failed to create ReplicaSet for template '{name}': {err}"
                        ));
                    }
                }
            }
        }
        None => {}
        Some(rs) => {
            let scaling = scale(rs, desired, e.spec.scale_down_delay_seconds, now);
            held = scaling.held;
            if scaling.touched {
                ts.last_transition_time = stamp.clone();
            }
            out.actions.extend(scaling.actions);
            out.events.extend(scaling.events);
            out.requeue = scaling.requeue;
            match reconcile_service(e, pass.uid, &o.services, template, rs, desired, ts) {
                Ok(actions) => out.actions.extend(actions),
                Err(message) => {
                    ts.status = Some(TemplateStatusCode::Error);
                    ts.message = Some(message);
                }
            }
        }
    }

    let ts = &mut out.status;
    let (replicas, ready, available) = rs.map_or((0, 0, 0), |r| {
        (
            r.status_replicas(),
            r.ready_replicas(),
            r.available_replicas(),
        )
    });
    ts.replicas = Some(replicas);
    ts.updated_replicas = Some(replicas);
    ts.ready_replicas = Some(ready);
    ts.available_replicas = Some(available);
    if counts(ts) != counts(&previous) {
        ts.last_transition_time = stamp;
    }

    if !template_finished(ts.status.as_ref()) {
        let available_at = e
            .status
            .as_ref()
            .and_then(|s| s.available_at.as_ref())
            .map(|t| t.0);
        let deadline_exceeded = !held && progress_deadline(e, ts).is_some_and(|d| reached(now, d));
        let code = next_code(
            available,
            desired,
            duration_passed(&e.spec, available_at, now),
            pass.terminating,
            deadline_exceeded,
        );
        if code == TemplateStatusCode::Failed {
            ts.message = Some(format!(
                "Template '{name}' exceeded its progressDeadlineSeconds ({})",
                progress_deadline_seconds(e)
            ));
        }
        ts.status = Some(code);
    }

    if ts.status != previous.status {
        let old = previous.status.as_ref().map_or("", |s| s.as_str());
        let new = ts.status.as_ref().map_or("", |s| s.as_str());
        let mut message = format!("Template '{name}' transitioned from {old} -> {new}");
        if let Some(m) = ts.message.as_deref().filter(|m| !m.is_empty()) {
            message.push_str(": ");
            message.push_str(m);
        }
        out.events.push(transition_event("Template", new, message));
    }
    out
}

#[cfg(test)]
mod tests;
