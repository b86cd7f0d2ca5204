//! `spec.strategy.canary.trafficRouting`: the routers, the Services they need and the routes
//! the controller manages.

use std::collections::BTreeSet;

use super::{FieldError, Problems};
use crate::rollout::{CanaryStrategy, RolloutTrafficRouting};

const PATH: &str = "spec.strategy.canary.trafficRouting";

pub(super) fn has_plugins(routing: &RolloutTrafficRouting) -> bool {
    routing.plugins.as_ref().is_some_and(|p| !p.is_empty())
}

/// Routers that point at the canary and stable Services by name need both. Istio with
/// DestinationRule subsets, ALB and Istio in ping-pong mode (the ping and pong Services take
/// their place) and plugins do not.
pub(super) fn needs_canary_and_stable_services(
    routing: &RolloutTrafficRouting,
    canary: &CanaryStrategy,
) -> bool {
    let ping_pong = canary.ping_pong.is_some();
    (routing.alb.is_some() && !ping_pong)
        || routing
            .istio
            .as_ref()
            .is_some_and(|istio| istio.destination_rule.is_none() && !ping_pong)
        || routing.smi.is_some()
        || routing.apisix.is_some()
        || routing.ambassador.is_some()
        || routing.nginx.is_some()
        || routing.app_mesh.is_some()
        || routing.traefik.is_some()
}

/// What Argo's controller checks of the router settings as it looks the router's objects up
/// (after the spec validation), in its order: one Ingress setting for NGINX (also when ALB is
/// configured beside it), then for ALB, then one VirtualService setting for Istio.
pub(super) fn check_router_config(routing: &RolloutTrafficRouting, problems: &mut Problems) {
    let named = |name: &Option<String>| name.as_deref().is_some_and(|n| !n.is_empty());
    let one_of = |single: bool, multiple: bool| match (single, multiple) {
        (true, true) => Some("Both are configured."),
        (false, false) => Some("Neither are configured."),
        _ => None,
    };
    if let Some(nginx) = &routing.nginx {
        let multiple = nginx
            .stable_ingresses
            .as_ref()
            .is_some_and(|i| !i.is_empty());
        if let Some(which) = one_of(named(&nginx.stable_ingress), multiple) {
            problems.argo(FieldError::internal(
                &format!("{PATH}.nginx"),
                &format!("Either StableIngress or StableIngresses must be configured. {which}"),
            ));
        }
    }
    if let Some(alb) = &routing.alb {
        let multiple = alb.ingresses.as_ref().is_some_and(|i| !i.is_empty());
        if let Some(which) = one_of(named(&alb.ingress), multiple) {
            problems.argo(FieldError::internal(
                &format!("{PATH}.alb"),
                &format!("Either Ingress or Ingresses must be configured. {which}"),
            ));
        }
    }
    if let Some(istio) = &routing.istio {
        let multiple = istio
            .virtual_services
            .as_ref()
            .is_some_and(|v| !v.is_empty());
        if multiple == istio.virtual_service.is_some() {
            problems.argo(FieldError::internal(
                &format!("{PATH}.istio"),
                "either VirtualService or VirtualServices must be configured",
            ));
        }
    }
}

/// Sluice's own checks of the router settings.
pub(super) fn check(routing: &RolloutTrafficRouting, problems: &mut Problems) {
    let has_router = routing.istio.is_some()
        || routing.nginx.is_some()
        || routing.alb.is_some()
        || routing.smi.is_some()
        || routing.ambassador.is_some()
        || routing.app_mesh.is_some()
        || routing.traefik.is_some()
        || routing.apisix.is_some()
        || has_plugins(routing);
    if !has_router {
        problems.sluice(FieldError::required(
            PATH,
            "one of istio, nginx, alb, smi, ambassador, appMesh, traefik, apisix or plugins is required",
        ));
    }
    if let Some(weight) = routing.max_traffic_weight
        && weight <= 0
    {
        problems.sluice(FieldError::invalid(
            &format!("{PATH}.maxTrafficWeight"),
            weight,
            "must be greater than 0",
        ));
    }
    check_managed_routes(routing, problems);
    check_routers(routing, problems);
}

fn check_managed_routes(routing: &RolloutTrafficRouting, problems: &mut Problems) {
    let mut seen = BTreeSet::new();
    for (i, route) in routing.managed_routes.iter().flatten().enumerate() {
        let at = format!("{PATH}.managedRoutes[{i}].name");
        match route.name.as_deref() {
            None | Some("") => problems.sluice(FieldError::required(&at, "")),
            Some(name) if !seen.insert(name) => problems.sluice(FieldError::duplicate(&at, name)),
            Some(_) => {}
        }
    }
}

/// The fields each router cannot work without, beyond what Argo checks.
fn check_routers(routing: &RolloutTrafficRouting, problems: &mut Problems) {
    let named = |name: &Option<String>| name.as_deref().is_some_and(|n| !n.is_empty());

    if let Some(istio) = &routing.istio {
        for (i, vs) in istio.virtual_services.iter().flatten().enumerate() {
            required(
                problems,
                named(&vs.name),
                &format!("istio.virtualServices[{i}].name"),
            );
        }
        if let Some(vs) = &istio.virtual_service {
            required(problems, named(&vs.name), "istio.virtualService.name");
        }
        if let Some(rule) = &istio.destination_rule {
            for (present, field) in [
                (named(&rule.name), "name"),
                (named(&rule.canary_subset_name), "canarySubsetName"),
                (named(&rule.stable_subset_name), "stableSubsetName"),
            ] {
                required(problems, present, &format!("istio.destinationRule.{field}"));
            }
        }
    }
    if let Some(alb) = &routing.alb {
        required(problems, alb.service_port.is_some(), "alb.servicePort");
    }
    if let Some(ambassador) = &routing.ambassador {
        required(
            problems,
            ambassador.mappings.as_ref().is_some_and(|m| !m.is_empty()),
            "ambassador.mappings",
        );
    }
    if let Some(app_mesh) = &routing.app_mesh {
        required(
            problems,
            app_mesh
                .virtual_service
                .as_ref()
                .is_some_and(|vs| named(&vs.name)),
            "appMesh.virtualService.name",
        );
        let group = app_mesh.virtual_node_group.as_ref();
        required(
            problems,
            group
                .and_then(|g| g.canary_virtual_node_ref.as_ref())
                .is_some_and(|r| named(&r.name)),
            "appMesh.virtualNodeGroup.canaryVirtualNodeRef.name",
        );
        required(
            problems,
            group
                .and_then(|g| g.stable_virtual_node_ref.as_ref())
                .is_some_and(|r| named(&r.name)),
            "appMesh.virtualNodeGroup.stableVirtualNodeRef.name",
        );
    }
    if let Some(traefik) = &routing.traefik {
        required(
            problems,
            named(&traefik.weighted_traefik_service_name),
            "traefik.weightedTraefikServiceName",
        );
    }
    if let Some(apisix) = &routing.apisix {
        required(
            problems,
            apisix.route.as_ref().is_some_and(|r| named(&r.name)),
            "apisix.route.name",
        );
    }
}

/// Reports `trafficRouting.<field>: Required value` unless the field is present.
fn required(problems: &mut Problems, present: bool, field: &str) {
    if !present {
        problems.sluice(FieldError::required(&format!("{PATH}.{field}"), ""));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::*;

    fn routed(routing: serde_json::Value) -> Vec<String> {
        canary_problems(
            json!({"canaryService": "c", "stableService": "s", "trafficRouting": routing}),
        )
    }

    #[test]
    fn a_router_is_required() {
        assert_problems(
            routed(json!({"managedRoutes": [{"name": "r"}]})),
            &[
                "spec.strategy.canary.trafficRouting: Required value: one of istio, nginx, alb, smi, ambassador, appMesh, traefik, apisix or plugins is required",
            ],
        );
        assert_problems(routed(json!({"plugins": {"org/router": {}}})), &[]);
    }

    #[test]
    fn services_required_by_routers_that_use_them() {
        let nginx = json!({"nginx": {"stableIngress": "web"}});
        assert_problems(routed(nginx.clone()), &[]);
        let detail = "Canary service and Stable service must to be set to use Traffic Routing";
        assert_problems(
            canary_problems(json!({"trafficRouting": nginx})),
            &[
                &format!("spec.strategy.stableService: Invalid value: \"\": {detail}"),
                &format!("spec.strategy.canaryService: Invalid value: \"\": {detail}"),
            ],
        );
        // Istio DestinationRule subsets and plugins need no Services.
        assert_problems(
            canary_problems(json!({"trafficRouting": {"istio": {
                "virtualService": {"name": "vs"},
                "destinationRule": {"name": "dr", "canarySubsetName": "canary", "stableSubsetName": "stable"}
            }}})),
            &[],
        );
        assert_problems(
            canary_problems(json!({"trafficRouting": {"plugins": {"org/router": {}}}})),
            &[],
        );
    }

    #[test]
    fn max_traffic_weight_only_for_nginx_and_plugins() {
        assert_problems(
            routed(json!({"nginx": {"stableIngress": "web"}, "maxTrafficWeight": 1000})),
            &[],
        );
        assert_problems(
            routed(json!({"smi": {}, "maxTrafficWeight": 0})),
            &[
                "spec.strategy.trafficRouting.maxTrafficWeight: Invalid value: 0: Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins",
                "spec.strategy.steps[0].setWeight: Invalid value: 20: SetWeight needs to be between 0 and 0",
                "spec.strategy.canary.trafficRouting.maxTrafficWeight: Invalid value: 0: must be greater than 0",
            ],
        );
    }

    #[test]
    fn ping_pong_routers() {
        assert_problems(
            canary_problems(json!({
                "pingPong": {"pingService": "ping", "pongService": "pong"},
                "trafficRouting": {"alb": {"ingress": "web", "servicePort": 80}}
            })),
            &[
                "spec.strategy.trafficRouting.alb.rootService: Invalid value: \"\": Root service field is required for the configuration with ALB and ping-pong feature enabled",
            ],
        );
        assert_problems(
            canary_problems(json!({
                "pingPong": {"pingService": "ping", "pongService": "pong"},
                "trafficRouting": {"istio": {"virtualService": {"name": "vs"}}}
            })),
            &[],
        );
        assert_problems(
            canary_problems(json!({
                "canaryService": "c", "stableService": "s",
                "pingPong": {"pingService": "ping", "pongService": "pong"},
                "trafficRouting": {"smi": {}}
            })),
            &[
                "spec.strategy.trafficRouting.alb: Invalid value: null: Ping-pong feature works with the ALB, Istio, and plugin-based traffic routers only",
            ],
        );
    }

    #[test]
    fn managed_routes_are_named_once() {
        assert_problems(
            routed(
                json!({"istio": {"virtualService": {"name": "vs"}}, "managedRoutes": [{"name": "a"}, {"name": "a"}, {}]}),
            ),
            &[
                "spec.strategy.canary.trafficRouting.managedRoutes[1].name: Duplicate value: \"a\"",
                "spec.strategy.canary.trafficRouting.managedRoutes[2].name: Required value",
            ],
        );
    }

    #[test]
    fn ingresses_and_virtual_services_are_set_once() {
        assert_problems(
            routed(json!({
                "istio": {"virtualService": {"name": "a"}, "virtualServices": [{"name": "b"}]},
                "nginx": {"stableIngress": "a", "stableIngresses": ["b"]}
            })),
            &[
                "spec.strategy.canary.trafficRouting.nginx: Internal error: Either StableIngress or StableIngresses must be configured. Both are configured.",
                "spec.strategy.canary.trafficRouting.istio: Internal error: either VirtualService or VirtualServices must be configured",
            ],
        );
        assert_problems(
            routed(
                json!({"istio": {"virtualServices": []}, "alb": {"servicePort": 80}, "nginx": {}}),
            ),
            // Argo's controller checks NGINX's settings first, also when ALB is configured.
            &[
                "spec.strategy.canary.trafficRouting.nginx: Internal error: Either StableIngress or StableIngresses must be configured. Neither are configured.",
                "spec.strategy.canary.trafficRouting.alb: Internal error: Either Ingress or Ingresses must be configured. Neither are configured.",
                "spec.strategy.canary.trafficRouting.istio: Internal error: either VirtualService or VirtualServices must be configured",
            ],
        );
    }

    #[test]
    fn routers_have_their_required_fields() {
        assert_problems(
            routed(json!({
                "istio": {"virtualService": {"name": "a"}, "destinationRule": {"name": "dr"}},
            })),
            &[
                "spec.strategy.canary.trafficRouting.istio.destinationRule.canarySubsetName: Required value",
                "spec.strategy.canary.trafficRouting.istio.destinationRule.stableSubsetName: Required value",
            ],
        );
        assert_problems(
            routed(json!({"istio": {"virtualServices": [{"routes": ["x"]}]}})),
            &["spec.strategy.canary.trafficRouting.istio.virtualServices[0].name: Required value"],
        );
        assert_problems(
            routed(json!({
                "nginx": {"stableIngress": "web"}, "alb": {"ingress": "web"},
                "ambassador": {"mappings": []}, "appMesh": {}, "traefik": {}, "apisix": {}
            })),
            &[
                "spec.strategy.canary.trafficRouting.alb.servicePort: Required value",
                "spec.strategy.canary.trafficRouting.ambassador.mappings: Required value",
                "spec.strategy.canary.trafficRouting.appMesh.virtualService.name: Required value",
                "spec.strategy.canary.trafficRouting.appMesh.virtualNodeGroup.canaryVirtualNodeRef.name: Required value",
                "spec.strategy.canary.trafficRouting.appMesh.virtualNodeGroup.stableVirtualNodeRef.name: Required value",
                "spec.strategy.canary.trafficRouting.traefik.weightedTraefikServiceName: Required value",
                "spec.strategy.canary.trafficRouting.apisix.route.name: Required value",
            ],
        );
        assert_problems(
            routed(json!({
                "nginx": {"stableIngresses": ["a", "b"]},
                "alb": {"ingresses": ["a"], "servicePort": 443},
                "ambassador": {"mappings": ["m"]},
                "appMesh": {"virtualService": {"name": "vs"}, "virtualNodeGroup": {
                    "canaryVirtualNodeRef": {"name": "c"}, "stableVirtualNodeRef": {"name": "s"}}},
                "traefik": {"weightedTraefikServiceName": "w"},
                "apisix": {"route": {"name": "r"}}
            })),
            &[],
        );
    }
}
