//! The VirtualRouter with the canary and stable target weights the Rollout wants.

use serde_json::Value;
use sluice_api::rollout::AppMeshTrafficRouting;

use super::routes::weighted_routes;
use super::{NodeRole, ROUTER_UPDATED_REASON, name_of};
use crate::{Desired, Edit, EditResult};

/// The VirtualRouter with, in each route the Rollout weights (see
/// [`check_routes`](super::check_routes) and `appMesh.virtualService.routes`), the canary
/// VirtualNode's target at `desired.weight` and the stable's at 100 − it. Targets of other
/// VirtualNodes, or of the Rollout's nodes in another namespace, are left alone. `None` when
/// every weight is already right (Argo also updates only then).
///
/// A malformed route gives a `not well-formed` field error, before anything is changed.
pub fn set_weight(
    router: &Value,
    cfg: &AppMeshTrafficRouting,
    rollout_namespace: &str,
    desired: &Desired,
) -> EditResult {
    let routes = weighted_routes(router, cfg, rollout_namespace)?;
    let mut object = router.clone();
    let mut changed = false;
    for target in routes.iter().flat_map(|r| &r.targets) {
        let want = match target.role {
            Some(NodeRole::Canary) => desired.weight,
            Some(NodeRole::Stable) => desired.stable_weight_of_100(),
            None => continue,
        };
        if target.weight == i64::from(want) {
            continue;
        }
        if let Some(t) = object
            .pointer_mut(&target.pointer)
            .and_then(Value::as_object_mut)
        {
            t.insert("weight".into(), want.into());
            changed = true;
        }
    }
    if !changed {
        return Ok(None);
    }
    Ok(Some(Edit {
        event: (
            ROUTER_UPDATED_REASON,
            format!(
                "VirtualRouter `{}` set to desiredWeight '{}'",
                name_of(router),
                desired.weight
            ),
        ),
        object,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::RouterError;
    use crate::appmesh::fixtures::{cfg, desired, router};

    #[test]
    fn corpus_router_at_a_step() {
        let edit = set_weight(&router(), &cfg(None), "argo-examples", &desired(25))
            .unwrap()
            .unwrap();
        let mut want = router();
        let targets = "/spec/routes/0/httpRoute/action/weightedTargets";
        *want.pointer_mut(&format!("{targets}/0/weight")).unwrap() = json!(25);
        *want.pointer_mut(&format!("{targets}/1/weight")).unwrap() = json!(75);
        assert_eq!(edit.object, want);
        assert_eq!(
            edit.event,
            (
                "VirtualRouterUpdated",
                "VirtualRouter `my-vrouter` set to desiredWeight '25'".to_string()
            )
        );
        let again = set_weight(&edit.object, &cfg(None), "argo-examples", &desired(25));
        assert_eq!(again, Ok(None));
    }

    #[test]
    fn unchanged_router_is_not_written() {
        let got = set_weight(&router(), &cfg(None), "argo-examples", &desired(0));
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn only_the_named_routes_and_the_rollouts_nodes() {
        let route = |name: &str| {
            json!({"name": name, "http2Route": {"action": {"weightedTargets": [
                {"virtualNodeRef": {"name": "my-vn-stable"}, "weight": 100},
                {"virtualNodeRef": {"name": "my-vn-canary"}, "weight": 0},
                {"virtualNodeRef": {"name": "my-vn-canary", "namespace": "elsewhere"}, "weight": 0},
                {"virtualNodeRef": {"name": "legacy"}, "weight": 3}
            ]}}})
        };
        let router =
            json!({"metadata": {"name": "vr"}, "spec": {"routes": [route("a"), route("b")]}});
        let edit = set_weight(&router, &cfg(Some(&["b"])), "argo-examples", &desired(60))
            .unwrap()
            .unwrap();
        let weights = |i: usize| -> Vec<Value> {
            edit.object["spec"]["routes"][i]["http2Route"]["action"]["weightedTargets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["weight"].clone())
                .collect()
        };
        assert_eq!(weights(0), [json!(100), json!(0), json!(0), json!(3)]);
        assert_eq!(weights(1), [json!(40), json!(60), json!(0), json!(3)]);
    }

    #[test]
    fn malformed_router_is_not_touched() {
        let mut router = router();
        router["spec"]["routes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "broken", "grpcRoute": {"action": {}}}));
        let got = set_weight(&router, &cfg(None), "argo-examples", &desired(25));
        assert_eq!(
            got,
            Err(RouterError::new(
                "spec.routes[1].grpcRoute.action.weightedTargets: Invalid value: \
                 \"my-vrouter\": not well-formed"
            ))
        );
    }
}
