//! The router objects of one Rollout: found (a missing one is a spec problem, as in Argo's
//! reference validation) and edited. Every router's edits in one reconcile are chained on a
//! working copy of each object, so that one object gets at most one write, carrying the
//! resourceVersion it was read at: a concurrent change makes the write fail with a conflict
//! and the next reconcile decides afresh.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_api::rollout::{
    IstioDestinationRule, IstioVirtualService, NginxTrafficRouting, Rollout, RolloutTrafficRouting,
    SetHeaderRoute, SetMirrorRoute, SmiTrafficRouting,
};
use sluice_routers::kinds::{ApiVersions, ObjectRef, RouterKind};
use sluice_routers::{Desired, Edit, EditResult, ObservedWeight, gateway, istio, nginx, smi};

use super::GATEWAY_API_PLUGIN;
use crate::plan::{Action, Event};

/// One configured router with its objects as observed.
pub(crate) enum Router<'a> {
    Istio {
        virtual_services: Vec<(ObjectRef, &'a IstioVirtualService, &'a Value)>,
        destination_rule: Option<(ObjectRef, &'a IstioDestinationRule, &'a Value)>,
    },
    Nginx {
        cfg: &'a NginxTrafficRouting,
        max_weight: Option<i32>,
        /// (stable Ingress, the canary Ingress's key, the canary Ingress if it exists)
        ingresses: Vec<(&'a Value, ObjectRef, Option<&'a Value>)>,
    },
    Smi {
        cfg: &'a SmiTrafficRouting,
        key: ObjectRef,
        existing: Option<&'a Value>,
    },
    Gateway {
        cfg: gateway::Config,
        routes: Vec<(ObjectRef, gateway::RouteKind, bool, &'a Value)>,
    },
}

/// The objects a Rollout's routers read, for the controller to fetch before reconciling.
pub fn references(rollout: &Rollout) -> Vec<ObjectRef> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let name = rollout.metadata.name.clone().unwrap_or_default();
    let Some(routing) = rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.traffic_routing.as_ref())
    else {
        return Vec::new();
    };
    let mut refs = Vec::new();
    if let Some(i) = &routing.istio {
        for vs in virtual_services(i) {
            let (vs_name, vs_ns) =
                istio::virtual_service_key(vs.name.as_deref().unwrap_or_default(), &namespace);
            refs.push(ObjectRef::new(RouterKind::VirtualService, vs_ns, vs_name));
        }
        if let Some(dr) = i.destination_rule.as_ref().and_then(|d| d.name.clone()) {
            refs.push(ObjectRef::new(RouterKind::DestinationRule, &namespace, dr));
        }
    }
    if let Some(n) = &routing.nginx {
        for stable in nginx::stable_ingresses(n).unwrap_or_default() {
            let canary = nginx::canary_ingress_name(&name, &stable);
            refs.push(ObjectRef::new(RouterKind::Ingress, &namespace, stable));
            refs.push(ObjectRef::new(RouterKind::Ingress, &namespace, canary));
        }
    }
    if let Some(s) = &routing.smi {
        let ts = smi::traffic_split_name(s, &name);
        refs.push(ObjectRef::new(RouterKind::TrafficSplit, &namespace, ts));
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

/// Router objects found by label selector (the Gateway API's route selectors): kind,
/// namespace and selector, for the controller to list before reconciling.
pub fn selections(rollout: &Rollout) -> Vec<(RouterKind, String, String)> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    let Some(Some(Ok(cfg))) = rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.traffic_routing.as_ref())
        .map(gateway_config)
    else {
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

fn virtual_services(i: &sluice_api::rollout::IstioTrafficRouting) -> Vec<&IstioVirtualService> {
    i.virtual_service
        .iter()
        .chain(i.virtual_services.iter().flatten())
        .collect()
}

fn gateway_config(routing: &RolloutTrafficRouting) -> Option<Result<gateway::Config, String>> {
    let v = routing.plugins.as_ref()?.get(GATEWAY_API_PLUGIN)?;
    Some(gateway::parse_config(v).map_err(|e| e.to_string()))
}

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

/// What one reconcile asks of the routers.
pub(crate) struct Calls<'a> {
    pub desired: &'a Desired,
    pub remove_managed_routes: bool,
    /// Names of every route a header or mirror step manages (for removal).
    pub step_route_names: Vec<String>,
    pub header_route: Option<&'a SetHeaderRoute>,
    pub mirror_route: Option<&'a SetMirrorRoute>,
    /// Experiment destinations recorded in the status last time (the Gateway API removes
    /// them once the experiment is over).
    pub previous_additional: Vec<String>,
    pub versions: &'a ApiVersions,
    pub rollout_name: &'a str,
}

/// Working copies of the objects being edited.
#[derive(Default)]
pub(crate) struct Edits {
    objects: BTreeMap<ObjectRef, (Value, bool)>,
    order: Vec<ObjectRef>,
    pub events: Vec<Event>,
}

impl Edits {
    fn current<'v>(&'v self, key: &ObjectRef, observed: &'v Value) -> &'v Value {
        self.objects.get(key).map_or(observed, |(v, _)| v)
    }

    fn apply(&mut self, key: &ObjectRef, create: bool, result: EditResult) -> Result<(), String> {
        match result.map_err(|e| e.to_string())? {
            None => {}
            Some(Edit { object, event }) => {
                if !self.objects.contains_key(key) {
                    self.order.push(key.clone());
                }
                let create = create && self.objects.get(key).is_none_or(|(_, c)| *c);
                self.objects.insert(key.clone(), (object, create));
                // Argo publishes nothing when it updates a TrafficSplit.
                if event.0 != smi::UPDATED_REASON {
                    self.events.push(Event::normal(event.0, event.1));
                }
            }
        }
        Ok(())
    }

    /// The writes, one per changed object, in the order first changed.
    pub(crate) fn into_actions(self) -> Vec<Action> {
        let mut objects = self.objects;
        self.order
            .into_iter()
            .filter_map(|key| {
                let (object, create) = objects.remove(&key)?;
                Some(if create {
                    Action::CreateRouterObject {
                        target: key,
                        object: Box::new(object),
                    }
                } else {
                    Action::UpdateRouterObject {
                        target: key,
                        object: Box::new(object),
                    }
                })
            })
            .collect()
    }
}

impl Router<'_> {
    /// Every edit of this router for one reconcile, in Argo's call order: managed routes
    /// removed, the current step's header or mirror route, subset hashes, the weight.
    pub(crate) fn edit(&self, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let d = calls.desired;
        match self {
            Router::Istio {
                virtual_services,
                destination_rule,
            } => {
                let dr_ref = destination_rule.as_ref().map(|(_, r, _)| *r);
                let dr_host = destination_rule
                    .as_ref()
                    .and_then(|(_, _, v)| v.pointer("/spec/host"))
                    .and_then(Value::as_str);
                for (key, _, observed) in virtual_services {
                    let name = key.name.as_str();
                    if calls.remove_managed_routes {
                        let vs = edits.current(key, observed).clone();
                        let r = istio::remove_managed_routes(&vs, name, &calls.step_route_names);
                        edits.apply(key, false, r)?;
                    }
                    if let Some(step) = calls.header_route {
                        let vs = edits.current(key, observed).clone();
                        let r = istio::set_header_route(&vs, name, step, dr_host, dr_ref, d);
                        edits.apply(key, false, r)?;
                    }
                    if let Some(step) = calls.mirror_route {
                        let vs = edits.current(key, observed).clone();
                        let r = istio::set_mirror_route(&vs, name, step, dr_host, dr_ref, d);
                        edits.apply(key, false, r)?;
                    }
                }
                if let Some((key, dr_ref, observed)) = destination_rule {
                    let dr = edits.current(key, observed).clone();
                    let r = istio::update_hash(&dr, dr_ref, calls.rollout_name, d);
                    edits.apply(key, false, r)?;
                }
                for (key, vs_ref, observed) in virtual_services {
                    let vs = edits.current(key, observed).clone();
                    let r = istio::set_weight(&vs, vs_ref, dr_ref, d);
                    edits.apply(key, false, r)?;
                }
            }
            Router::Nginx {
                cfg,
                max_weight,
                ingresses,
            } => {
                for (stable, canary_key, canary) in ingresses {
                    let r = nginx::set_weight(stable, *canary, cfg, *max_weight, d);
                    edits.apply(canary_key, canary.is_none(), r)?;
                }
            }
            Router::Smi { cfg, key, existing } => {
                let r = smi::set_weight(*existing, cfg, &calls.versions.smi, d);
                edits.apply(key, existing.is_none(), r)?;
            }
            Router::Gateway { cfg, routes } => {
                for (key, kind, use_header_routes, observed) in routes {
                    if calls.remove_managed_routes && *use_header_routes {
                        let route = edits.current(key, observed).clone();
                        let r = gateway::remove_managed_routes(&route, *kind, d);
                        edits.apply(key, false, r)?;
                    }
                    if let (Some(step), true) = (calls.header_route, *use_header_routes) {
                        let route = edits.current(key, observed).clone();
                        let step_name = step.name.as_deref().unwrap_or_default();
                        let r = gateway::set_header_route(&route, *kind, step_name, step, d);
                        edits.apply(key, false, r)?;
                    }
                    let route = edits.current(key, observed).clone();
                    let experiments = gateway::Experiments {
                        active: false,
                        previous_additional: calls.previous_additional.clone(),
                        ports: BTreeMap::new(),
                    };
                    let r = gateway::set_weight(&route, *kind, cfg, &experiments, d);
                    edits.apply(key, false, r)?;
                }
            }
        }
        Ok(())
    }

    /// Whether this router confirms the weights it was given (`weights.verified`): the Gateway
    /// API plugin always says so; the other built-in routers have nothing to verify.
    pub(crate) fn verifies(&self) -> bool {
        matches!(self, Router::Gateway { .. })
    }

    /// The canary and stable weights as this router's objects route them now.
    pub(crate) fn observed_weight(&self, desired: &Desired) -> Option<ObservedWeight> {
        let combine = |a: Option<ObservedWeight>, b: Option<ObservedWeight>| match (a, b) {
            (Some(a), Some(b)) => Some(ObservedWeight {
                canary: a.canary.max(b.canary),
                stable: a.stable.max(b.stable),
            }),
            (a, b) => a.or(b),
        };
        match self {
            Router::Istio {
                virtual_services,
                destination_rule,
            } => {
                let dr_ref = destination_rule.as_ref().map(|(_, r, _)| *r);
                virtual_services
                    .iter()
                    .map(|(_, vs_ref, vs)| istio::observed_weight(vs, vs_ref, dr_ref, desired))
                    .fold(None, combine)
            }
            Router::Nginx {
                cfg,
                max_weight,
                ingresses,
            } => ingresses
                .iter()
                .map(|(_, _, canary)| match canary {
                    Some(c) => nginx::observed_weight(c, cfg, *max_weight),
                    // No canary Ingress: all traffic goes the stable way.
                    None => Some(ObservedWeight {
                        canary: 0,
                        stable: max_weight.unwrap_or(100),
                    }),
                })
                .fold(None, combine),
            Router::Smi { existing, .. } => match existing {
                Some(ts) => smi::observed_weight(ts, desired),
                None => Some(ObservedWeight {
                    canary: 0,
                    stable: desired.max_weight,
                }),
            },
            Router::Gateway { routes, .. } => routes
                .iter()
                .map(|(_, kind, _, route)| gateway::observed_weight(route, *kind, desired))
                .fold(None, combine),
        }
    }

    /// Hashes a DestinationRule's subsets still select (those pods may get traffic).
    pub(crate) fn subset_hashes(&self) -> Vec<String> {
        match self {
            Router::Istio {
                destination_rule: Some((_, _, dr)),
                ..
            } => istio::subset_hashes(dr),
            _ => Vec::new(),
        }
    }

    /// Pure subset mode (no canary or stable Service): the DestinationRule's subsets decide
    /// where traffic goes.
    pub(crate) fn subset_mode(&self) -> bool {
        matches!(
            self,
            Router::Istio {
                destination_rule: Some(_),
                ..
            }
        )
    }

    /// The pod hash a DestinationRule subset selects now.
    pub(crate) fn subset_hash(&self, subset: &str) -> Option<String> {
        let Router::Istio {
            destination_rule: Some((_, _, dr)),
            ..
        } = self
        else {
            return None;
        };
        dr.pointer("/spec/subsets")?
            .as_array()?
            .iter()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(subset))?
            .pointer("/labels/rollouts-pod-template-hash")?
            .as_str()
            .map(str::to_string)
    }
}
