//! Finding each configured router's objects. A missing object (other than those Sluice
//! creates) is a spec problem reported as Argo's reference validation words it, and so is an
//! object that cannot be routed as configured (a route the Rollout names that the object
//! lacks, an Ambassador Mapping with a weight of its own, an App Mesh route without exactly
//! two targets).

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_api::rollout::{Rollout, RolloutTrafficRouting};
use sluice_routers::kinds::{ApiVersions, ObjectRef, RouterKind};
use sluice_routers::{Desired, alb, ambassador, appmesh, istio, nginx, smi};

use super::{GATEWAY_API_PLUGIN, Router, gateway_config, header_route_names, virtual_services};

/// A missing object, in the Kubernetes wording Argo's reference validation uses.
fn not_found(path: &str, key: &ObjectRef) -> String {
    format!(
        "{path}: Invalid value: \"{name}\": {plural}.{group} \"{name}\" not found",
        name = key.name,
        plural = key.kind.plural(),
        group = key.kind.group(),
    )
}

/// Finds every router's objects; a missing one (other than those Sluice creates) is a spec
/// problem, and so is a route the configuration names that the object lacks.
pub(crate) fn resolve<'a>(
    rollout: &'a Rollout,
    routing: &'a RolloutTrafficRouting,
    objects: &'a BTreeMap<ObjectRef, Value>,
    desired: &Desired,
    alb_services: (String, String),
    versions: &ApiVersions,
) -> Result<Vec<Router<'a>>, String> {
    const PATH: &str = "spec.strategy.canary.trafficRouting";
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let name = rollout.metadata.name.clone().unwrap_or_default();
    let mut routers = Vec::new();
    if let Some(i) = &routing.istio {
        let field = if i.virtual_service.is_some() {
            "virtualService"
        } else {
            "virtualServices"
        };
        let dr_ref = i.destination_rule.as_ref();
        let mut vss = Vec::new();
        for vs in virtual_services(i) {
            let (vs_name, vs_ns) =
                istio::virtual_service_key(vs.name.as_deref().unwrap_or_default(), &namespace);
            let key = ObjectRef::new(RouterKind::VirtualService, vs_ns, vs_name);
            let obj = objects
                .get(&key)
                .ok_or_else(|| not_found(&format!("{PATH}.istio.{field}.name"), &key))?;
            istio::check_routes(obj, vs, dr_ref, desired).map_err(|e| e.to_string())?;
            vss.push((key, vs, obj));
        }
        if vss.is_empty() {
            return Err(format!(
                "{PATH}.istio: Invalid value: \"\": either VirtualService or VirtualServices must be configured"
            ));
        }
        let destination_rule = match dr_ref {
            Some(dr) => {
                let key = ObjectRef::new(
                    RouterKind::DestinationRule,
                    &namespace,
                    dr.name.clone().unwrap_or_default(),
                );
                let obj = objects.get(&key).ok_or_else(|| {
                    not_found(&format!("{PATH}.istio.destinationRule.name"), &key)
                })?;
                Some((key, dr, obj))
            }
            None => None,
        };
        routers.push(Router::Istio {
            virtual_services: vss,
            destination_rule,
        });
    }
    if let Some(n) = &routing.nginx {
        let stables = nginx::stable_ingresses(n).map_err(|e| format!("{PATH}.nginx: {e}"))?;
        let mut ingresses = Vec::new();
        for stable in stables {
            let key = ObjectRef::new(RouterKind::Ingress, &namespace, &stable);
            let obj = objects
                .get(&key)
                .ok_or_else(|| not_found(&format!("{PATH}.nginx.stableIngress"), &key))?;
            let canary_key = ObjectRef::new(
                RouterKind::Ingress,
                &namespace,
                nginx::canary_ingress_name(&name, &stable),
            );
            let canary = objects.get(&canary_key);
            ingresses.push((obj, canary_key, canary));
        }
        routers.push(Router::Nginx {
            cfg: n,
            max_weight: routing.max_traffic_weight,
            ingresses,
        });
    }
    if let Some(a) = &routing.alb {
        let mut ingresses = Vec::new();
        for ingress in alb::ingresses(a) {
            let key = ObjectRef::new(RouterKind::Ingress, &namespace, &ingress);
            let field = if a.ingress.is_some() {
                "ingress"
            } else {
                "ingresses"
            };
            let obj = objects
                .get(&key)
                .ok_or_else(|| not_found(&format!("{PATH}.alb.{field}"), &key))?;
            let d = super::with_services(desired, &alb_services);
            alb::check_ingress(obj, a, &d)
                .map_err(|e| format!("{PATH}.alb.{field}: Invalid value: \"{ingress}\": {e}"))?;
            ingresses.push((key, obj));
        }
        routers.push(Router::Alb {
            cfg: a,
            ingresses,
            services: alb_services,
        });
    }
    if let Some(s) = &routing.smi {
        let key = ObjectRef::new(
            RouterKind::TrafficSplit,
            &namespace,
            smi::traffic_split_name(s, &name),
        );
        let existing = objects.get(&key);
        routers.push(Router::Smi {
            cfg: s,
            key,
            existing,
        });
    }
    if let Some(t) = &routing.traefik {
        let key = ObjectRef::new(
            versions.traefik_kind(),
            &namespace,
            t.weighted_traefik_service_name.clone().unwrap_or_default(),
        );
        let object = objects.get(&key).ok_or_else(|| {
            not_found(&format!("{PATH}.traefik.weightedTraefikServiceName"), &key)
        })?;
        routers.push(Router::Traefik { key, object });
    }
    if let Some(a) = &routing.ambassador {
        let kind = versions.ambassador_kind();
        let mut mappings = Vec::new();
        for base in a.mappings.iter().flatten() {
            let key = ObjectRef::new(kind, &namespace, base);
            let obj = objects
                .get(&key)
                .ok_or_else(|| not_found(&format!("{PATH}.ambassador.mappings"), &key))?;
            // Argo places this error at the Mapping's own field.
            ambassador::check_base(obj)
                .map_err(|e| format!("spec.weight: Invalid value: \"{base}\": {e}"))?;
            let canary_key =
                ObjectRef::new(kind, &namespace, ambassador::canary_mapping_name(base));
            let canary = objects.get(&canary_key);
            mappings.push((obj, canary_key, canary));
        }
        routers.push(Router::Ambassador { mappings });
    }
    if let Some(a) = &routing.apisix {
        let route_name = a
            .route
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        let key = ObjectRef::new(RouterKind::ApisixRoute, &namespace, route_name);
        let route = objects
            .get(&key)
            .ok_or_else(|| not_found(&format!("{PATH}.apisix.route.name"), &key))?;
        let header_routes = header_route_names(rollout)
            .into_iter()
            .map(|n| {
                let k = ObjectRef::new(RouterKind::ApisixRoute, &namespace, n);
                let existing = objects.get(&k);
                (k, existing)
            })
            .collect();
        routers.push(Router::Apisix {
            cfg: a,
            key,
            route,
            header_routes,
        });
    }
    if let Some(m) = &routing.app_mesh {
        let vs_name = m
            .virtual_service
            .as_ref()
            .and_then(|v| v.name.clone())
            .unwrap_or_default();
        let vs_key = ObjectRef::new(RouterKind::AppMeshVirtualService, &namespace, vs_name);
        let vs = objects
            .get(&vs_key)
            .ok_or_else(|| not_found(&format!("{PATH}.appMesh.virtualService.name"), &vs_key))?;
        let (vr_name, vr_ns) =
            appmesh::virtual_router_ref(vs, &namespace).map_err(|e| e.to_string())?;
        let vr_key = ObjectRef::new(RouterKind::AppMeshVirtualRouter, vr_ns, vr_name);
        let vr = objects
            .get(&vr_key)
            .ok_or_else(|| not_found(&format!("{PATH}.appMesh.virtualService.name"), &vr_key))?;
        appmesh::check_routes(vr, m).map_err(|e| e.to_string())?;
        let group = m.virtual_node_group.as_ref();
        let node = |field: &str, r: Option<&sluice_api::rollout::AppMeshVirtualNodeReference>| {
            let key = ObjectRef::new(
                RouterKind::AppMeshVirtualNode,
                &namespace,
                r.and_then(|r| r.name.clone()).unwrap_or_default(),
            );
            objects.get(&key).map(|o| (key.clone(), o)).ok_or_else(|| {
                not_found(
                    &format!("{PATH}.appMesh.virtualNodeGroup.{field}.name"),
                    &key,
                )
            })
        };
        let canary_node = node(
            "canaryVirtualNodeRef",
            group.and_then(|g| g.canary_virtual_node_ref.as_ref()),
        )?;
        let stable_node = node(
            "stableVirtualNodeRef",
            group.and_then(|g| g.stable_virtual_node_ref.as_ref()),
        )?;
        routers.push(Router::AppMesh {
            cfg: m,
            namespace: namespace.clone(),
            router: (vr_key, vr),
            canary_node,
            stable_node,
        });
    }
    if let Some(cfg) = gateway_config(routing) {
        let mut cfg = cfg.map_err(|e| format!("{PATH}.plugins.{GATEWAY_API_PLUGIN}: {e}"))?;
        let route_ns = cfg.namespace(&namespace).to_string();
        // Routes a selector finds join the named ones (the controller listed them).
        for selector in cfg.selectors.clone() {
            let kind = selector.kind.router_kind();
            for (key, object) in objects {
                let labels = object
                    .pointer("/metadata/labels")
                    .and_then(|l| serde_json::from_value(l.clone()).ok());
                if key.kind == kind
                    && key.namespace == route_ns
                    && crate::selector::matches(&selector.selector, labels.as_ref())
                {
                    cfg.add_selected(selector.kind, &key.name);
                }
            }
        }
        cfg.require_routes()
            .map_err(|e| format!("{PATH}.plugins.{GATEWAY_API_PLUGIN}: {e}"))?;
        let mut routes = Vec::new();
        for route in cfg.routes() {
            let key = ObjectRef::new(route.kind.router_kind(), &route_ns, &route.name);
            let obj = objects
                .get(&key)
                .ok_or_else(|| not_found(&format!("{PATH}.plugins.{GATEWAY_API_PLUGIN}"), &key))?;
            routes.push((key, route.kind, route.use_header_routes, obj));
        }
        routers.push(Router::Gateway { cfg, routes });
    }
    Ok(routers)
}
