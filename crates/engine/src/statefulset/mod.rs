//! A Rollout that drives a StatefulSet's partitioned rolling update as its canary steps
//! (Sluice only, opt-in with the annotation `rollouts.sluice.dev/statefulset: <name>`; see
//! docs/statefulsets.md). The StatefulSet is the user's: its template is what they edit, and
//! the StatefulSet controller replaces the pods. The Rollout only sets
//! `spec.updateStrategy.rollingUpdate.partition` (`setWeight`), and on abort the template back
//! to the stable revision's; it never creates a ReplicaSet.
//!
//! The update itself (steps, analysis, abort, status) is every driven workload's
//! (`crate::driven`); here are what is read of a StatefulSet and how a step is applied:
//!
//! - `model`: the StatefulSet and its ControllerRevisions as read, the partition arithmetic;
//! - `workload`: what can be driven, and a step, settling and an abort as partition and
//!   template writes.
//!
//! The partition is closed (`= replicas`) whenever every pod runs the current revision, so
//! that a template edit updates no pod before a step asks for it.

mod model;
#[cfg(test)]
mod tests;
mod workload;

pub use crate::driven::POD_RECHECK;
pub use crate::observed::StatefulSetObserved;
pub use crate::plan::UPDATED_STATEFUL_SET;
pub use model::{partition_for, revision_hash};
pub use sluice_api::rollout::{STATEFULSET_ANNOTATION as STATEFULSET, stateful_set_name};

/// Decides what to do for a Rollout that opted in ([`STATEFULSET`]).
pub fn reconcile(observed: &crate::Observed) -> crate::Plan {
    let checked = workload::check(
        &observed.rollout,
        observed.stateful_set.as_ref(),
        &observed.pods,
    );
    crate::driven::reconcile(observed, checked)
}

/// The label selector of the StatefulSet's pods when the reconcile needs them: while an abort
/// rolls the StatefulSet back (stuck pods are evicted); `None` otherwise.
pub fn pods_wanted(
    rollout: &sluice_api::Rollout,
    observed: &StatefulSetObserved,
) -> Option<String> {
    let aborting = rollout
        .status
        .as_ref()
        .is_some_and(|s| s.abort == Some(true));
    let selector = observed.stateful_set.as_ref()?.pointer("/spec/selector")?;
    let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(selector.clone()).ok()?;
    aborting.then(|| crate::selector::format_selector(&selector))
}
