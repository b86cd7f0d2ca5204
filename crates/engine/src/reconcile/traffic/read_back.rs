//! The weight each ReplicaSet gets *now*, read back from the router objects as observed: the
//! scale-down safety rule. Traffic reaches a ReplicaSet through the Service (or the
//! DestinationRule subset) that selects its pod-template hash; a ReplicaSet is never scaled
//! below what that weight needs, whatever the plan thinks it last wrote. A router that has not
//! yet taken a lower weight therefore holds the pods behind it, and the scale-down follows on
//! the reconcile that reads the lower weight back.

use std::collections::BTreeMap;

use sluice_routers::router::SharesBy;

use super::World;
use super::routers::Routers;
use crate::labels::POD_TEMPLATE_HASH;

/// The largest canary weight any router gives now.
pub(in crate::reconcile) fn routed_canary_weight(world: &World<'_>, routers: &Routers<'_>) -> i32 {
    let desired = world.router_desired("", "", 0);
    routers
        .observed(&desired)
        .filter_map(|(weight, _)| weight)
        .map(|w| w.canary)
        .max()
        .unwrap_or(0)
}

/// Weight per pod-template hash, the largest any router gives it.
pub(in crate::reconcile) fn routed_hashes(
    world: &World<'_>,
    routers: &Routers<'_>,
) -> BTreeMap<String, i32> {
    let canary = world.spec.canary();
    let selected = |service: Option<&String>| -> Option<String> {
        let name = service.filter(|n| !n.is_empty())?;
        world
            .services
            .iter()
            .find(|s| s.metadata.name.as_ref() == Some(name))?
            .spec
            .as_ref()?
            .selector
            .as_ref()?
            .get(POD_TEMPLATE_HASH)
            .cloned()
    };
    let (canary_svc, stable_svc) = world.service_roles(false);
    let canary_svc_hash = selected(Some(&canary_svc));
    let stable_svc_hash = selected(Some(&stable_svc));
    // A ping-pong pair's canary Service keeps selecting the previous stable pods after a
    // promotion; at weight 0 it holds nothing.
    let ping_pong = canary.ping_pong.is_some();
    let named = |s: &Option<String>| s.as_deref().is_some_and(|n| !n.is_empty());
    let plain_is_ping_pong =
        ping_pong && !named(&canary.canary_service) && !named(&canary.stable_service);
    let desired = world.router_desired("", "", 0);
    let mut out: BTreeMap<String, i32> = BTreeMap::new();
    for (weight, shares) in routers.observed(&desired) {
        let Some(weight) = weight else {
            continue;
        };
        let uses_ping_pong = if matches!(shares.by, SharesBy::PingPongServices(..)) {
            ping_pong
        } else {
            plain_is_ping_pong
        };
        let (canary_hash, stable_hash) = match shares.by {
            SharesBy::Hashes { canary, stable } => (canary, stable),
            SharesBy::PingPongServices(c, s) => (selected(Some(&c)), selected(Some(&s))),
            SharesBy::HashesOrServices { canary, stable } => (
                canary.or(canary_svc_hash.clone()),
                stable.or(stable_svc_hash.clone()),
            ),
            SharesBy::RolloutServices => (canary_svc_hash.clone(), stable_svc_hash.clone()),
        };
        let mut mine: BTreeMap<String, i32> = BTreeMap::new();
        let skip_idle_canary = uses_ping_pong && weight.canary == 0;
        let canary_hash = canary_hash.filter(|_| !skip_idle_canary);
        for (hash, w) in [(canary_hash, weight.canary), (stable_hash, weight.stable)] {
            if let Some(hash) = hash {
                *mine.entry(hash).or_default() += w.max(0);
            }
        }
        for hash in shares.also_named {
            mine.entry(hash).or_default();
        }
        for (hash, w) in mine {
            let e = out.entry(hash).or_default();
            *e = (*e).max(w);
        }
    }
    out
}
