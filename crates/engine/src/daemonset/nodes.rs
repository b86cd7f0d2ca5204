//! Which nodes of a DaemonSet run which revision, and which old pods to delete next. Pure: the
//! pods as read go in, the pods to delete come out; the same function serves an update (toward
//! the update revision, as far as the step asks) and an abort (toward the stable revision, on
//! every node).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::replicas::{DEFAULT_MAX_UNAVAILABLE, InvalidIntOrPercent, scaled_value};

/// A DaemonSet's pod, as much of it as the node arithmetic needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePod {
    /// `spec.nodeName`.
    pub node: String,
    pub name: String,
    /// The pod's uid: an eviction is conditional on it, so a pod replaced meanwhile stays.
    pub uid: Option<String>,
    /// The `controller-revision-hash` label: the revision the pod was created from.
    pub revision: String,
    pub ready: bool,
    /// Deleted and not gone yet: the node's next pod comes once it is.
    pub terminating: bool,
}

/// The nodes at `weight` percent of `nodes`, rounded up: any weight above zero updates at least
/// one node, and a step never stops short of its share.
pub fn nodes_for_weight(nodes: i32, weight: i32) -> i32 {
    let nodes = i64::from(nodes.max(0));
    let weight = i64::from(weight.clamp(0, 100));
    // Within 0..=nodes, which came from an i32.
    i32::try_from((nodes * weight + 99) / 100).unwrap_or(0)
}

/// How many nodes may be without a ready pod at once: the canary's `maxUnavailable` (25% when
/// unset, as for a ReplicaSet canary) of the node count, rounded down as Kubernetes rounds it,
/// and at least one, so that an update can always move.
pub fn node_budget(
    nodes: i32,
    max_unavailable: Option<&IntOrString>,
) -> Result<i32, InvalidIntOrPercent> {
    let default = IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into());
    let budget = scaled_value(max_unavailable.unwrap_or(&default), nodes.max(0), false)?;
    Ok(budget.max(1))
}

/// What the nodes run, against one revision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounts {
    /// Nodes with a pod.
    pub nodes: i32,
    /// Nodes whose live pod runs the revision.
    pub on_revision: i32,
    /// Of those, the nodes whose pod is ready.
    pub ready_on_revision: i32,
    /// Nodes whose only pods are terminating: their next pod is on its way.
    pub replacing: i32,
    /// Nodes without a ready live pod.
    pub unavailable: i32,
}

/// Each node's live (not terminating) pod, if it has one, in node name order; a DaemonSet
/// runs one pod per node, and a terminating one beside it is on its way out.
fn nodes(pods: &[NodePod]) -> Vec<Option<&NodePod>> {
    let mut by_node: std::collections::BTreeMap<&str, Option<&NodePod>> = Default::default();
    for pod in pods {
        let live = by_node.entry(pod.node.as_str()).or_default();
        if !pod.terminating && live.is_none() {
            *live = Some(pod);
        }
    }
    by_node.into_values().collect()
}

/// The nodes counted against `revision`.
pub fn counts(pods: &[NodePod], revision: &str) -> NodeCounts {
    let mut counts = NodeCounts::default();
    for live in nodes(pods) {
        counts.nodes += 1;
        match live {
            None => {
                counts.replacing += 1;
                counts.unavailable += 1;
            }
            Some(pod) => {
                if pod.revision == revision {
                    counts.on_revision += 1;
                    counts.ready_on_revision += i32::from(pod.ready);
                }
                counts.unavailable += i32::from(!pod.ready);
            }
        }
    }
    counts
}

/// The old pods to delete now so that `target` nodes come to run `revision` (the DaemonSet's
/// current template, from which each node's next pod is made), with at most `budget` nodes
/// without a ready pod at once. Nodes whose pod is not ready go first (nothing is lost there,
/// and deleting them costs nothing of the budget), then by node name, so that a step is
/// repeatable and the next node can be named. Nodes already replacing their pod count toward
/// the target: their next pod is made from the current template too. So do the `absent`
/// nodes, those the DaemonSet wants a pod on that have none at all (an old pod gone, its
/// successor not made yet; a node that just joined), which are also down.
pub fn next_deletions<'a>(
    pods: &'a [NodePod],
    revision: &str,
    target: i32,
    budget: i32,
    absent: i32,
) -> Vec<&'a NodePod> {
    let now = counts(pods, revision);
    let absent = absent.max(0);
    let mut needed = target - now.on_revision - now.replacing - absent;
    let mut unavailable = now.unavailable + absent;
    let mut old: Vec<&NodePod> = nodes(pods)
        .into_iter()
        .filter_map(|live| live.filter(|pod| pod.revision != revision))
        .collect();
    // Not ready first; stable by node name within each (the map gave them in name order).
    old.sort_by_key(|pod| pod.ready);
    let mut chosen = Vec::new();
    for pod in old {
        if needed <= 0 {
            break;
        }
        if pod.ready {
            if unavailable >= budget {
                break;
            }
            unavailable += 1;
        }
        needed -= 1;
        chosen.push(pod);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, revision: &str, ready: bool) -> NodePod {
        NodePod {
            node: node.into(),
            name: format!("agent-{node}-{revision}"),
            uid: None,
            revision: revision.into(),
            ready,
            terminating: false,
        }
    }

    fn fleet(n: usize, revision: &str) -> Vec<NodePod> {
        (0..n)
            .map(|i| pod(&format!("node-{i:02}"), revision, true))
            .collect()
    }

    fn nodes_of(pods: &[&NodePod]) -> Vec<String> {
        pods.iter().map(|p| p.node.clone()).collect()
    }

    #[test]
    fn a_weight_is_a_share_of_the_nodes_rounded_up() {
        assert_eq!(nodes_for_weight(10, 25), 3);
        assert_eq!(nodes_for_weight(10, 0), 0);
        assert_eq!(nodes_for_weight(10, 1), 1);
        assert_eq!(nodes_for_weight(10, 100), 10);
        assert_eq!(nodes_for_weight(3, 50), 2);
        assert_eq!(nodes_for_weight(0, 50), 0);
        assert_eq!(nodes_for_weight(4, 150), 4, "clamped to every node");
    }

    #[test]
    fn the_budget_is_max_unavailable_of_the_nodes_and_never_zero() {
        assert_eq!(node_budget(10, None), Ok(2));
        assert_eq!(node_budget(3, None), Ok(1));
        assert_eq!(node_budget(10, Some(&IntOrString::Int(4))), Ok(4));
        assert_eq!(
            node_budget(10, Some(&IntOrString::String("50%".into()))),
            Ok(5)
        );
        assert_eq!(node_budget(10, Some(&IntOrString::Int(0))), Ok(1));
        assert!(node_budget(10, Some(&IntOrString::String("some".into()))).is_err());
    }

    #[test]
    fn a_step_deletes_ready_old_pods_within_the_budget_by_node_name() {
        let pods = fleet(10, "old");
        assert_eq!(
            nodes_of(&next_deletions(&pods, "new", 3, 2, 0)),
            ["node-00", "node-01"]
        );
    }

    #[test]
    fn old_pods_that_are_not_ready_go_first_and_cost_no_budget() {
        let mut pods = fleet(10, "old");
        pods[7].ready = false;
        assert_eq!(
            nodes_of(&next_deletions(&pods, "new", 3, 2, 0)),
            ["node-07", "node-00"],
            "node-07 was already down: one ready node more makes two down"
        );
    }

    #[test]
    fn nodes_starting_their_new_pod_hold_the_budget() {
        let mut pods = fleet(10, "old");
        pods[0] = pod("node-00", "new", false);
        pods[1] = pod("node-01", "new", false);
        assert!(next_deletions(&pods, "new", 5, 2, 0).is_empty());
        pods[0].ready = true;
        assert_eq!(
            nodes_of(&next_deletions(&pods, "new", 5, 2, 0)),
            ["node-02"]
        );
    }

    #[test]
    fn a_node_replacing_its_pod_counts_toward_the_target() {
        let mut pods = fleet(4, "old");
        pods[0].terminating = true;
        let counts = counts(&pods, "new");
        assert_eq!((counts.replacing, counts.unavailable), (1, 1));
        // Target 2: node-00 comes back on the current template, one more is needed.
        assert_eq!(
            nodes_of(&next_deletions(&pods, "new", 2, 2, 0)),
            ["node-01"]
        );
    }

    #[test]
    fn a_terminating_old_pod_beside_its_successor_is_the_successor() {
        let mut pods = fleet(3, "old");
        pods[0].terminating = true;
        pods.push(pod("node-00", "new", true));
        let counts = counts(&pods, "new");
        assert_eq!(
            (counts.nodes, counts.on_revision, counts.ready_on_revision),
            (3, 1, 1)
        );
        assert_eq!(counts.replacing, 0);
        assert!(next_deletions(&pods, "new", 1, 1, 0).is_empty());
    }

    #[test]
    fn a_node_whose_pod_is_gone_counts_toward_the_target_and_the_budget() {
        // node-00's old pod is gone, its successor not made yet: it is not among the pods.
        let pods = fleet(4, "old")[1..].to_vec();
        assert!(next_deletions(&pods, "new", 1, 2, 1).is_empty());
        assert_eq!(
            nodes_of(&next_deletions(&pods, "new", 2, 2, 1)),
            ["node-01"]
        );
        assert!(
            next_deletions(&pods, "new", 3, 1, 1).is_empty(),
            "the absent node takes the budget of one"
        );
    }

    #[test]
    fn nothing_is_deleted_once_the_target_is_reached() {
        let mut pods = fleet(4, "old");
        pods[0] = pod("node-00", "new", true);
        assert!(next_deletions(&pods, "new", 1, 4, 0).is_empty());
        assert!(next_deletions(&pods, "new", 0, 4, 0).is_empty());
    }

    #[test]
    fn an_abort_brings_every_updated_node_back_within_the_budget() {
        let mut pods = fleet(6, "stable");
        for i in [1, 3, 4] {
            pods[i] = pod(&format!("node-{i:02}"), "canary", true);
        }
        pods[4].ready = false;
        let all = counts(&pods, "stable").nodes;
        assert_eq!(
            nodes_of(&next_deletions(&pods, "stable", all, 2, 0)),
            ["node-04", "node-01"],
            "the canary pod that is down first, then the others within the budget"
        );
        // node-04 is down already and takes the whole budget of one: it alone goes now.
        assert_eq!(
            nodes_of(&next_deletions(&pods, "stable", all, 1, 0)),
            ["node-04"]
        );
    }
}
