//! The DaemonSet as the engine reads it: its update strategy, its node count, the revision its
//! current template is, and its pods as the node arithmetic counts them. Kept as the JSON the
//! API server returned, as for StatefulSets, so that a write carries every field Sluice does
//! not know of.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::NodePod;
use crate::controller_revision::{REVISION_LABEL, pod_is_ready, revision_number};
use crate::statefulset::revision_hash;

/// Typed reads of the DaemonSet's JSON; absent fields read as Kubernetes defaults them.
#[derive(Debug, Clone, Copy)]
pub struct Ds<'a>(pub &'a Value);

fn int(v: &Value) -> Option<i32> {
    v.as_i64().and_then(|n| i32::try_from(n).ok())
}

impl<'a> Ds<'a> {
    pub fn name(self) -> &'a str {
        self.0["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// `spec.updateStrategy.type`, `RollingUpdate` when unset (the API server's default).
    /// Only `OnDelete` leaves the choice of nodes to Sluice.
    pub fn strategy_type(self) -> &'a str {
        self.0["spec"]["updateStrategy"]["type"]
            .as_str()
            .unwrap_or("RollingUpdate")
    }

    /// `status.desiredNumberScheduled`: the nodes that should run a pod of the DaemonSet.
    pub fn desired_nodes(self) -> i32 {
        self.status_count("desiredNumberScheduled")
    }

    fn status_count(self, field: &str) -> i32 {
        int(&self.0["status"][field]).unwrap_or(0).max(0)
    }

    /// `status.currentNumberScheduled`: nodes running a pod of the DaemonSet that should.
    pub fn scheduled(self) -> i32 {
        self.status_count("currentNumberScheduled")
    }

    /// `status.numberReady`.
    pub fn ready(self) -> i32 {
        self.status_count("numberReady")
    }

    /// `status.numberAvailable`.
    pub fn available(self) -> i32 {
        self.status_count("numberAvailable")
    }

    /// Whether the DaemonSet controller has seen the current spec (its counts and its
    /// newest ControllerRevision are then the current template's).
    pub fn status_is_current(self) -> bool {
        let generation = self.0["metadata"]["generation"].as_i64().unwrap_or(0);
        self.0["status"]["observedGeneration"].as_i64().unwrap_or(0) >= generation
    }
}

/// The hash of the DaemonSet's update revision: its ControllerRevision with the highest
/// number. The DaemonSet controller makes the current template's revision the newest, also
/// when the template goes back to an older one (the old revision is renumbered), so the
/// highest number is the template new pods are made from. `None` before the controller has
/// written any.
pub fn update_revision<'a>(daemon_set: &str, revisions: &'a [Value]) -> Option<&'a str> {
    let prefix = format!("{daemon_set}-");
    revisions
        .iter()
        .filter_map(|r| {
            let name = r["metadata"]["name"].as_str()?;
            name.starts_with(&prefix)
                .then(|| (revision_number(Some(r)), revision_hash(daemon_set, name)))
        })
        .max_by_key(|(number, _)| *number)
        .map(|(_, hash)| hash)
}

/// A pod of the DaemonSet as the node arithmetic counts it: its node, its revision, whether
/// it is ready or going. The node is `spec.nodeName` once the pod is bound, and before that
/// the node the DaemonSet controller pinned it to (a required node affinity on the node's
/// `metadata.name`). `None` for a pod with neither, or without the revision label: not a pod
/// the DaemonSet controller made.
pub fn node_pod(pod: &Pod) -> Option<NodePod> {
    let spec = pod.spec.as_ref()?;
    let node = spec
        .node_name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| pinned_node(pod))?;
    let revision = pod.metadata.labels.as_ref()?.get(REVISION_LABEL)?.clone();
    Some(NodePod {
        node,
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone(),
        revision,
        ready: pod_is_ready(pod),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    })
}

/// The node of a `matchFields` term on `metadata.name` in the pod's required node affinity:
/// how the DaemonSet controller places a pod the scheduler has not bound yet.
fn pinned_node(pod: &Pod) -> Option<String> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name" && f.operator == "In")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn revision(name: &str, number: i64) -> Value {
        json!({"metadata": {"name": name}, "revision": number})
    }

    #[test]
    fn the_update_revision_is_the_highest_numbered_of_the_daemon_sets() {
        let revisions = [
            revision("agent-aaa", 1),
            revision("agent-ccc", 3),
            revision("agent-bbb", 2),
            revision("other-zzz", 9),
        ];
        assert_eq!(update_revision("agent", &revisions), Some("ccc"));
        assert_eq!(update_revision("agent", &[]), None);
        // Back to the first template: the controller renumbers its revision the newest.
        let rolled_back = [revision("agent-aaa", 4), revision("agent-ccc", 3)];
        assert_eq!(update_revision("agent", &rolled_back), Some("aaa"));
    }

    #[test]
    fn absent_fields_read_as_kubernetes_defaults_them() {
        let object = json!({"metadata": {"name": "agent", "generation": 2},
            "status": {"observedGeneration": 1}});
        let ds = Ds(&object);
        assert_eq!(ds.strategy_type(), "RollingUpdate");
        assert_eq!(ds.desired_nodes(), 0);
        assert!(!ds.status_is_current());
        let object = json!({"metadata": {"name": "agent", "generation": 2},
            "spec": {"updateStrategy": {"type": "OnDelete"}},
            "status": {"observedGeneration": 2, "desiredNumberScheduled": 5}});
        let ds = Ds(&object);
        assert_eq!((ds.name(), ds.strategy_type()), ("agent", "OnDelete"));
        assert_eq!(ds.desired_nodes(), 5);
        assert!(ds.status_is_current());
    }

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_pod_counts_on_its_bound_node_or_the_node_it_is_pinned_to() {
        let bound = pod(json!({
            "metadata": {"name": "agent-1", "labels": {"controller-revision-hash": "aaa"}},
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }));
        assert_eq!(
            node_pod(&bound),
            Some(NodePod {
                node: "node-1".into(),
                name: "agent-1".into(),
                uid: None,
                revision: "aaa".into(),
                ready: true,
                terminating: false,
            })
        );
        let pinned = pod(json!({
            "metadata": {"name": "agent-2", "labels": {"controller-revision-hash": "bbb"},
                "deletionTimestamp": "2026-11-30T00:00:00Z"},
            "spec": {"containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In",
                        "values": ["node-2"]}]}]}}}}
        }));
        let read = node_pod(&pinned).unwrap();
        assert_eq!(read.node, "node-2");
        assert!(!read.ready && read.terminating);
    }

    #[test]
    fn a_pod_without_a_node_or_a_revision_is_not_counted() {
        let unplaced = pod(json!({
            "metadata": {"name": "x", "labels": {"controller-revision-hash": "aaa"}},
            "spec": {"containers": []}
        }));
        assert_eq!(node_pod(&unplaced), None);
        let unlabelled = pod(json!({
            "metadata": {"name": "y"},
            "spec": {"nodeName": "node-1", "containers": []}
        }));
        assert_eq!(node_pod(&unlabelled), None);
    }
}
