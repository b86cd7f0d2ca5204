//! A Rollout that drives a StatefulSet's partitioned rolling update as its canary steps
//! (Sluice only, opt-in with the annotation `rollouts.sluice.dev/statefulset: <name>`; see
//! docs/statefulsets.md). The StatefulSet is the user's: its template is what they edit, and
//! the StatefulSet controller replaces the pods. The Rollout only sets
//! `spec.updateStrategy.rollingUpdate.partition` (`setWeight`), and on abort the template back
//! to the stable revision's; it never creates a ReplicaSet.
//!
//! - `model`: the StatefulSet and its ControllerRevisions as read, the partition arithmetic;
//! - `decide`: the entry point: the spec checks, adoption, a new update, abort, completion;
//! - `steps`: the step machine of an update in progress (`setWeight`, `pause`, `analysis`);
//! - `analysis`: the analysis steps' and the background analysis's runs and verdicts;
//! - `status`: the counts, conditions and phase the Rollout reports.
//!
//! The partition is closed (`= replicas`) whenever every pod runs the current revision, so
//! that a template edit updates no pod before a step asks for it.

mod analysis;
mod decide;
mod model;
mod status;
mod steps;
#[cfg(test)]
mod tests;

pub use crate::observed::StatefulSetObserved;
pub use decide::reconcile;
pub use model::{partition_for, revision_hash};
pub use sluice_api::rollout::{STATEFULSET_ANNOTATION as STATEFULSET, stateful_set_name};

/// How soon a Rollout waiting on the StatefulSet's pods looks again, besides the watch of
/// StatefulSets that wakes it on each change.
pub const POD_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);
pub use crate::plan::UPDATED_STATEFUL_SET;

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
