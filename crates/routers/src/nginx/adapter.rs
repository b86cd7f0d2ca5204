//! NGINX as a [`TrafficRouter`]: one canary Ingress per stable Ingress, created from it and
//! weighted by annotations.

use serde_json::Value;
use sluice_api::rollout::{NginxTrafficRouting, RolloutTrafficRouting};

use crate::edits::Edits;
use crate::kinds::{ObjectRef, RouterKind};
use crate::router::{Calls, PATH, TrafficRouter, View, widest};
use crate::{Desired, ObservedWeight};

pub struct Nginx;

/// (stable Ingress, the canary Ingress's key, the canary Ingress if it exists)
type Found<'a> = Vec<(&'a Value, ObjectRef, Option<&'a Value>)>;

fn config<'a>(view: &View<'a>) -> Option<&'a NginxTrafficRouting> {
    view.routing.nginx.as_ref()
}

fn find<'a>(view: &View<'a>) -> Result<(&'a NginxTrafficRouting, Found<'a>), String> {
    let Some(n) = config(view) else {
        return Err(format!("{PATH}.nginx: not configured"));
    };
    let stables = super::stable_ingresses(n).map_err(|e| format!("{PATH}.nginx: {e}"))?;
    let mut ingresses = Vec::new();
    for stable in stables {
        let key = view.named(RouterKind::Ingress, &stable);
        let obj = view.find("nginx.stableIngress", &key)?;
        let canary_key = view.named(
            RouterKind::Ingress,
            &super::canary_ingress_name(view.name, &stable),
        );
        let canary = view.objects.get(&canary_key);
        ingresses.push((obj, canary_key, canary));
    }
    Ok((n, ingresses))
}

impl TrafficRouter for Nginx {
    fn key(&self) -> &'static str {
        "nginx"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        routing.nginx.is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let Some(n) = config(view) else {
            return Vec::new();
        };
        let mut refs = Vec::new();
        for stable in super::stable_ingresses(n).unwrap_or_default() {
            let canary = super::canary_ingress_name(view.name, &stable);
            refs.push(view.named(RouterKind::Ingress, &stable));
            refs.push(view.named(RouterKind::Ingress, &canary));
        }
        refs
    }

    fn check(&self, view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        find(view).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, _desired: &Desired) -> Option<ObservedWeight> {
        let (cfg, ingresses) = find(view).ok()?;
        let max_weight = view.routing.max_traffic_weight;
        widest(ingresses.iter().map(|(_, _, canary)| match canary {
            Some(c) => super::observed_weight(c, cfg, max_weight),
            // No canary Ingress: all traffic goes the stable way.
            None => Some(ObservedWeight {
                canary: 0,
                stable: max_weight.unwrap_or(100),
            }),
        }))
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let (cfg, ingresses) = find(view)?;
        let max_weight = view.routing.max_traffic_weight;
        for (stable, canary_key, canary) in ingresses {
            let r = super::set_weight(stable, canary, cfg, max_weight, calls.desired);
            let create = canary.is_none();
            edits.apply(&canary_key, create, r)?;
            // The header route lives on the canary Ingress, as just written if it is new.
            let observed = canary.cloned().unwrap_or_default();
            if calls.remove_managed_routes {
                let current = edits.current(&canary_key, &observed).clone();
                let r = super::remove_header_route(&current, cfg);
                edits.apply(&canary_key, create, r)?;
            }
            if let Some(step) = calls.header_route {
                let current = edits.current(&canary_key, &observed).clone();
                let r = super::set_header_route(&current, cfg, step);
                edits.apply(&canary_key, create, r)?;
            }
        }
        Ok(())
    }
}
