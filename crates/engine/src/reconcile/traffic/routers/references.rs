//! Which router objects a Rollout's routers read, for the controller to fetch before it
//! reconciles: named objects, objects found by label selector, and objects named inside
//! others (App Mesh's VirtualRouter, which its VirtualService names).

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_api::rollout::{Rollout, RolloutTrafficRouting};
use sluice_routers::kinds::{ApiVersions, ObjectRef, RouterKind};
use sluice_routers::{alb, ambassador, appmesh, istio, nginx, smi};

use super::{gateway_config, header_route_names, virtual_services};

fn routing(rollout: &Rollout) -> Option<&RolloutTrafficRouting> {
    rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.traffic_routing.as_ref())
}

/// The objects a Rollout's routers read, for the controller to fetch before reconciling.
pub fn references(rollout: &Rollout, versions: &ApiVersions) -> Vec<ObjectRef> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let name = rollout.metadata.name.clone().unwrap_or_default();
    let Some(routing) = routing(rollout) else {
        return Vec::new();
    };
    let named = |kind, object: &str| ObjectRef::new(kind, &namespace, object);
    let mut refs = Vec::new();
    if let Some(i) = &routing.istio {
        for vs in virtual_services(i) {
            let (vs_name, vs_ns) =
                istio::virtual_service_key(vs.name.as_deref().unwrap_or_default(), &namespace);
            refs.push(ObjectRef::new(RouterKind::VirtualService, vs_ns, vs_name));
        }
        if let Some(dr) = i.destination_rule.as_ref().and_then(|d| d.name.clone()) {
            refs.push(named(RouterKind::DestinationRule, &dr));
        }
    }
    if let Some(n) = &routing.nginx {
        for stable in nginx::stable_ingresses(n).unwrap_or_default() {
            let canary = nginx::canary_ingress_name(&name, &stable);
            refs.push(named(RouterKind::Ingress, &stable));
            refs.push(named(RouterKind::Ingress, &canary));
        }
    }
    if let Some(a) = &routing.alb {
        for ingress in alb::ingresses(a) {
            refs.push(named(RouterKind::Ingress, &ingress));
        }
    }
    if let Some(s) = &routing.smi {
        refs.push(named(
            RouterKind::TrafficSplit,
            &smi::traffic_split_name(s, &name),
        ));
    }
    if let Some(t) = &routing.traefik
        && let Some(ts) = t.weighted_traefik_service_name.as_deref()
    {
        refs.push(named(versions.traefik_kind(), ts));
    }
    if let Some(a) = &routing.ambassador {
        let kind = versions.ambassador_kind();
        for base in a.mappings.iter().flatten() {
            refs.push(named(kind, base));
            refs.push(named(kind, &ambassador::canary_mapping_name(base)));
        }
    }
    if let Some(a) = &routing.apisix
        && let Some(route) = a.route.as_ref().and_then(|r| r.name.as_deref())
    {
        refs.push(named(RouterKind::ApisixRoute, route));
        for header_route in header_route_names(rollout) {
            refs.push(named(RouterKind::ApisixRoute, &header_route));
        }
    }
    if let Some(m) = &routing.app_mesh {
        if let Some(vs) = m.virtual_service.as_ref().and_then(|v| v.name.as_deref()) {
            refs.push(named(RouterKind::AppMeshVirtualService, vs));
        }
        let group = m.virtual_node_group.as_ref();
        for node in [
            group.and_then(|g| g.canary_virtual_node_ref.as_ref()),
            group.and_then(|g| g.stable_virtual_node_ref.as_ref()),
        ]
        .into_iter()
        .flatten()
        .filter_map(|n| n.name.as_deref())
        {
            refs.push(named(RouterKind::AppMeshVirtualNode, node));
        }
    }
    if let Some(Ok(cfg)) = gateway_config(routing) {
        let route_ns = cfg.namespace(&namespace).to_string();
        for route in cfg.routes() {
            refs.push(ObjectRef::new(
                route.kind.router_kind(),
                &route_ns,
                &route.name,
            ));
        }
    }
    refs.sort();
    refs.dedup();
    refs
}

/// Objects that other router objects name: App Mesh's VirtualRouter, from the
/// VirtualService's provider. Fetched after [`references`].
pub fn dependent_references(
    rollout: &Rollout,
    _versions: &ApiVersions,
    objects: &BTreeMap<ObjectRef, Value>,
) -> Vec<ObjectRef> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let Some(m) = routing(rollout).and_then(|r| r.app_mesh.as_ref()) else {
        return Vec::new();
    };
    let Some(vs) = m.virtual_service.as_ref().and_then(|v| v.name.as_deref()) else {
        return Vec::new();
    };
    let key = ObjectRef::new(RouterKind::AppMeshVirtualService, &namespace, vs);
    objects
        .get(&key)
        .and_then(|vs| appmesh::virtual_router_ref(vs, &namespace).ok())
        .map(|(name, ns)| vec![ObjectRef::new(RouterKind::AppMeshVirtualRouter, ns, name)])
        .unwrap_or_default()
}

/// Router objects found by label selector (the Gateway API's route selectors): kind,
/// namespace and selector, for the controller to list before reconciling.
pub fn selections(rollout: &Rollout) -> Vec<(RouterKind, String, String)> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let Some(Some(Ok(cfg))) = routing(rollout).map(gateway_config) else {
        return Vec::new();
    };
    let route_ns = cfg.namespace(&namespace).to_string();
    cfg.selectors
        .iter()
        .map(|s| {
            let text = crate::selector::format_selector(&s.selector);
            (s.kind.router_kind(), route_ns.clone(), text)
        })
        .collect()
}
