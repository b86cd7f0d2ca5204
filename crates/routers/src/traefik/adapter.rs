//! Traefik as a [`TrafficRouter`]: the weights of one weighted TraefikService.

use serde_json::Value;
use sluice_api::rollout::RolloutTrafficRouting;

use crate::edits::Edits;
use crate::kinds::ObjectRef;
use crate::router::{Calls, TrafficRouter, View};
use crate::{Desired, ObservedWeight};

pub struct Traefik;

fn key(view: &View<'_>) -> Option<ObjectRef> {
    let t = view.routing.traefik.as_ref()?;
    Some(ObjectRef::new(
        view.versions.traefik_kind(),
        view.namespace,
        t.weighted_traefik_service_name.clone().unwrap_or_default(),
    ))
}

fn find<'a>(view: &View<'a>) -> Result<(ObjectRef, &'a Value), String> {
    let key = key(view).ok_or_else(|| "traefik: not configured".to_string())?;
    let object = view.find("traefik.weightedTraefikServiceName", &key)?;
    Ok((key, object))
}

impl TrafficRouter for Traefik {
    fn key(&self) -> &'static str {
        "traefik"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        routing.traefik.is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let named = view
            .routing
            .traefik
            .as_ref()
            .is_some_and(|t| t.weighted_traefik_service_name.is_some());
        key(view).filter(|_| named).into_iter().collect()
    }

    fn check(&self, view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        find(view).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight> {
        super::observed_weight(find(view).ok()?.1, desired)
    }

    fn silent_reasons(&self) -> &'static [&'static str] {
        &[super::UPDATED_REASON]
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let (key, object) = find(view)?;
        let ts = edits.current(&key, object).clone();
        edits.apply(&key, false, super::set_weight(&ts, calls.desired))
    }
}
