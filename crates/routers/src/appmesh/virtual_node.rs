//! The VirtualNodes' pod selectors, pointed at the canary and stable ReplicaSets' pods.

use serde_json::{Map, Value};

use super::{NODE_UPDATED_REASON, NodeRole, name_of};
use crate::istio::{MANAGED_BY, POD_TEMPLATE_HASH};
use crate::{Desired, Edit, EditResult, RouterError};

/// Hash put in the stable VirtualNode's selector while there is no stable ReplicaSet.
pub const DEFAULT_STABLE_HASH: &str = "stable-hash";

/// Hash put in the canary VirtualNode's selector while the canary has no pods of its own (no
/// canary hash, or the same as the stable's), so that it selects no pod rather than the
/// stable's.
pub const DEFAULT_CANARY_HASH: &str = "canary-hash";

/// The hash the VirtualNode of `role` must select.
fn hash_for(role: NodeRole, desired: &Desired) -> &str {
    match role {
        NodeRole::Stable if desired.stable_hash.is_empty() => DEFAULT_STABLE_HASH,
        NodeRole::Stable => &desired.stable_hash,
        NodeRole::Canary
            if desired.canary_hash.is_empty() || desired.canary_hash == desired.stable_hash =>
        {
            DEFAULT_CANARY_HASH
        }
        NodeRole::Canary => &desired.canary_hash,
    }
}

/// The VirtualNode of `role` with `spec.podSelector.matchLabels.rollouts-pod-template-hash`
/// set to its hash (stable: `desired.stable_hash`, or `stable-hash` when empty; canary:
/// `desired.canary_hash`, or `canary-hash` when empty or equal to the stable hash) and the
/// `argo-rollouts.argoproj.io/managed-by-rollouts` annotation naming the Rollout; every other
/// field untouched, missing maps created. `None` when both are already so (Argo updates both
/// nodes on every reconcile, stable first; the engine keeps that order).
pub fn update_hash(node: &Value, role: NodeRole, desired: &Desired) -> EditResult {
    let hash = hash_for(role, desired);
    let mut object = node.clone();
    let annotations = child(&mut object, &["metadata", "annotations"])?;
    annotations.insert(MANAGED_BY.into(), desired.rollout.clone().into());
    let labels = child(&mut object, &["spec", "podSelector", "matchLabels"])?;
    labels.insert(POD_TEMPLATE_HASH.into(), hash.into());
    if object == *node {
        return Ok(None);
    }
    Ok(Some(Edit {
        object,
        event: (
            NODE_UPDATED_REASON,
            format!(
                "VirtualNode `{}` set to select pod template hash `{hash}`",
                name_of(node)
            ),
        ),
    }))
}

/// The map at `path`, created (also in place of a null) when absent.
fn child<'a>(
    object: &'a mut Value,
    path: &[&str],
) -> Result<&'a mut Map<String, Value>, RouterError> {
    let mut current = object;
    for (depth, key) in path.iter().enumerate() {
        let here = if depth == 0 {
            "VirtualNode".to_string()
        } else {
            format!("VirtualNode {}", path[..depth].join("."))
        };
        let fields = current
            .as_object_mut()
            .ok_or_else(|| RouterError::new(format!("{here} is not an object")))?;
        let entry = fields
            .entry(*key)
            .or_insert_with(|| Value::Object(Map::new()));
        if entry.is_null() {
            *entry = Value::Object(Map::new());
        }
        current = entry;
    }
    current
        .as_object_mut()
        .ok_or_else(|| RouterError::new(format!("VirtualNode {} is not an object", path.join("."))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::appmesh::fixtures::desired;

    /// `my-vn-canary` of `examples/appmesh/canary-service.yaml`.
    fn canary_node() -> Value {
        serde_saphyr::from_str(
            "
apiVersion: appmesh.k8s.aws/v1beta2
kind: VirtualNode
metadata:
  name: my-vn-canary
  namespace: argo-examples
spec:
  podSelector:
    matchLabels:
      app: my-app
      rollouts-pod-template-hash: canary-tbd
  listeners:
    - portMapping:
        port: 8080
        protocol: http
  serviceDiscovery:
    dns:
      hostname: my-svc-canary.argo-examples.svc.cluster.local
      responseType: ENDPOINTS
",
        )
        .unwrap()
    }

    #[test]
    fn hashes_per_role() {
        let with = |canary: &str, stable: &str| Desired {
            canary_hash: canary.into(),
            stable_hash: stable.into(),
            ..Desired::default()
        };
        let cases = [
            (with("c1", "s1"), "c1", "s1"),
            (with("", "s1"), "canary-hash", "s1"),
            (with("s1", "s1"), "canary-hash", "s1"),
            (with("c1", ""), "c1", "stable-hash"),
            (with("", ""), "canary-hash", "stable-hash"),
        ];
        for (d, canary, stable) in cases {
            assert_eq!(hash_for(NodeRole::Canary, &d), canary, "{d:?}");
            assert_eq!(hash_for(NodeRole::Stable, &d), stable, "{d:?}");
        }
    }

    #[test]
    fn selector_and_annotation() {
        let edit = update_hash(&canary_node(), NodeRole::Canary, &desired(0))
            .unwrap()
            .unwrap();
        let mut want = canary_node();
        want["metadata"]["annotations"] =
            json!({"argo-rollouts.argoproj.io/managed-by-rollouts": "my-rollout"});
        want["spec"]["podSelector"]["matchLabels"]["rollouts-pod-template-hash"] =
            json!("5d8f7c9b4");
        assert_eq!(edit.object, want);
        assert_eq!(
            edit.event,
            (
                "VirtualNodeUpdated",
                "VirtualNode `my-vn-canary` set to select pod template hash `5d8f7c9b4`"
                    .to_string()
            )
        );
        assert_eq!(
            update_hash(&edit.object, NodeRole::Canary, &desired(0)),
            Ok(None)
        );
        // The same node as the stable one gets the stable hash.
        let stable = update_hash(&edit.object, NodeRole::Stable, &desired(0))
            .unwrap()
            .unwrap();
        assert_eq!(
            stable.object["spec"]["podSelector"]["matchLabels"]["rollouts-pod-template-hash"],
            "6c5b8f7d9"
        );
    }

    #[test]
    fn missing_maps_are_created() {
        let node = json!({"metadata": {"name": "n", "annotations": null}, "spec": {}});
        let edit = update_hash(&node, NodeRole::Stable, &desired(0))
            .unwrap()
            .unwrap();
        assert_eq!(
            edit.object,
            json!({
                "metadata": {"name": "n", "annotations":
                    {"argo-rollouts.argoproj.io/managed-by-rollouts": "my-rollout"}},
                "spec": {"podSelector": {"matchLabels":
                    {"rollouts-pod-template-hash": "6c5b8f7d9"}}}
            })
        );
    }

    #[test]
    fn malformed_nodes() {
        let cases = [
            (json!("node"), "VirtualNode is not an object"),
            (
                json!({"metadata": 1}),
                "VirtualNode metadata is not an object",
            ),
            (
                json!({"metadata": {"annotations": []}}),
                "VirtualNode metadata.annotations is not an object",
            ),
            (
                json!({"spec": {"podSelector": 1}}),
                "VirtualNode spec.podSelector is not an object",
            ),
            (
                json!({"spec": {"podSelector": {"matchLabels": "x"}}}),
                "VirtualNode spec.podSelector.matchLabels is not an object",
            ),
        ];
        for (node, want) in cases {
            assert_eq!(
                update_hash(&node, NodeRole::Canary, &desired(0)),
                Err(RouterError::new(want)),
                "{node}"
            );
        }
    }
}
