//! A Rollout that drives a DaemonSet node by node (docs/daemonsets.md): the DaemonSet's
//! `OnDelete` strategy is the partition, and which nodes run the update revision is decided by
//! which of their old pods are deleted; kube-controller-manager recreates each from the
//! current template.
//!
//! - `model`: the DaemonSet as read (strategy, node count, update revision) and its pods as
//!   the node arithmetic counts them;
//! - `nodes`: what each node runs, and which old pods go next so that a step's share of the
//!   nodes runs a revision without more than `maxUnavailable` nodes down at once;
//! - `workload`: what can be driven, and a step, settling and an abort as evictions and a
//!   template write. The update itself (steps, analysis, abort, status) is every driven
//!   workload's (`crate::driven`).

mod model;
mod nodes;
#[cfg(test)]
mod tests;
mod workload;

pub use crate::observed::DaemonSetObserved;
pub use sluice_api::rollout::{DAEMONSET_ANNOTATION as DAEMONSET, daemon_set_name};

/// Decides what to do for a Rollout that opted in ([`DAEMONSET`]).
pub fn reconcile(observed: &crate::Observed) -> crate::Plan {
    let checked = workload::check(
        &observed.rollout,
        observed.daemon_set.as_ref(),
        &observed.pods,
    );
    crate::driven::reconcile(observed, checked)
}

/// The label selector of the DaemonSet's pods: the reconcile always reads them (which node
/// runs which revision decides every step). `None` before the DaemonSet is read.
pub fn pods_wanted(observed: &DaemonSetObserved) -> Option<String> {
    let selector = observed.daemon_set.as_ref()?.pointer("/spec/selector")?;
    let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(selector.clone()).ok()?;
    let formatted = crate::selector::format_selector(&selector);
    // An empty selector would select every pod of the namespace; the API server refuses
    // one for a DaemonSet, and none is read then.
    (!formatted.is_empty()).then_some(formatted)
}

pub use model::{Ds, node_pod, update_revision};
pub use nodes::{NodeCounts, NodePod, counts, next_deletions, node_budget, nodes_for_weight};
