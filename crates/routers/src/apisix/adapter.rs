//! APISIX as a [`TrafficRouter`]: backend weights of one ApisixRoute, and one ApisixRoute of
//! its own per header route.

use serde_json::Value;
use sluice_api::rollout::{ApisixTrafficRouting, RolloutTrafficRouting};

use crate::edits::Edits;
use crate::kinds::{ObjectRef, RouterKind};
use crate::router::{Calls, TrafficRouter, View};
use crate::{Desired, ObservedWeight};

pub struct Apisix;

struct Found<'a> {
    cfg: &'a ApisixTrafficRouting,
    key: ObjectRef,
    route: &'a Value,
    /// Header routes of the steps and managedRoutes: key and the object if it exists.
    header_routes: Vec<(ObjectRef, Option<&'a Value>)>,
}

fn find<'a>(view: &View<'a>) -> Result<Found<'a>, String> {
    let cfg = view
        .routing
        .apisix
        .as_ref()
        .ok_or_else(|| "apisix: not configured".to_string())?;
    let route_name = cfg.route.as_ref().and_then(|r| r.name.as_deref());
    let key = view.named(RouterKind::ApisixRoute, route_name.unwrap_or_default());
    let route = view.find("apisix.route.name", &key)?;
    let header_routes = view
        .header_route_names()
        .into_iter()
        .map(|n| {
            let k = view.named(RouterKind::ApisixRoute, &n);
            let existing = view.objects.get(&k);
            (k, existing)
        })
        .collect();
    Ok(Found {
        cfg,
        key,
        route,
        header_routes,
    })
}

impl TrafficRouter for Apisix {
    fn key(&self) -> &'static str {
        "apisix"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        routing.apisix.is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let route = view.routing.apisix.as_ref().and_then(|a| a.route.as_ref());
        let Some(route) = route.and_then(|r| r.name.as_deref()) else {
            return Vec::new();
        };
        let mut refs = vec![view.named(RouterKind::ApisixRoute, route)];
        for header_route in view.header_route_names() {
            refs.push(view.named(RouterKind::ApisixRoute, &header_route));
        }
        refs
    }

    fn check(&self, view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        find(view).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight> {
        let found = find(view).ok()?;
        super::observed_weight(found.route, found.cfg, desired)
    }

    fn silent_reasons(&self) -> &'static [&'static str] {
        &[
            super::UPDATED_REASON,
            super::CREATED_REASON,
            super::DELETED_REASON,
        ]
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let d = calls.desired;
        let Found {
            cfg,
            key,
            route,
            header_routes,
        } = find(view)?;
        if calls.remove_managed_routes {
            for (k, existing) in &header_routes {
                if let Some(existing) = existing {
                    let r = super::remove_managed_route(existing, d);
                    edits.change(k, Some(existing), r)?;
                }
            }
        }
        if let Some(step) = calls.header_route
            && let Some((k, existing)) = header_routes
                .iter()
                .find(|(k, _)| step.name.as_deref() == Some(k.name.as_str()))
        {
            let main = edits.current(&key, route).clone();
            let r = super::set_header_route(&main, *existing, cfg, step, d);
            edits.change(k, *existing, r)?;
        }
        let current = edits.current(&key, route).clone();
        edits.apply(&key, false, super::set_weight(&current, cfg, d))
    }
}
