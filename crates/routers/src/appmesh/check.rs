//! `check_routes`: the reference validation of the VirtualRouter, run on every reconcile
//! before anything is written. A failure makes the Rollout `InvalidSpec`; the caller adds the
//! field path and the `Invalid value` framing.

use serde_json::Value;
use sluice_api::rollout::AppMeshTrafficRouting;

use super::routes::rule;
use super::{name_of, virtual_service_name};
use crate::RouterError;

/// The first problem with the Rollout's App Mesh objects, as Argo words it: no
/// `appMesh.virtualService` (`must provide virtual-service`), an object that is not a
/// VirtualRouter, a router without routes, a route that is not a weighted route, or a route
/// whose targets are not exactly two (the canary and the stable). Every route of the router is
/// checked, whether or not `appMesh.virtualService.routes` names it, as in Argo.
pub fn check_routes(router: &Value, cfg: &AppMeshTrafficRouting) -> Result<(), RouterError> {
    if virtual_service_name(cfg).is_none() {
        return Err(RouterError::new("must provide virtual-service"));
    }
    let kind = router
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind != "VirtualRouter" {
        return Err(RouterError::new(format!(
            "Expected object kind to be VirtualRouter but is {kind}"
        )));
    }
    let vr = name_of(router);
    let routes = router
        .pointer("/spec/routes")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
        .ok_or_else(|| {
            RouterError::new(format!("No routes defined for AppMesh virtual-router {vr}"))
        })?;
    for route in routes {
        let invalid = || {
            RouterError::new(format!(
                "Invalid route was found for AppMesh virtual-router {vr}"
            ))
        };
        let (_, rule) = rule(route).ok_or_else(invalid)?;
        let targets = rule
            .pointer("/action/weightedTargets")
            .and_then(Value::as_array)
            .ok_or_else(invalid)?;
        if targets.len() != 2 {
            let name = route
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(RouterError::new(format!(
                "Invalid number of weightedTargets ({}) for AppMesh virtual-router {vr} and \
                 route {name}, expected 2",
                targets.len()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::appmesh::fixtures::{cfg, router};

    #[test]
    fn corpus_router_is_valid() {
        assert_eq!(check_routes(&router(), &cfg(None)), Ok(()));
    }

    #[test]
    fn argo_messages() {
        let with = |pointer: &str, value: Value| {
            let mut r = router();
            *r.pointer_mut(pointer).unwrap() = value;
            r
        };
        let three = with(
            "/spec/routes/0/httpRoute/action/weightedTargets",
            json!([
                {"virtualNodeRef": {"name": "a"}, "weight": 1},
                {"virtualNodeRef": {"name": "b"}, "weight": 1},
                {"virtualNodeRef": {"name": "c"}, "weight": 1}
            ]),
        );
        let mut second_route_bad = router();
        second_route_bad["spec"]["routes"]
            .as_array_mut()
            .unwrap()
            .push(
                json!({"name": "extra", "tcpRoute": {"action": {"weightedTargets": [
                    {"virtualNodeRef": {"name": "a"}, "weight": 100}
                ]}}}),
            );
        let cases = [
            (
                with("/kind", json!("VirtualService")),
                "Expected object kind to be VirtualRouter but is VirtualService",
            ),
            (
                with("/spec/routes", json!([])),
                "No routes defined for AppMesh virtual-router my-vrouter",
            ),
            (
                with("/spec/routes", Value::Null),
                "No routes defined for AppMesh virtual-router my-vrouter",
            ),
            (
                with("/spec/routes/0", json!({"name": "primary"})),
                "Invalid route was found for AppMesh virtual-router my-vrouter",
            ),
            (
                with("/spec/routes/0/httpRoute/action", json!({})),
                "Invalid route was found for AppMesh virtual-router my-vrouter",
            ),
            (
                three,
                "Invalid number of weightedTargets (3) for AppMesh virtual-router my-vrouter \
                 and route primary, expected 2",
            ),
            (
                second_route_bad,
                "Invalid number of weightedTargets (1) for AppMesh virtual-router my-vrouter \
                 and route extra, expected 2",
            ),
        ];
        for (router, want) in cases {
            assert_eq!(
                check_routes(&router, &cfg(None)),
                Err(RouterError::new(want)),
                "{router}"
            );
        }
        assert_eq!(
            check_routes(&router(), &AppMeshTrafficRouting::default()),
            Err(RouterError::new("must provide virtual-service"))
        );
    }
}
