//! The Gateway API plugin as a [`TrafficRouter`]: weights and header rules of the routes it
//! names or selects by label.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_api::label_selector;
use sluice_api::rollout::RolloutTrafficRouting;

use super::{Config, PLUGIN_NAME, RouteKind};
use crate::edits::Edits;
use crate::kinds::ObjectRef;
use crate::router::{Calls, PATH, Report, Selection, TrafficRouter, View, widest};
use crate::{Desired, ObservedWeight};

pub struct GatewayApi;

fn config(routing: &RolloutTrafficRouting) -> Option<Result<Config, String>> {
    let v = routing.plugins.as_ref()?.get(PLUGIN_NAME)?;
    Some(super::parse_config(v).map_err(|e| e.to_string()))
}

/// The configuration with the selected routes added, and each route found:
/// (key, kind, whether it takes header routes, the route).
type Found<'a> = (Config, Vec<(ObjectRef, RouteKind, bool, &'a Value)>);

fn find<'a>(view: &View<'a>) -> Result<Found<'a>, String> {
    let Some(cfg) = config(view.routing) else {
        return Err(format!("{PATH}.plugins: {PLUGIN_NAME} not configured"));
    };
    let mut cfg = cfg.map_err(|e| format!("{PATH}.plugins.{PLUGIN_NAME}: {e}"))?;
    let route_ns = cfg.namespace(view.namespace).to_string();
    // Routes a selector finds join the named ones (the controller listed them).
    for selector in cfg.selectors.clone() {
        let kind = selector.kind.router_kind();
        for (key, object) in view.objects {
            let labels: Option<BTreeMap<String, String>> = object
                .pointer("/metadata/labels")
                .and_then(|l| serde_json::from_value(l.clone()).ok());
            if key.kind == kind
                && key.namespace == route_ns
                && label_selector::matches(&selector.selector, labels.as_ref())
            {
                cfg.add_selected(selector.kind, &key.name);
            }
        }
    }
    cfg.require_routes()
        .map_err(|e| format!("{PATH}.plugins.{PLUGIN_NAME}: {e}"))?;
    let mut routes = Vec::new();
    for route in cfg.routes() {
        let key = ObjectRef::new(route.kind.router_kind(), &route_ns, &route.name);
        let obj = view.find(&format!("plugins.{PLUGIN_NAME}"), &key)?;
        routes.push((key, route.kind, route.use_header_routes, obj));
    }
    Ok((cfg, routes))
}

impl TrafficRouter for GatewayApi {
    fn key(&self) -> &'static str {
        PLUGIN_NAME
    }

    fn is_plugin(&self) -> bool {
        true
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        config(routing).is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let Some(Ok(cfg)) = config(view.routing) else {
            return Vec::new();
        };
        let route_ns = cfg.namespace(view.namespace);
        cfg.routes()
            .iter()
            .map(|route| ObjectRef::new(route.kind.router_kind(), route_ns, &route.name))
            .collect()
    }

    fn selections(&self, view: &View<'_>) -> Vec<Selection> {
        let Some(Ok(cfg)) = config(view.routing) else {
            return Vec::new();
        };
        let route_ns = cfg.namespace(view.namespace).to_string();
        cfg.selectors
            .iter()
            .map(|s| Selection {
                kind: s.kind.router_kind(),
                namespace: route_ns.clone(),
                selector: s.selector.clone(),
            })
            .collect()
    }

    fn check(&self, view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        find(view).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight> {
        let (_, routes) = find(view).ok()?;
        widest(
            routes
                .iter()
                .map(|(_, kind, _, route)| super::observed_weight(route, *kind, desired)),
        )
    }

    /// The plugin always says the weights are verified.
    fn weight_verified(
        &self,
        _view: &View<'_>,
        _desired: &Desired,
        _report: &mut Report<'_>,
    ) -> Option<bool> {
        Some(true)
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let d = calls.desired;
        let (cfg, routes) = find(view)?;
        for (key, kind, use_header_routes, observed) in &routes {
            if calls.remove_managed_routes && *use_header_routes {
                let route = edits.current(key, observed).clone();
                let r = super::remove_managed_routes(&route, *kind, d);
                edits.apply(key, false, r)?;
            }
            if let (Some(step), true) = (calls.header_route, *use_header_routes) {
                let route = edits.current(key, observed).clone();
                let step_name = step.name.as_deref().unwrap_or_default();
                let r = super::set_header_route(&route, *kind, step_name, step, d);
                edits.apply(key, false, r)?;
            }
            let route = edits.current(key, observed).clone();
            let experiments = super::Experiments {
                active: false,
                previous_additional: calls.previous_additional.clone(),
                ports: BTreeMap::new(),
            };
            let r = super::set_weight(&route, *kind, &cfg, &experiments, d);
            edits.apply(key, false, r)?;
        }
        Ok(())
    }
}
