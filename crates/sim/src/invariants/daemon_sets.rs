//! The checks of Rollouts driving a DaemonSet (`rollouts.sluice.dev/daemonset`): no more
//! nodes run the update revision than the step the controller is at allows, and at
//! quiescence every node runs the revision the verdict chose, ready.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::rollout::{CanaryStep, RolloutStatus};
use sluice_engine::daemonset::{daemon_set_name, nodes_for_weight};

use super::Expect;
use super::analysis::Found;
use crate::api_model::{ApiServer, Kind, name_of};
use crate::daemon_sets::{node_of, pods_of, revision_of, update_revision};
use crate::kubelet::{image_of_template, ready_since};

/// While an update is in progress, the nodes on its revision are at most what its step allows:
/// the largest share (`setWeight`, rounded up) or node count (`setCanaryScale.replicas`) of
/// the steps up to the one the controller is at, every node past the last step. A node that
/// joined since the update began is not counted: its first pod is made from the current
/// template, which nobody can hold back.
pub const NODES_WITHIN_STEP: &str = "daemonset-nodes-within-the-step";
/// At quiescence every node runs one ready pod of the DaemonSet's update revision, which is
/// the Rollout's stable one and the image the inputs dictate (the new one after a completed
/// update, the old one after an abort).
pub const SETTLED: &str = "daemonset-settled-on-the-verdict";

/// The update a Rollout's controller last decided on, as far as the node count is concerned.
#[derive(Debug, Clone)]
struct Decided {
    /// `status.currentPodHash`: the update revision's hash.
    hash: String,
    /// The furthest step decided for this update. The furthest, not the latest: the nodes of
    /// an earlier step stay updated, and a controller that lost its status write (a crash, a
    /// lost reply) comes back to a step it had already moved past.
    step: i32,
    /// Aborted, or promoted in full: every node may move (back to the stable revision, or on
    /// to the update's), so there is no step to hold them to.
    unbounded: bool,
    /// Nodes already on the revision, or without a pod (theirs comes from the current
    /// template), when the controller first decided on it: pods evicted for an earlier update
    /// whose replacements were made from this template, after the user changed it. That
    /// earlier update's step allowed them.
    carried: i32,
    /// The nodes there were then: a node not among them joined during the update, and a
    /// share is of the nodes the update began with, when more than are left (a node that
    /// left takes its pod, updated or not, with it).
    nodes: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub struct DaemonSetChecks {
    decided: BTreeMap<String, Decided>,
}

/// The Rollouts driving a DaemonSet, with it and the names of the nodes.
fn driving(api: &ApiServer) -> Vec<(Rollout, Value)> {
    api.list(Kind::Rollout)
        .into_iter()
        .filter_map(|ro| serde_json::from_value::<Rollout>(ro).ok())
        .filter_map(|ro| {
            let ds = api.get(Kind::DaemonSet, daemon_set_name(&ro)?)?.clone();
            Some((ro, ds))
        })
        .collect()
}

fn nodes(api: &ApiServer) -> BTreeSet<String> {
    api.list(Kind::Node)
        .iter()
        .map(|n| name_of(n).to_string())
        .collect()
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Of `nodes`, those whose pod runs `revision`, and those without a pod.
fn on_revision(
    api: &ApiServer,
    ds: &Value,
    revision: &str,
    nodes: &BTreeSet<String>,
) -> (i32, i32) {
    let pods = pods_of(api, ds);
    let on = nodes
        .iter()
        .filter(|n| {
            pods.iter()
                .any(|p| node_of(p) == Some(n.as_str()) && revision_of(p) == Some(revision))
        })
        .count();
    let bare = nodes
        .iter()
        .filter(|n| !pods.iter().any(|p| node_of(p) == Some(n.as_str())))
        .count();
    (count(on), count(bare))
}

/// The nodes a step moves onto the update revision, if it moves any.
fn target(step: &CanaryStep, nodes: i32) -> Option<i32> {
    if let Some(weight) = step.set_weight {
        return Some(nodes_for_weight(nodes, weight));
    }
    let replicas = step.set_canary_scale.as_ref()?.replicas?;
    Some(replicas.clamp(0, nodes))
}

/// The nodes the update may have moved by step `index`: the most any step up to it asks for
/// (a later step asking for fewer moves none back), every node past the last step.
fn allowance(ro: &Rollout, index: i32, nodes: i32) -> i32 {
    let Some(canary) = ro.spec.strategy.as_ref().and_then(|s| s.canary.as_ref()) else {
        return nodes;
    };
    let steps = sluice_engine::steps::steps(canary);
    let Ok(index) = usize::try_from(index) else {
        return 0;
    };
    if index >= steps.len() {
        return nodes;
    }
    steps[..=index]
        .iter()
        .filter_map(|s| target(s, nodes))
        .max()
        .unwrap_or(0)
}

impl DaemonSetChecks {
    /// A reconcile of `rollout` decided on `status`; its writes (evictions) come after.
    pub fn on_decision(&mut self, api: &ApiServer, rollout: &str, status: &RolloutStatus) {
        let Some(ds) = api
            .get(Kind::Rollout, rollout)
            .and_then(|ro| serde_json::from_value::<Rollout>(ro.clone()).ok())
            .and_then(|ro| api.get(Kind::DaemonSet, daemon_set_name(&ro)?).cloned())
        else {
            return;
        };
        let Some(hash) = status.current_pod_hash.clone() else {
            return;
        };
        let step = status.current_step_index.unwrap_or(0);
        let unbounded = status.abort == Some(true) || status.promote_full == Some(true);
        match self.decided.get_mut(rollout) {
            Some(d) if d.hash == hash => {
                d.step = d.step.max(step);
                d.unbounded = unbounded;
            }
            _ => {
                let nodes = nodes(api);
                let (on, bare) = on_revision(api, &ds, &hash, &nodes);
                let decided = Decided {
                    hash,
                    step,
                    unbounded,
                    carried: on + bare,
                    nodes,
                };
                self.decided.insert(rollout.to_string(), decided);
            }
        }
    }

    pub fn after_change(&self, api: &ApiServer) -> Found {
        let mut found = Found::new();
        for (ro, ds) in driving(api) {
            let name = name_of(&ds);
            let Some(decided) = ro.metadata.name.as_ref().and_then(|n| self.decided.get(n)) else {
                continue;
            };
            let Some(update) = update_revision(api, &ds) else {
                continue;
            };
            let stable = ro.status.as_ref().and_then(|s| s.stable_rs.as_deref());
            // Only an update in progress is held to a step: a template back on the stable
            // revision (an abort's, or the user's) brings every node back, and a revision the
            // controller has not decided on yet has not been moved toward (what is on it was
            // moved for the update before, and judged then).
            if decided.unbounded || decided.hash != update || stable == Some(update.as_str()) {
                continue;
            }
            let now = nodes(api);
            let nodes = count(now.len().max(decided.nodes.len()));
            let allowed = allowance(&ro, decided.step, nodes).max(decided.carried);
            let began_with: BTreeSet<String> = now.intersection(&decided.nodes).cloned().collect();
            let (on, _) = on_revision(api, &ds, &update, &began_with);
            if on > allowed {
                found.push((
                    NODES_WITHIN_STEP,
                    format!(
                        "daemonset/{name}: {on} of {nodes} nodes on revision {update}, above the \
                         {allowed} that step {} allows",
                        decided.step
                    ),
                ));
            }
        }
        found
    }
}

pub fn at_quiescence(api: &ApiServer, expect: &Expect) -> Found {
    let mut found = Found::new();
    for (ro, ds) in driving(api) {
        let name = name_of(&ds);
        let update = update_revision(api, &ds).unwrap_or_default();
        let pods = pods_of(api, &ds);
        let mut off = Vec::new();
        for node in nodes(api) {
            let on_node: Vec<&Value> = pods
                .iter()
                .filter(|p| node_of(p) == Some(node.as_str()))
                .collect();
            let settled = matches!(on_node.as_slice(), [pod]
                if revision_of(pod) == Some(update.as_str()) && ready_since(pod).is_some());
            if !settled {
                let what: Vec<String> = on_node
                    .iter()
                    .map(|p| {
                        let ready = if ready_since(p).is_some() {
                            ""
                        } else {
                            " not ready"
                        };
                        format!("{}{ready}", revision_of(p).unwrap_or("?"))
                    })
                    .collect();
                off.push(format!("{node}: {what:?}"));
            }
        }
        let image = ds
            .pointer("/spec/template")
            .map(image_of_template)
            .unwrap_or_default();
        let stable = ro
            .status
            .as_ref()
            .and_then(|s| s.stable_rs.as_deref())
            .unwrap_or_default();
        let generation = ds.pointer("/metadata/generation").and_then(Value::as_i64);
        let observed = ds
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64);
        if !off.is_empty()
            || image != expect.stable_image
            || stable != update
            || generation != observed
        {
            found.push((
                SETTLED,
                format!(
                    "daemonset/{name}: update revision {update}, image {image} (expected {}), \
                     the Rollout's stable {stable}, generation {generation:?} observed \
                     {observed:?}, nodes not on it ready: {off:?}",
                    expect.stable_image
                ),
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rollout(steps: Value) -> Rollout {
        serde_json::from_value(json!({
            "metadata": {"name": "demo"},
            "spec": {"strategy": {"canary": {"steps": steps}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_step_allows_the_most_any_step_up_to_it_asks_for() {
        let ro = rollout(json!([
            {"setWeight": 25}, {"pause": {}}, {"setCanaryScale": {"replicas": 3}},
            {"setWeight": 50}, {"pause": {"duration": "5s"}}
        ]));
        let at = |index| allowance(&ro, index, 5);
        assert_eq!(at(0), 2, "25% of 5 nodes, rounded up");
        assert_eq!(at(1), 2);
        assert_eq!(at(2), 3);
        assert_eq!(at(3), 3, "50% is 3 of 5 too");
        assert_eq!(at(5), 5, "past the last step: every node");
        let paused_first = rollout(json!([{"pause": {}}, {"setWeight": 10}]));
        assert_eq!(allowance(&paused_first, 0, 6), 0);
        assert_eq!(allowance(&paused_first, 1, 6), 1);
    }
}
