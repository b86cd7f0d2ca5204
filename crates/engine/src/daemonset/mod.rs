//! A Rollout that drives a DaemonSet node by node (docs/daemonsets.md): the DaemonSet's
//! `OnDelete` strategy is the partition, and which nodes run the update revision is decided by
//! which of their old pods are deleted; kube-controller-manager recreates each from the
//! current template.
//!
//! - `model`: the DaemonSet as read (strategy, node count, update revision) and its pods as
//!   the node arithmetic counts them;
//! - `nodes`: what each node runs, and which old pods go next so that a step's share of the
//!   nodes runs a revision without more than `maxUnavailable` nodes down at once.

mod model;
mod nodes;

pub use model::{Ds, node_pod, update_revision};
pub use nodes::{NodeCounts, NodePod, counts, next_deletions, node_budget, nodes_for_weight};
