//! AWS App Mesh: the Rollout's App Mesh `VirtualService` names a `VirtualRouter` whose routes
//! send weighted traffic to two `VirtualNode`s, the canary and the stable. Sluice sets the
//! weights of the routes' targets and points each VirtualNode's pod selector at its
//! ReplicaSet's pod-template hash. All three objects are the user's; none is created.
//!
//! Objects are `appmesh.k8s.aws` objects as read from the API, as JSON. Every function is pure
//! and returns `Ok(None)` when nothing is to be written. Header, mirror and route-removal
//! operations are no-ops for App Mesh, as in Argo, and experiment destinations are ignored:
//! the stable gets 100 − canary.
//!
//! Events: Argo publishes none when it updates the VirtualRouter or a VirtualNode (only the
//! Warnings [`VIRTUAL_SERVICE_NOT_FOUND`], [`VIRTUAL_ROUTER_NOT_FOUND`] and
//! [`VIRTUAL_NODE_NOT_FOUND`] when one is missing). Sluice's writes carry
//! [`ROUTER_UPDATED_REASON`] or [`NODE_UPDATED_REASON`], which a caller that wants Argo's
//! event stream exactly leaves out, as it does with
//! [`smi::UPDATED_REASON`](crate::smi::UPDATED_REASON).

mod adapter;
mod check;
mod observed;
mod router_ref;
mod routes;
mod set_weight;
mod virtual_node;

pub use adapter::AppMesh;
pub use check::check_routes;
pub use observed::observed_weight;
pub use router_ref::virtual_router_ref;
pub use set_weight::set_weight;
pub use virtual_node::update_hash;

use serde_json::Value;
use sluice_api::rollout::AppMeshTrafficRouting;

use crate::RouterError;

/// Reason of the event of a VirtualRouter weight change (Sluice's; see the module doc).
pub const ROUTER_UPDATED_REASON: &str = "VirtualRouterUpdated";

/// Reason of the event of a VirtualNode selector change (Sluice's; see the module doc).
pub const NODE_UPDATED_REASON: &str = "VirtualNodeUpdated";

/// Reason of Argo's Warning for a missing VirtualService; the error is
/// [`VIRTUAL_SERVICE_MISSING`].
pub const VIRTUAL_SERVICE_NOT_FOUND: &str = "VirtualServiceNotFound";

/// Reason of Argo's Warning for a missing VirtualRouter; the error is
/// [`VIRTUAL_ROUTER_MISSING`].
pub const VIRTUAL_ROUTER_NOT_FOUND: &str = "VirtualRouterNotFound";

/// Reason of Argo's Warning for a missing VirtualNode; the error is [`VIRTUAL_NODE_MISSING`].
pub const VIRTUAL_NODE_NOT_FOUND: &str = "VirtualNodeNotFound";

/// The reconcile error when the VirtualService is missing.
pub const VIRTUAL_SERVICE_MISSING: &str = "Virtual-service is missing";

/// The reconcile error when the VirtualRouter is missing.
pub const VIRTUAL_ROUTER_MISSING: &str = "Virtual-router is missing";

/// The reconcile error when a VirtualNode is missing.
pub const VIRTUAL_NODE_MISSING: &str = "Virtual-node is missing";

/// Which of the Rollout's two VirtualNodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    Canary,
    Stable,
}

/// `appMesh.virtualService.name`, when set and not empty.
pub fn virtual_service_name(cfg: &AppMeshTrafficRouting) -> Option<&str> {
    cfg.virtual_service
        .as_ref()
        .and_then(|vs| vs.name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The VirtualNode of `role`: `appMesh.virtualNodeGroup.{canary,stable}VirtualNodeRef.name`,
/// when set and not empty. It lives in the Rollout's namespace.
pub fn virtual_node_name(cfg: &AppMeshTrafficRouting, role: NodeRole) -> Option<&str> {
    let group = cfg.virtual_node_group.as_ref()?;
    let node = match role {
        NodeRole::Canary => group.canary_virtual_node_ref.as_ref(),
        NodeRole::Stable => group.stable_virtual_node_ref.as_ref(),
    };
    node?.name.as_deref().filter(|n| !n.is_empty())
}

/// A malformed field, in the Kubernetes field-error form Argo uses:
/// `<path>: Invalid value: "<object>": not well-formed`.
fn not_well_formed(path: &str, object: &str) -> RouterError {
    RouterError::new(format!(
        "{path}: Invalid value: {object:?}: not well-formed"
    ))
}

/// `metadata.name` of an object, empty when absent.
fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::Value;
    use sluice_api::rollout::{
        AppMeshTrafficRouting, AppMeshVirtualNodeGroup, AppMeshVirtualNodeReference,
        AppMeshVirtualService,
    };

    use crate::Desired;

    /// The Rollout of the corpus' `examples/appmesh/canary-rollout.yaml` at the given weight.
    pub fn desired(weight: i32) -> Desired {
        Desired {
            rollout: "my-rollout".into(),
            namespace: "argo-examples".into(),
            rollout_uid: "uid-mesh".into(),
            canary_service: "my-svc-canary".into(),
            stable_service: "my-svc-stable".into(),
            canary_hash: "5d8f7c9b4".into(),
            stable_hash: "6c5b8f7d9".into(),
            weight,
            max_weight: 100,
            ..Desired::default()
        }
    }

    /// Its `appMesh` settings, with the given route names.
    pub fn cfg(routes: Option<&[&str]>) -> AppMeshTrafficRouting {
        let node = |name: &str| {
            Some(AppMeshVirtualNodeReference {
                name: Some(name.into()),
            })
        };
        AppMeshTrafficRouting {
            virtual_service: Some(AppMeshVirtualService {
                name: Some("my-svc".into()),
                routes: routes.map(|r| r.iter().map(|s| s.to_string()).collect()),
            }),
            virtual_node_group: Some(AppMeshVirtualNodeGroup {
                canary_virtual_node_ref: node("my-vn-canary"),
                stable_virtual_node_ref: node("my-vn-stable"),
            }),
        }
    }

    /// The VirtualRouter of `examples/appmesh/canary-service.yaml`.
    pub fn router() -> Value {
        serde_saphyr::from_str(
            "
apiVersion: appmesh.k8s.aws/v1beta2
kind: VirtualRouter
metadata:
  name: my-vrouter
  namespace: argo-examples
spec:
  listeners:
    - portMapping:
        port: 80
        protocol: http
  routes:
    - name: primary
      httpRoute:
        match:
          prefix: /
        action:
          weightedTargets:
            - virtualNodeRef:
                name: my-vn-canary
              weight: 0
            - virtualNodeRef:
                name: my-vn-stable
              weight: 100
",
        )
        .expect("fixture parses")
    }
}

#[cfg(test)]
mod tests {
    use sluice_api::rollout::AppMeshVirtualNodeGroup;

    use super::fixtures::cfg;
    use super::*;

    #[test]
    fn names_from_the_settings() {
        let cfg = cfg(None);
        assert_eq!(virtual_service_name(&cfg), Some("my-svc"));
        assert_eq!(
            virtual_node_name(&cfg, NodeRole::Canary),
            Some("my-vn-canary")
        );
        assert_eq!(
            virtual_node_name(&cfg, NodeRole::Stable),
            Some("my-vn-stable")
        );
        let empty = AppMeshTrafficRouting {
            virtual_node_group: Some(AppMeshVirtualNodeGroup::default()),
            ..AppMeshTrafficRouting::default()
        };
        assert_eq!(virtual_service_name(&empty), None);
        assert_eq!(virtual_node_name(&empty, NodeRole::Canary), None);
        assert_eq!(
            virtual_node_name(&AppMeshTrafficRouting::default(), NodeRole::Stable),
            None
        );
    }

    #[test]
    fn field_error_form() {
        assert_eq!(
            not_well_formed("spec.routes", "my-vrouter").0,
            "spec.routes: Invalid value: \"my-vrouter\": not well-formed"
        );
    }

    /// The corpus' App Mesh objects (the example and the e2e test): the VirtualService leads
    /// to the VirtualRouter, which passes the check, walks the Rollout's steps with each
    /// weight read back, and the VirtualNodes get the hashes.
    #[test]
    fn corpus_objects_walk_their_steps() {
        use serde_json::json;

        use crate::{Desired, ObservedWeight};

        let root = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
        let sets = [
            (
                &[
                    "examples/appmesh/canary-service.yaml",
                    "examples/appmesh/canary-rollout.yaml",
                ][..],
                vec![25, 50, 75],
            ),
            (
                &["test/e2e/appmesh/appmesh-canary-rollout.yaml"][..],
                vec![50],
            ),
        ];
        for (files, steps) in sets {
            let objects: Vec<Value> = files
                .iter()
                .flat_map(|f| {
                    let text = std::fs::read_to_string(root.join(f)).unwrap();
                    sluice_api::yaml::from_multi_doc_str(&text).unwrap()
                })
                .collect();
            let find = |kind: &str, name: &str| {
                objects
                    .iter()
                    .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                    .unwrap_or_else(|| panic!("{files:?}: no {kind} {name}"))
                    .clone()
            };
            let rollout = objects.iter().find(|o| o["kind"] == "Rollout").unwrap();
            let namespace = rollout["metadata"]["namespace"]
                .as_str()
                .unwrap_or("e2e")
                .to_string();
            let canary = &rollout["spec"]["strategy"]["canary"];
            let cfg: AppMeshTrafficRouting =
                serde_json::from_value(canary["trafficRouting"]["appMesh"].clone()).unwrap();
            let weights: Vec<i32> = canary["steps"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s["setWeight"].as_i64())
                .map(|w| w as i32)
                .collect();
            assert_eq!(weights, steps, "{files:?}");

            let vs = find("VirtualService", virtual_service_name(&cfg).unwrap());
            let (vr_name, vr_namespace) = virtual_router_ref(&vs, &namespace).unwrap();
            assert_eq!(vr_namespace, namespace);
            let mut router = find("VirtualRouter", &vr_name);
            check_routes(&router, &cfg).unwrap();

            let mut desired = Desired {
                rollout: rollout["metadata"]["name"].as_str().unwrap().into(),
                namespace: namespace.clone(),
                canary_service: canary["canaryService"].as_str().unwrap().into(),
                stable_service: canary["stableService"].as_str().unwrap().into(),
                canary_hash: "c4n4ry".into(),
                stable_hash: "5t4b1e".into(),
                max_weight: 100,
                ..Desired::default()
            };
            for weight in weights.into_iter().chain([100, 0]) {
                desired.weight = weight;
                if let Some(edit) = set_weight(&router, &cfg, &namespace, &desired).unwrap() {
                    router = edit.object;
                }
                assert_eq!(
                    observed_weight(&router, &cfg, &namespace, &desired),
                    Some(ObservedWeight {
                        canary: weight,
                        stable: 100 - weight
                    }),
                    "{files:?} at {weight}"
                );
            }
            for (role, hash) in [(NodeRole::Stable, "5t4b1e"), (NodeRole::Canary, "c4n4ry")] {
                let node = find("VirtualNode", virtual_node_name(&cfg, role).unwrap());
                let edit = update_hash(&node, role, &desired).unwrap().unwrap();
                assert_eq!(
                    edit.object["spec"]["podSelector"]["matchLabels"],
                    json!({"app": "my-app", "rollouts-pod-template-hash": hash})
                );
            }
        }
    }
}
