//! `observed_weight`: the canary and stable weights a VirtualService gives right now, for the
//! scale-down safety rule, which must trust the router object rather than what was last
//! written.

use serde_json::Value;
use sluice_api::rollout::{IstioDestinationRule, IstioVirtualService};

use super::destination::{Classifier, Role};
use super::select::{self, Mirrors, SECTIONS};
use super::value;
use crate::{Desired, ObservedWeight};

/// The weights of the routes `set_weight` manages (HTTP, TLS and TCP, mirror routes included).
///
/// Each route gives the summed weight of its canary destinations and of its stable ones. When
/// every selected route agrees, that is the answer. When they disagree (a route edited by hand,
/// a write half done), the answer is the largest canary weight and the smallest stable weight
/// of any route: the traffic the canary may be receiving somewhere and the least the stable is
/// guaranteed everywhere, so that a safety check built on it errs on the side of keeping pods.
///
/// `None` when the routes cannot be selected (a named route is missing, a route lacks the canary
/// or the stable) or when no route is selected at all.
pub fn observed_weight(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> Option<ObservedWeight> {
    let selection = select::weighted(vs, vs_ref, dr, desired, Mirrors::Include).ok()?;
    let classifier = Classifier::new(dr, desired);
    let mut weights = Vec::new();
    for section in SECTIONS {
        let Ok(Some(routes)) = value::routes(vs, section) else {
            continue;
        };
        for &i in selection.get(section) {
            if let Some(route) = routes.get(i) {
                weights.push(route_weight(value::destinations(route), &classifier));
            }
        }
    }
    let first = *weights.first()?;
    if weights.iter().all(|w| *w == first) {
        return Some(first);
    }
    Some(ObservedWeight {
        canary: weights
            .iter()
            .map(|w| w.canary)
            .max()
            .unwrap_or(first.canary),
        stable: weights
            .iter()
            .map(|w| w.stable)
            .min()
            .unwrap_or(first.stable),
    })
}

/// The canary and stable weights of one route.
fn route_weight(destinations: &[Value], classifier: &Classifier) -> ObservedWeight {
    let sum = |wanted: Role| {
        let total = destinations
            .iter()
            .filter(|d| classifier.role(d) == wanted)
            .map(value::weight)
            .fold(0_i64, i64::saturating_add);
        saturate(total)
    };
    ObservedWeight {
        canary: sum(Role::Canary),
        stable: sum(Role::Stable),
    }
}

fn saturate(weight: i64) -> i32 {
    i32::try_from(weight).unwrap_or(if weight < 0 { i32::MIN } else { i32::MAX })
}
