//! A Rollout that drives a workload of the user's through its ControllerRevisions instead of
//! ReplicaSets of its own (Sluice only, opt-in by annotation): a StatefulSet's partitioned
//! rolling update (`crate::statefulset`, docs/statefulsets.md) or a DaemonSet's node-by-node
//! `OnDelete` update (`crate::daemonset`, docs/daemonsets.md). The update is the same for both:
//! a new revision starts the steps over, `setWeight` moves a share of the pods onto it,
//! `pause` and `analysis` steps and the background analysis are a canary's, and an abort puts
//! the stable revision's template back and brings the updated pods back to it. What differs is
//! how a step is applied (a partition written, or old pods evicted node by node) and what is
//! read of the workload; that is the [`Driven`] trait.
//!
//! - `update`: the entry point: the checks, adoption, a new update, abort, completion;
//! - `steps`: the step machine of an update in progress (`setWeight`, `pause`, `analysis`);
//! - `analysis`: the analysis steps' and the background analysis's runs and verdicts;
//! - `status`: the counts, conditions and phase the Rollout reports.

mod analysis;
mod status;
mod steps;
mod update;

use serde_json::Value;

use crate::plan::{Event, Plan};

pub use update::POD_RECHECK;
pub(crate) use update::{Checked, check_spec, reconcile};

/// How much of the workload a step moves onto the update revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A share of the pods, in percent (`setWeight`; 100 past the last step).
    Weight(i32),
    /// A number of pods (`setCanaryScale.replicas`, a DaemonSet's nodes).
    Count(i32),
}

/// The pod counts the Rollout's status reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub replicas: i32,
    pub ready: i32,
    pub available: i32,
    /// Pods on the Rollout's current revision.
    pub updated: i32,
}

/// What differs between the workloads a Rollout drives.
pub(crate) trait Driven {
    /// The kind, as messages name it.
    const KIND: &'static str;

    /// The object as read (kept as JSON, so that a write carries every field as read).
    fn object(&self) -> &Value;

    fn name(&self) -> &str {
        self.object()["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
    }

    /// The pods it runs when settled: its replicas, or its nodes.
    fn size(&self) -> i32;

    /// The hashes of the update revision (the template new pods are made from) and of the
    /// current one (what the pods ran before the update), once they can be told.
    fn revisions(&self) -> Option<(String, String)>;

    /// The counts, with `updated` the pods on `pod_hash`; `revisions` as [`Self::revisions`].
    fn counts(&self, pod_hash: &str, revisions: Option<(&str, &str)>) -> Counts;

    /// Whether every pod runs the update revision and is ready.
    fn all_updated(&self) -> bool;

    /// Moves `target` of the pods onto the update revision `update` (records what to write);
    /// whether that many run it and are ready.
    fn advance(&mut self, update: &str, target: Target) -> bool;

    /// What a step of `target` waits for, in words.
    fn waiting_for(&self, target: Target) -> String;

    /// Once every pod runs the current revision, what is to be tidied (a StatefulSet's
    /// partition closed); whether they do.
    fn settle(&mut self) -> bool;

    /// An abort, once the stable template `stable` is back: brings the pods of the aborted
    /// revision back to it. Whether every pod runs it.
    fn roll_back(
        &mut self,
        aborted: &str,
        stable: &str,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) -> bool;

    /// The template the object has now (`spec.template`).
    fn template(&self) -> &Value {
        &self.object()["spec"]["template"]
    }

    /// Records that the template of revision `hash` goes back into the object (an abort).
    fn restore_template(&mut self, template: Value, hash: String);

    /// The plan's writes of what was recorded.
    fn write(&mut self, plan: &mut Plan, events: &mut Vec<Event>);
}
