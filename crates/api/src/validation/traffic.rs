//! `spec.strategy.canary.trafficRouting`: the routers, the Services they need and the routes
//! the controller manages.

use std::collections::BTreeSet;

use super::Problems;
use crate::rollout::{CanaryStrategy, RolloutTrafficRouting};

const PATH: &str = "spec.strategy.canary.trafficRouting";

pub(super) fn check(
    routing: &RolloutTrafficRouting,
    canary: &CanaryStrategy,
    problems: &mut Problems,
) {
    let has_plugins = routing.plugins.as_ref().is_some_and(|p| !p.is_empty());
    let has_router = routing.istio.is_some()
        || routing.nginx.is_some()
        || routing.alb.is_some()
        || routing.smi.is_some()
        || routing.ambassador.is_some()
        || routing.app_mesh.is_some()
        || routing.traefik.is_some()
        || routing.apisix.is_some()
        || has_plugins;
    if !has_router {
        problems.add(
            PATH,
            "must configure a traffic router (istio, nginx, alb, smi, ambassador, appMesh, traefik, apisix or plugins)",
        );
    }
    if needs_canary_and_stable_services(routing, canary) {
        for (field, value) in [
            ("canaryService", &canary.canary_service),
            ("stableService", &canary.stable_service),
        ] {
            if value.as_deref().is_none_or(str::is_empty) {
                problems.add(
                    &format!("spec.strategy.canary.{field}"),
                    "required with this traffic router",
                );
            }
        }
    }
    if let Some(weight) = routing.max_traffic_weight {
        if weight <= 0 {
            problems.add(
                &format!("{PATH}.maxTrafficWeight"),
                format!("must be positive, got {weight}"),
            );
        }
        if routing.nginx.is_none() && !has_plugins {
            problems.add(
                &format!("{PATH}.maxTrafficWeight"),
                "is only supported with the nginx router or router plugins",
            );
        }
    }
    if canary.ping_pong.is_some() {
        if routing.alb.is_none() && routing.istio.is_none() && !has_plugins {
            problems.add(
                "spec.strategy.canary.pingPong",
                "is only supported with the alb or istio router or router plugins",
            );
        }
        if let Some(alb) = &routing.alb
            && alb.root_service.as_deref().is_none_or(str::is_empty)
        {
            problems.add(&format!("{PATH}.alb.rootService"), "required with pingPong");
        }
    }
    check_managed_routes(routing, problems);
    check_routers(routing, problems);
}

/// Routers that point at the canary and stable Services by name need both. Istio with
/// DestinationRule subsets, ALB and Istio in ping-pong mode (the ping and pong Services take
/// their place) and plugins do not.
fn needs_canary_and_stable_services(
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

fn check_managed_routes(routing: &RolloutTrafficRouting, problems: &mut Problems) {
    let mut seen = BTreeSet::new();
    for (i, route) in routing.managed_routes.iter().flatten().enumerate() {
        let at = format!("{PATH}.managedRoutes[{i}].name");
        match route.name.as_deref() {
            None | Some("") => problems.add(&at, "required"),
            Some(name) if !seen.insert(name) => {
                problems.add(&at, format!("duplicate route name {name:?}"))
            }
            Some(_) => {}
        }
    }
}

/// The fields each router cannot work without.
fn check_routers(routing: &RolloutTrafficRouting, problems: &mut Problems) {
    let named = |name: &Option<String>| name.as_deref().is_some_and(|n| !n.is_empty());

    if let Some(istio) = &routing.istio {
        let services: Vec<_> = istio
            .virtual_service
            .iter()
            .chain(istio.virtual_services.iter().flatten())
            .collect();
        if istio.virtual_service.is_some() && istio.virtual_services.is_some() {
            problems.add(
                &format!("{PATH}.istio"),
                "set only one of virtualService and virtualServices",
            );
        } else if services.is_empty() {
            problems.add(
                &format!("{PATH}.istio"),
                "one of virtualService or virtualServices is required",
            );
        }
        for (i, vs) in istio.virtual_services.iter().flatten().enumerate() {
            if !named(&vs.name) {
                problems.add(
                    &format!("{PATH}.istio.virtualServices[{i}].name"),
                    "required",
                );
            }
        }
        if let Some(vs) = &istio.virtual_service
            && !named(&vs.name)
        {
            problems.add(&format!("{PATH}.istio.virtualService.name"), "required");
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
    if let Some(nginx) = &routing.nginx
        && !named(&nginx.stable_ingress)
        && nginx.stable_ingresses.as_ref().is_none_or(Vec::is_empty)
    {
        problems.add(
            &format!("{PATH}.nginx"),
            "one of stableIngress or stableIngresses is required",
        );
    }
    if let Some(alb) = &routing.alb {
        if !named(&alb.ingress) && alb.ingresses.as_ref().is_none_or(Vec::is_empty) {
            problems.add(
                &format!("{PATH}.alb"),
                "one of ingress or ingresses is required",
            );
        }
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

/// Reports `trafficRouting.<field>: required` unless the field is present.
fn required(problems: &mut Problems, present: bool, field: &str) {
    if !present {
        problems.add(&format!("{PATH}.{field}"), "required");
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
                "spec.strategy.canary.trafficRouting: must configure a traffic router (istio, nginx, alb, smi, ambassador, appMesh, traefik, apisix or plugins)",
            ],
        );
        assert_problems(routed(json!({"plugins": {"org/router": {}}})), &[]);
    }

    #[test]
    fn services_required_by_routers_that_use_them() {
        let nginx = json!({"nginx": {"stableIngress": "web"}});
        assert_problems(routed(nginx.clone()), &[]);
        assert_problems(
            canary_problems(json!({"trafficRouting": nginx})),
            &[
                "spec.strategy.canary.canaryService: required with this traffic router",
                "spec.strategy.canary.stableService: required with this traffic router",
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
                "spec.strategy.canary.trafficRouting.maxTrafficWeight: must be positive, got 0",
                "spec.strategy.canary.trafficRouting.maxTrafficWeight: is only supported with the nginx router or router plugins",
                "spec.strategy.canary.steps[0].setWeight: must be between 0 and 0, got 20",
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
            &["spec.strategy.canary.trafficRouting.alb.rootService: required with pingPong"],
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
                "spec.strategy.canary.pingPong: is only supported with the alb or istio router or router plugins",
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
                "spec.strategy.canary.trafficRouting.managedRoutes[1].name: duplicate route name \"a\"",
                "spec.strategy.canary.trafficRouting.managedRoutes[2].name: required",
            ],
        );
    }

    #[test]
    fn routers_have_their_required_fields() {
        assert_problems(
            routed(json!({
                "istio": {"virtualService": {"name": "a"}, "virtualServices": [{"name": "b"}],
                          "destinationRule": {"name": "dr"}},
            })),
            &[
                "spec.strategy.canary.trafficRouting.istio: set only one of virtualService and virtualServices",
                "spec.strategy.canary.trafficRouting.istio.destinationRule.canarySubsetName: required",
                "spec.strategy.canary.trafficRouting.istio.destinationRule.stableSubsetName: required",
            ],
        );
        assert_problems(
            routed(json!({"istio": {"virtualServices": [{"routes": ["x"]}]}})),
            &["spec.strategy.canary.trafficRouting.istio.virtualServices[0].name: required"],
        );
        assert_problems(
            routed(json!({
                "nginx": {}, "alb": {}, "ambassador": {"mappings": []}, "appMesh": {},
                "traefik": {}, "apisix": {}
            })),
            &[
                "spec.strategy.canary.trafficRouting.nginx: one of stableIngress or stableIngresses is required",
                "spec.strategy.canary.trafficRouting.alb: one of ingress or ingresses is required",
                "spec.strategy.canary.trafficRouting.alb.servicePort: required",
                "spec.strategy.canary.trafficRouting.ambassador.mappings: required",
                "spec.strategy.canary.trafficRouting.appMesh.virtualService.name: required",
                "spec.strategy.canary.trafficRouting.appMesh.virtualNodeGroup.canaryVirtualNodeRef.name: required",
                "spec.strategy.canary.trafficRouting.appMesh.virtualNodeGroup.stableVirtualNodeRef.name: required",
                "spec.strategy.canary.trafficRouting.traefik.weightedTraefikServiceName: required",
                "spec.strategy.canary.trafficRouting.apisix.route.name: required",
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
