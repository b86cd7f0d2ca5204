//! For a Rollout driving a DaemonSet: which node runs which revision, and which nodes the
//! controller moves next (the evictions its engine decides on now, read from the same plan the
//! waits come from).

use k8s_openapi::api::core::v1::Pod;
use sluice_api::rollout::RolloutStatus;
use sluice_engine::daemonset::{NodePod, node_pod};
use sluice_engine::{Action, Plan};

/// The lines about the DaemonSet's nodes; empty when the Rollout drives none or it has no pods.
pub fn nodes_text(daemon_set: &str, status: &RolloutStatus, pods: &[Pod], plan: &Plan) -> String {
    let mut nodes: Vec<NodePod> = pods
        .iter()
        .filter_map(node_pod)
        .filter(|p| !p.terminating)
        .collect();
    if nodes.is_empty() {
        return String::new();
    }
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    let role = |revision: &str| {
        if status.current_pod_hash.as_deref() == Some(revision)
            && status.stable_rs.as_deref() != Some(revision)
        {
            " (update)"
        } else if status.stable_rs.as_deref() == Some(revision) {
            " (stable)"
        } else {
            ""
        }
    };
    let mut out = format!("DaemonSet {daemon_set:?}, by node:\n");
    for pod in &nodes {
        let ready = if pod.ready { "ready" } else { "not ready" };
        out.push_str(&format!(
            "  {}: revision {}{}, {ready}\n",
            pod.node,
            pod.revision,
            role(&pod.revision)
        ));
    }
    let next: Vec<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::EvictPod { name, .. } => nodes
                .iter()
                .find(|p| &p.name == name)
                .map(|p| p.node.as_str()),
            _ => None,
        })
        .collect();
    if !next.is_empty() {
        out.push_str(&format!(
            "Next: the pods of {} are evicted, and their nodes' next pods made from the DaemonSet's template.\n",
            next.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(node: &str, revision: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("agent-{node}"),
                         "labels": {"controller-revision-hash": revision}},
            "spec": {"nodeName": node, "containers": []},
            "status": {"conditions": [{"type": "Ready",
                                       "status": if ready { "True" } else { "False" }}]}
        }))
        .unwrap()
    }

    #[test]
    fn each_node_with_its_revision_and_the_next_ones() {
        let status = RolloutStatus {
            stable_rs: Some("a".into()),
            current_pod_hash: Some("b".into()),
            ..Default::default()
        };
        let pods = [
            pod("n2", "a", true),
            pod("n1", "b", false),
            pod("n3", "a", true),
        ];
        let plan = Plan {
            actions: vec![Action::EvictPod {
                name: "agent-n2".into(),
                uid: None,
            }],
            ..Default::default()
        };
        assert_eq!(
            nodes_text("agent", &status, &pods, &plan),
            "DaemonSet \"agent\", by node:\n  \
             n1: revision b (update), not ready\n  \
             n2: revision a (stable), ready\n  \
             n3: revision a (stable), ready\n\
             Next: the pods of n2 are evicted, and their nodes' next pods made from the DaemonSet's template.\n"
        );
        assert_eq!(nodes_text("agent", &status, &[], &plan), "");
    }
}
