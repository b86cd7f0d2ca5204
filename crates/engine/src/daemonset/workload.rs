//! The DaemonSet as a driven workload: its `OnDelete` strategy leaves each node's pod alone
//! until it is deleted, and the DaemonSet controller then makes the node's next pod from the
//! current template. A step evicts old pods, `maxUnavailable` of the nodes at a time, until
//! its share of the nodes runs the update revision; an abort puts the stable template back
//! and evicts the updated nodes' pods the same way, so they come back on the stable revision.
//! Sluice never writes the update strategy: the user's manifest names `OnDelete`.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use sluice_api::rollout::Rollout;

use super::model::{Ds, node_pod, update_revision};
use super::nodes::{NodePod, counts, next_deletions, node_budget, nodes_for_weight};
use super::{DaemonSetObserved, daemon_set_name};
use crate::driven::{Checked, Counts, Driven, Target, check_spec};
use crate::plan::{Action, EVICTED_DAEMON_SET_POD, Event, Plan, UPDATED_DAEMON_SET};

/// A DaemonSet a Rollout drives, as read, with what this reconcile changes of it.
pub(super) struct DsWorkload<'a> {
    ds: Ds<'a>,
    revisions: &'a [Value],
    /// Its pods (those it controls), as the node arithmetic counts them.
    pods: Vec<NodePod>,
    /// How many nodes may be without a ready pod at once.
    budget: i32,
    /// The pods to evict, with the revision their nodes are to run.
    evictions: Vec<(NodePod, String)>,
    /// The stable revision's template, with its hash (an abort).
    template: Option<(Value, String)>,
}

/// What this version can drive: a valid spec and an existing DaemonSet with the `OnDelete`
/// strategy. `Err` is the InvalidSpec message.
pub(super) fn check<'a>(
    ro: &'a Rollout,
    observed: Option<&'a DaemonSetObserved>,
    pods: &'a [Pod],
) -> Checked<'a, DsWorkload<'a>> {
    let canary = check_spec(ro, DsWorkload::KIND)?;
    let name = daemon_set_name(ro).unwrap_or_default();
    let Some(object) = observed.and_then(|o| o.daemon_set.as_ref()) else {
        return Err(format!("daemonsets.apps \"{name}\" not found"));
    };
    let ds = Ds(object);
    if ds.strategy_type() != "OnDelete" {
        return Err(format!(
            "DaemonSet \"{name}\": spec.updateStrategy.type: Unsupported value: \"{}\": \
             supported values: \"OnDelete\" (with {0} the DaemonSet controller updates every \
             node itself, and no step could hold it)",
            ds.strategy_type()
        ));
    }
    // An unreadable maxUnavailable is reported by validation; one node at a time meanwhile.
    let budget = node_budget(ds.desired_nodes(), canary.max_unavailable.as_ref()).unwrap_or(1);
    let uid = object["metadata"]["uid"].as_str();
    let pods = pods
        .iter()
        .filter(|pod| {
            pod.metadata.owner_references.iter().flatten().any(|o| {
                o.controller == Some(true) && o.kind == "DaemonSet" && Some(o.uid.as_str()) == uid
            })
        })
        .filter_map(node_pod)
        .collect();
    let revisions = observed.map_or(&[][..], |o| o.revisions.as_slice());
    let workload = DsWorkload {
        ds,
        revisions,
        pods,
        budget,
        evictions: Vec::new(),
        template: None,
    };
    Ok((workload, revisions, canary))
}

impl DsWorkload<'_> {
    /// The update revision, once the DaemonSet controller has caught up with the template
    /// (before that, its newest ControllerRevision may be the previous template's).
    fn update(&self) -> Option<&str> {
        if !self.ds.status_is_current() {
            return None;
        }
        update_revision(self.ds.name(), self.revisions)
    }

    fn wanted(&self, target: Target) -> i32 {
        let nodes = self.ds.desired_nodes();
        match target {
            Target::Weight(weight) => nodes_for_weight(nodes, weight),
            Target::Count(count) => count.clamp(0, nodes),
        }
    }

    /// Whether every node the DaemonSet wants runs `revision` with a ready pod.
    fn all_on(&self, revision: &str) -> bool {
        let c = counts(&self.pods, revision);
        self.ds.status_is_current()
            && c.nodes >= self.ds.desired_nodes()
            && c.replacing == 0
            && c.ready_on_revision == c.nodes
    }

    /// Records the evictions that bring `target` nodes onto `revision` within the budget;
    /// once per reconcile (the step machine asks again after each step it completes). Whether
    /// that many nodes run it with a ready pod and nothing is left to evict.
    fn move_toward(&mut self, revision: &str, target: i32) -> bool {
        if !self.evictions.is_empty() {
            return false;
        }
        // Nodes without any pod (the DaemonSet wants more than have one): an evicted pod gone
        // before its successor is made. Not counting them evicted a second node meanwhile.
        let absent = self.ds.desired_nodes() - counts(&self.pods, revision).nodes;
        let next: Vec<NodePod> = next_deletions(&self.pods, revision, target, self.budget, absent)
            .into_iter()
            .cloned()
            .collect();
        let reached = next.is_empty() && counts(&self.pods, revision).ready_on_revision >= target;
        self.evictions
            .extend(next.into_iter().map(|pod| (pod, revision.to_string())));
        reached
    }
}

impl Driven for DsWorkload<'_> {
    const KIND: &'static str = "DaemonSet";

    fn object(&self) -> &Value {
        self.ds.0
    }

    fn size(&self) -> i32 {
        self.ds.desired_nodes()
    }

    /// The update revision, and the revision most nodes not on it run (the update's own when
    /// every node runs it, or no node runs a pod).
    fn revisions(&self) -> Option<(String, String)> {
        let update = self.update()?;
        let mut others: std::collections::BTreeMap<&str, usize> = Default::default();
        for pod in self
            .pods
            .iter()
            .filter(|p| !p.terminating && p.revision != update)
        {
            *others.entry(pod.revision.as_str()).or_default() += 1;
        }
        let current = others
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map_or(update, |(revision, _)| revision);
        Some((update.to_string(), current.to_string()))
    }

    fn counts(&self, pod_hash: &str, _revisions: Option<(&str, &str)>) -> Counts {
        let c = counts(&self.pods, pod_hash);
        Counts {
            replicas: self.ds.scheduled(),
            ready: self.ds.ready(),
            available: self.ds.available(),
            updated: if pod_hash.is_empty() {
                0
            } else {
                c.on_revision
            },
        }
    }

    fn all_updated(&self) -> bool {
        self.update().is_some_and(|update| self.all_on(update))
    }

    fn advance(&mut self, update: &str, target: Target) -> bool {
        if !self.ds.status_is_current() {
            return false;
        }
        let wanted = self.wanted(target);
        self.move_toward(update, wanted)
    }

    fn waiting_for(&self, target: Target) -> String {
        format!(
            "DaemonSet {} ({} of {} nodes on the update revision)",
            self.ds.name(),
            self.wanted(target),
            self.ds.desired_nodes()
        )
    }

    /// Every node onto the update revision: after a rollback (the template put back to the
    /// stable revision's by its user) the nodes updated meanwhile come back too.
    fn settle(&mut self) -> bool {
        let Some(update) = self.update().map(str::to_string) else {
            return false;
        };
        if self.all_on(&update) {
            return true;
        }
        self.move_toward(&update, self.ds.desired_nodes());
        false
    }

    fn roll_back(
        &mut self,
        _aborted: &str,
        stable: &str,
        _plan: &mut Plan,
        _events: &mut Vec<Event>,
    ) -> bool {
        if self.all_on(stable) {
            return true;
        }
        if self.update() == Some(stable) {
            self.move_toward(stable, self.ds.desired_nodes());
        }
        false
    }

    fn restore_template(&mut self, template: Value, hash: String) {
        self.template = Some((template, hash));
    }

    /// The template write first (an abort), then the evictions, each conditional on the
    /// pod's uid so that a pod replaced meanwhile is left alone.
    fn write(&mut self, plan: &mut Plan, events: &mut Vec<Event>) {
        let name = self.ds.name().to_string();
        if let Some((template, hash)) = self.template.take() {
            let mut object = self.ds.0.clone();
            // The status is not the Rollout's to write, and the API server ignores it here.
            if let Some(fields) = object.as_object_mut() {
                fields.remove("status");
            }
            object["spec"]["template"] = template;
            events.push(Event::normal(
                UPDATED_DAEMON_SET,
                format!("Restored the template of DaemonSet {name} to revision {hash}"),
            ));
            plan.actions.push(Action::UpdateDaemonSet {
                name: name.clone(),
                object: Box::new(object),
            });
        }
        for (pod, revision) in std::mem::take(&mut self.evictions) {
            events.push(Event::normal(
                EVICTED_DAEMON_SET_POD,
                format!(
                    "Evicted pod {} on node {} (revision {}): the DaemonSet {name} makes the \
                     node's next pod from revision {revision}",
                    pod.name, pod.node, pod.revision
                ),
            ));
            plan.actions.push(Action::EvictPod {
                name: pod.name,
                uid: pod.uid,
            });
        }
    }
}
