//! Istio as a [`TrafficRouter`]: weights in VirtualService routes, canary and stable subsets of
//! an optional DestinationRule pointed at pod hashes.

use serde_json::Value;
use sluice_api::rollout::{IstioDestinationRule, IstioTrafficRouting, IstioVirtualService};

use crate::edits::Edits;
use crate::kinds::{ObjectRef, RouterKind};
use crate::router::{Calls, PATH, Shares, SharesBy, TrafficRouter, View, widest};
use crate::{Desired, ObservedWeight};

pub struct Istio;

type Found<'a> = (
    Vec<(ObjectRef, &'a IstioVirtualService, &'a Value)>,
    Option<(ObjectRef, &'a IstioDestinationRule, &'a Value)>,
);

fn config<'a>(view: &View<'a>) -> Option<&'a IstioTrafficRouting> {
    view.routing.istio.as_ref()
}

fn virtual_services(i: &IstioTrafficRouting) -> impl Iterator<Item = &IstioVirtualService> {
    i.virtual_service
        .iter()
        .chain(i.virtual_services.iter().flatten())
}

fn virtual_service_ref(view: &View<'_>, vs: &IstioVirtualService) -> ObjectRef {
    let (name, namespace) =
        super::virtual_service_key(vs.name.as_deref().unwrap_or_default(), view.namespace);
    ObjectRef::new(RouterKind::VirtualService, namespace, name)
}

/// The objects found, and with `desired` the routes checked, in Argo's order: each
/// VirtualService, then the DestinationRule.
fn find<'a>(view: &View<'a>, check: Option<&Desired>) -> Result<Found<'a>, String> {
    let Some(i) = config(view) else {
        return Ok((Vec::new(), None));
    };
    let field = if i.virtual_service.is_some() {
        "virtualService"
    } else {
        "virtualServices"
    };
    let dr_ref = i.destination_rule.as_ref();
    let mut vss = Vec::new();
    for vs in virtual_services(i) {
        let key = virtual_service_ref(view, vs);
        let obj = view.find(&format!("istio.{field}.name"), &key)?;
        if let Some(desired) = check {
            super::check_routes(obj, vs, dr_ref, desired).map_err(|e| e.to_string())?;
        }
        vss.push((key, vs, obj));
    }
    if vss.is_empty() {
        return Err(format!(
            "{PATH}.istio: Invalid value: \"\": either VirtualService or VirtualServices must be configured"
        ));
    }
    let destination_rule = match dr_ref {
        Some(dr) => {
            let key = view.named(
                RouterKind::DestinationRule,
                dr.name.as_deref().unwrap_or_default(),
            );
            let obj = view.find("istio.destinationRule.name", &key)?;
            Some((key, dr, obj))
        }
        None => None,
    };
    Ok((vss, destination_rule))
}

/// The pod hash a DestinationRule subset selects now.
fn subset_hash(dr: &Value, subset: &str) -> Option<String> {
    dr.pointer("/spec/subsets")?
        .as_array()?
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(subset))?
        .pointer("/labels/rollouts-pod-template-hash")?
        .as_str()
        .map(str::to_string)
}

impl TrafficRouter for Istio {
    fn key(&self) -> &'static str {
        "istio"
    }

    fn configured(&self, routing: &sluice_api::rollout::RolloutTrafficRouting) -> bool {
        routing.istio.is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let Some(i) = config(view) else {
            return Vec::new();
        };
        let mut refs: Vec<ObjectRef> = virtual_services(i)
            .map(|vs| virtual_service_ref(view, vs))
            .collect();
        if let Some(dr) = i.destination_rule.as_ref().and_then(|d| d.name.as_deref()) {
            refs.push(view.named(RouterKind::DestinationRule, dr));
        }
        refs
    }

    fn check(&self, view: &View<'_>, desired: &Desired) -> Result<(), String> {
        find(view, Some(desired)).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight> {
        let (vss, dr) = find(view, None).ok()?;
        let dr_ref = dr.as_ref().map(|(_, r, _)| *r);
        widest(
            vss.iter()
                .map(|(_, vs_ref, vs)| super::observed_weight(vs, vs_ref, dr_ref, desired)),
        )
    }

    /// With a DestinationRule its subsets decide where traffic goes, falling back to the
    /// Services for a subset that names no hash; every hash a subset names may get traffic.
    fn shares(&self, view: &View<'_>) -> Shares {
        let Ok((_, Some((_, dr_ref, dr)))) = find(view, None) else {
            return Shares::default();
        };
        let subset = |name: Option<&String>| name.and_then(|n| subset_hash(dr, n));
        Shares {
            by: SharesBy::HashesOrServices {
                canary: subset(dr_ref.canary_subset_name.as_ref()),
                stable: subset(dr_ref.stable_subset_name.as_ref()),
            },
            also_named: super::subset_hashes(dr),
        }
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let d = calls.desired;
        let (virtual_services, destination_rule) = find(view, None)?;
        let dr_ref = destination_rule.as_ref().map(|(_, r, _)| *r);
        let dr_host = destination_rule
            .as_ref()
            .and_then(|(_, _, v)| v.pointer("/spec/host"))
            .and_then(Value::as_str);
        for (key, _, observed) in &virtual_services {
            let name = key.name.as_str();
            if calls.remove_managed_routes {
                let vs = edits.current(key, observed).clone();
                let r = super::remove_managed_routes(&vs, name, &calls.step_route_names);
                edits.apply(key, false, r)?;
            }
            if let Some(step) = calls.header_route {
                let vs = edits.current(key, observed).clone();
                let r = super::set_header_route(&vs, name, step, dr_host, dr_ref, d);
                edits.apply(key, false, r)?;
            }
            if let Some(step) = calls.mirror_route {
                let vs = edits.current(key, observed).clone();
                let r = super::set_mirror_route(&vs, name, step, dr_host, dr_ref, d);
                edits.apply(key, false, r)?;
            }
        }
        if let Some((key, dr_ref, observed)) = &destination_rule {
            let dr = edits.current(key, observed).clone();
            let r = super::update_hash(&dr, dr_ref, calls.rollout_name, d);
            edits.apply(key, false, r)?;
        }
        for (key, vs_ref, observed) in &virtual_services {
            let vs = edits.current(key, observed).clone();
            let r = super::set_weight(&vs, vs_ref, dr_ref, d);
            edits.apply(key, false, r)?;
        }
        Ok(())
    }
}
