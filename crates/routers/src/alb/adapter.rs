//! The AWS Load Balancer Controller as a [`TrafficRouter`]: weighted forward actions in the
//! annotations of Ingresses, between the ping-pong pair when the Rollout has one.

use serde_json::Value;
use sluice_api::rollout::{AlbTrafficRouting, RolloutTrafficRouting};

use crate::edits::Edits;
use crate::kinds::{ObjectRef, RouterKind};
use crate::router::{Calls, PATH, Report, Shares, SharesBy, TrafficRouter, View, widest};
use crate::{Desired, ObservedWeight};

pub struct Alb;

fn config<'a>(view: &View<'a>) -> Option<&'a AlbTrafficRouting> {
    view.routing.alb.as_ref()
}

/// `desired` with ALB's (canary, stable) Services: the ping-pong pair when there is one.
fn with_services(view: &View<'_>, desired: &Desired) -> Desired {
    Desired {
        canary_service: view.ping_pong_services.0.clone(),
        stable_service: view.ping_pong_services.1.clone(),
        ..desired.clone()
    }
}

/// The settings and each Ingress.
type Found<'a> = (&'a AlbTrafficRouting, Vec<(ObjectRef, &'a Value)>);

/// The Ingresses, checked against `desired` when given.
fn find<'a>(view: &View<'a>, check: Option<&Desired>) -> Result<Found<'a>, String> {
    let Some(a) = config(view) else {
        return Err(format!("{PATH}.alb: not configured"));
    };
    let field = if a.ingress.is_some() {
        "ingress"
    } else {
        "ingresses"
    };
    let mut ingresses = Vec::new();
    for ingress in super::ingresses(a) {
        let key = view.named(RouterKind::Ingress, &ingress);
        let obj = view.find(&format!("alb.{field}"), &key)?;
        if let Some(desired) = check {
            let d = with_services(view, desired);
            super::check_ingress(obj, a, &d)
                .map_err(|e| format!("{PATH}.alb.{field}: Invalid value: \"{ingress}\": {e}"))?;
        }
        ingresses.push((key, obj));
    }
    Ok((a, ingresses))
}

impl TrafficRouter for Alb {
    fn key(&self) -> &'static str {
        "alb"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        routing.alb.is_some()
    }

    /// The Ingresses, and what AWS says of their load balancers when that is to be verified.
    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let ingresses = config(view).map(super::ingresses).unwrap_or_default();
        let mut refs: Vec<ObjectRef> = ingresses
            .iter()
            .map(|ingress| view.named(RouterKind::Ingress, ingress))
            .collect();
        if super::verify::wanted(view) {
            refs.extend(ingresses.iter().map(|i| super::verify::key(view, i)));
        }
        refs
    }

    fn check(&self, view: &View<'_>, desired: &Desired) -> Result<(), String> {
        find(view, Some(desired)).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight> {
        let (cfg, ingresses) = find(view, None).ok()?;
        let d = with_services(view, desired);
        widest(
            ingresses
                .iter()
                .map(|(_, ingress)| super::observed_weight(ingress, cfg, &d)),
        )
    }

    fn shares(&self, view: &View<'_>) -> Shares {
        let (canary, stable) = view.ping_pong_services.clone();
        Shares {
            by: SharesBy::PingPongServices(canary, stable),
            also_named: Vec::new(),
        }
    }

    fn weight_verified(
        &self,
        view: &View<'_>,
        desired: &Desired,
        report: &mut Report<'_>,
    ) -> Option<bool> {
        let cfg = config(view)?;
        let d = with_services(view, desired);
        super::verify::verify(view, cfg, &super::ingresses(cfg), &d, report)
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let (cfg, ingresses) = find(view, None)?;
        let d = &with_services(view, calls.desired);
        for (key, observed) in &ingresses {
            if calls.remove_managed_routes {
                let ingress = edits.current(key, observed).clone();
                let r = super::remove_managed_routes(&ingress, cfg, d);
                edits.apply(key, false, r)?;
            }
            if let Some(step) = calls.header_route {
                let ingress = edits.current(key, observed).clone();
                let r = super::set_header_route(&ingress, cfg, step, d);
                edits.apply(key, false, r)?;
            }
            let ingress = edits.current(key, observed).clone();
            edits.apply(key, false, super::set_weight(&ingress, cfg, d))?;
        }
        Ok(())
    }
}
