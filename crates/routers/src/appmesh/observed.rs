//! The weights a VirtualRouter routes right now.

use serde_json::Value;
use sluice_api::rollout::AppMeshTrafficRouting;

use super::NodeRole;
use super::routes::weighted_routes;
use crate::{Desired, ObservedWeight, cautious};

/// The canary and stable target weights of the routes the Rollout weights; when the routes
/// disagree, the largest canary and the smallest stable weight of any. `None` when the router
/// is malformed, a route lacks the canary or the stable target, or no route is weighted.
/// `desired` is not consulted (the nodes come from `cfg`); it is taken for symmetry with the
/// other routers.
pub fn observed_weight(
    router: &Value,
    cfg: &AppMeshTrafficRouting,
    rollout_namespace: &str,
    _desired: &Desired,
) -> Option<ObservedWeight> {
    let routes = weighted_routes(router, cfg, rollout_namespace).ok()?;
    let mut weights = Vec::with_capacity(routes.len());
    for route in &routes {
        let weight = |role| route.weight_of(role).and_then(|w| i32::try_from(w).ok());
        weights.push(ObservedWeight {
            canary: weight(NodeRole::Canary)?,
            stable: weight(NodeRole::Stable)?,
        });
    }
    cautious::combine(&weights)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::appmesh::fixtures::{cfg, desired, router};

    fn w(canary: i32, stable: i32) -> Option<ObservedWeight> {
        Some(ObservedWeight { canary, stable })
    }

    #[test]
    fn weights_of_the_targets() {
        let route = |name: &str, canary: i64, stable: i64| {
            json!({"name": name, "tcpRoute": {"action": {"weightedTargets": [
                {"virtualNodeRef": {"name": "my-vn-canary"}, "weight": canary},
                {"virtualNodeRef": {"name": "my-vn-stable"}, "weight": stable}
            ]}}})
        };
        let of = |routes: Value| json!({"spec": {"routes": routes}});
        let only_stable = of(
            json!([{"name": "s", "tcpRoute": {"action": {"weightedTargets": [
                {"virtualNodeRef": {"name": "my-vn-stable"}, "weight": 100}
            ]}}}]),
        );
        let cases = [
            (router(), None, w(0, 100)),
            (of(json!([route("a", 20, 80)])), None, w(20, 80)),
            (
                of(json!([route("a", 20, 80), route("b", 40, 60)])),
                None,
                w(40, 60),
            ),
            (
                of(json!([route("a", 20, 80), route("b", 40, 60)])),
                Some(&["a"][..]),
                w(20, 80),
            ),
            (of(json!([route("a", 20, 80)])), Some(&["x"][..]), None),
            (only_stable, None, None),
            (of(json!([{"name": "x"}])), None, None),
            (json!({}), None, None),
        ];
        for (router, routes, want) in cases {
            assert_eq!(
                observed_weight(&router, &cfg(routes), "argo-examples", &desired(0)),
                want,
                "{router}"
            );
        }
    }
}
