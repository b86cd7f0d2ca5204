//! The weighted targets of a VirtualRouter's routes, read without trusting their shape: every
//! route the Rollout weights is checked up front, with a `not well-formed` field error naming
//! the bad path, so that the edits that follow cannot fail half-way.

use serde_json::Value;
use sluice_api::rollout::AppMeshTrafficRouting;

use super::{NodeRole, name_of, not_well_formed, virtual_node_name};
use crate::RouterError;

/// The route kinds a VirtualRouter route may hold, in the order they are looked for: the first
/// one present is the route's rule.
pub(super) const ROUTE_KINDS: [&str; 4] = ["httpRoute", "tcpRoute", "http2Route", "grpcRoute"];

/// One weighted target of a route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    /// JSON pointer to the target object, for editing a copy.
    pub pointer: String,
    /// The Rollout's VirtualNode it sends traffic to, if any.
    pub role: Option<NodeRole>,
    pub weight: i64,
}

/// A route the Rollout weights and its targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Route {
    pub targets: Vec<Target>,
}

impl Route {
    /// The weight of the first target of `role`.
    pub fn weight_of(&self, role: NodeRole) -> Option<i64> {
        self.targets
            .iter()
            .find(|t| t.role == Some(role))
            .map(|t| t.weight)
    }
}

/// `spec.routes` of a VirtualRouter.
pub(super) fn all_routes(router: &Value) -> Result<&[Value], RouterError> {
    router
        .pointer("/spec/routes")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .ok_or_else(|| not_well_formed("spec.routes", name_of(router)))
}

/// The kind key and rule of a route: the first of [`ROUTE_KINDS`] it has, as an object.
pub(super) fn rule(route: &Value) -> Option<(&'static str, &Value)> {
    ROUTE_KINDS.iter().find_map(|&kind| match route.get(kind) {
        Some(rule @ Value::Object(_)) => Some((kind, rule)),
        _ => None,
    })
}

/// The routes the Rollout weights: those named in `appMesh.virtualService.routes`, or all of
/// them when that list is absent or empty. A target is the canary's or the stable's when its
/// `virtualNodeRef` names that VirtualNode in the Rollout's namespace (a reference without a
/// namespace is to the router's namespace, which is the Rollout's here, as in Argo).
pub(super) fn weighted_routes(
    router: &Value,
    cfg: &AppMeshTrafficRouting,
    rollout_namespace: &str,
) -> Result<Vec<Route>, RouterError> {
    let vr = name_of(router);
    let filter = cfg
        .virtual_service
        .as_ref()
        .and_then(|vs| vs.routes.as_deref())
        .unwrap_or_default();
    let canary = virtual_node_name(cfg, NodeRole::Canary);
    let stable = virtual_node_name(cfg, NodeRole::Stable);
    let mut weighted = Vec::new();
    for (i, route) in all_routes(router)?.iter().enumerate() {
        let path = format!("spec.routes[{i}]");
        if !route.is_object() {
            return Err(not_well_formed(&path, vr));
        }
        let name = route
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !filter.is_empty() && !filter.iter().any(|f| f == name) {
            continue;
        }
        let (kind, rule) = rule(route).ok_or_else(|| not_well_formed(&path, vr))?;
        let path = format!("{path}.{kind}.action.weightedTargets");
        let list = rule
            .pointer("/action/weightedTargets")
            .and_then(Value::as_array)
            .ok_or_else(|| not_well_formed(&path, vr))?;
        let mut targets = Vec::with_capacity(list.len());
        for (j, target) in list.iter().enumerate() {
            let path = format!("{path}[{j}]");
            if !target.is_object() {
                return Err(not_well_formed(&path, vr));
            }
            let node = target
                .get("virtualNodeRef")
                .and_then(Value::as_object)
                .ok_or_else(|| not_well_formed(&format!("{path}.virtualNodeRef"), vr))?;
            let weight = target
                .get("weight")
                .and_then(Value::as_i64)
                .ok_or_else(|| not_well_formed(&format!("{path}.weight"), vr))?;
            let node_name = node.get("name").and_then(Value::as_str);
            let node_namespace = node
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .unwrap_or(rollout_namespace);
            let role = if node_namespace != rollout_namespace || node_name.is_none() {
                None
            } else if node_name == stable {
                Some(NodeRole::Stable)
            } else if node_name == canary {
                Some(NodeRole::Canary)
            } else {
                None
            };
            targets.push(Target {
                pointer: format!("/spec/routes/{i}/{kind}/action/weightedTargets/{j}"),
                role,
                weight,
            });
        }
        weighted.push(Route { targets });
    }
    Ok(weighted)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::appmesh::fixtures::{cfg, router};

    fn targets(router: &Value, routes: Option<&[&str]>) -> Result<Vec<Route>, RouterError> {
        weighted_routes(router, &cfg(routes), "argo-examples")
    }

    #[test]
    fn corpus_router() {
        let got = targets(&router(), None).unwrap();
        let p = "/spec/routes/0/httpRoute/action/weightedTargets";
        assert_eq!(
            got,
            [Route {
                targets: vec![
                    Target {
                        pointer: format!("{p}/0"),
                        role: Some(NodeRole::Canary),
                        weight: 0
                    },
                    Target {
                        pointer: format!("{p}/1"),
                        role: Some(NodeRole::Stable),
                        weight: 100
                    },
                ]
            }]
        );
        assert_eq!(got[0].weight_of(NodeRole::Stable), Some(100));
    }

    #[test]
    fn route_kinds_in_order() {
        let target = json!({"action": {"weightedTargets": [
            {"virtualNodeRef": {"name": "my-vn-canary"}, "weight": 1}
        ]}});
        let cases = [
            (
                json!({"httpRoute": target, "grpcRoute": target}),
                "httpRoute",
            ),
            (json!({"grpcRoute": target, "tcpRoute": target}), "tcpRoute"),
            (
                json!({"http2Route": target, "grpcRoute": target}),
                "http2Route",
            ),
            (json!({"grpcRoute": target}), "grpcRoute"),
            (json!({"httpRoute": null, "grpcRoute": target}), "grpcRoute"),
        ];
        for (route, kind) in cases {
            let router = json!({"spec": {"routes": [route]}});
            let got = targets(&router, None).unwrap();
            assert!(
                got[0].targets[0].pointer.contains(&format!("/{kind}/")),
                "{router}: {got:?}"
            );
        }
    }

    #[test]
    fn route_filter() {
        let route = |name: &str| {
            json!({"name": name, "tcpRoute": {"action": {"weightedTargets": [
                {"virtualNodeRef": {"name": "my-vn-stable"}, "weight": 100}
            ]}}})
        };
        let router = json!({"spec": {"routes": [route("a"), route("b"), {"name": "c"}]}});
        assert_eq!(targets(&router, Some(&["b"])).unwrap().len(), 1);
        assert_eq!(
            targets(&router, Some(&["b"])).unwrap()[0].targets[0].pointer,
            "/spec/routes/1/tcpRoute/action/weightedTargets/0"
        );
        assert_eq!(targets(&router, Some(&["a", "b"])).unwrap().len(), 2);
        assert_eq!(targets(&router, Some(&["x"])).unwrap().len(), 0);
        // No filter (or an empty one): every route, and `c` has no rule.
        let err = Err(RouterError::new(
            "spec.routes[2]: Invalid value: \"\": not well-formed",
        ));
        assert_eq!(targets(&router, None), err);
        assert_eq!(targets(&router, Some(&[])), err);
    }

    #[test]
    fn roles_by_name_and_namespace() {
        let target = |reference: Value| {
            json!({"metadata": {"name": "vr"}, "spec": {"routes": [{"httpRoute": {"action":
                {"weightedTargets": [{"virtualNodeRef": reference, "weight": 5}]}}}]}})
        };
        let cases = [
            (json!({"name": "my-vn-canary"}), Some(NodeRole::Canary)),
            (json!({"name": "my-vn-stable"}), Some(NodeRole::Stable)),
            (
                json!({"name": "my-vn-stable", "namespace": "argo-examples"}),
                Some(NodeRole::Stable),
            ),
            (
                json!({"name": "my-vn-stable", "namespace": ""}),
                Some(NodeRole::Stable),
            ),
            (json!({"name": "my-vn-stable", "namespace": "other"}), None),
            (json!({"name": "my-vn-other"}), None),
            (json!({}), None),
        ];
        for (reference, role) in cases {
            let got = targets(&target(reference.clone()), None).unwrap();
            assert_eq!(got[0].targets[0].role, role, "{reference}");
        }
    }

    #[test]
    fn not_well_formed_paths() {
        let with_targets = |targets: Value| {
            json!({"metadata": {"name": "vr"}, "spec": {"routes": [
                {"name": "r", "httpRoute": {"action": {"weightedTargets": targets}}}
            ]}})
        };
        let p = "spec.routes[0].httpRoute.action.weightedTargets";
        let cases = [
            (
                json!({"metadata": {"name": "vr"}, "spec": {}}),
                "spec.routes".to_string(),
            ),
            (
                json!({"metadata": {"name": "vr"}, "spec": {"routes": [7]}}),
                "spec.routes[0]".to_string(),
            ),
            (
                json!({"metadata": {"name": "vr"}, "spec": {"routes": [{"httpRoute": 1}]}}),
                "spec.routes[0]".to_string(),
            ),
            (
                json!({"metadata": {"name": "vr"}, "spec": {"routes": [{"httpRoute": {}}]}}),
                p.to_string(),
            ),
            (with_targets(json!({})), p.to_string()),
            (with_targets(json!([1])), format!("{p}[0]")),
            (
                with_targets(json!([{"weight": 1}])),
                format!("{p}[0].virtualNodeRef"),
            ),
            (
                with_targets(json!([{"virtualNodeRef": {"name": "n"}}])),
                format!("{p}[0].weight"),
            ),
            (
                with_targets(json!([{"virtualNodeRef": {"name": "n"}, "weight": "5"}])),
                format!("{p}[0].weight"),
            ),
        ];
        for (router, path) in cases {
            assert_eq!(
                targets(&router, None),
                Err(RouterError::new(format!(
                    "{path}: Invalid value: \"vr\": not well-formed"
                ))),
                "{router}"
            );
        }
    }
}
