//! `set_weight`: the canary, stable and experiment weights of every selected route of a
//! VirtualService. Host split (canary and stable Services) and subset split (DestinationRule
//! subsets of one host) are the same edit: each destination is classified, then given its
//! weight.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sluice_api::rollout::{IstioDestinationRule, IstioVirtualService};

use super::destination::{Classifier, Role, host_label};
use super::namespaced_name::virtual_service_key;
use super::order::order_http_routes;
use super::select::{self, Mirrors, SECTIONS};
use super::value;
use super::{TOTAL_WEIGHT, VIRTUAL_SERVICE_UPDATED};
use crate::{Desired, Edit, EditResult};

/// Weights the selected HTTP, TLS and TCP routes of `vs` (see `select` for which) and, when
/// anything changed, puts the managed routes first.
///
/// Per destination: the canary gets `desired.weight`; an experiment Service its template
/// weight; a subset in `additionalSubsetNames` keeps its weight; the stable gets what is left
/// of 100 after those (never below 0). Experiment Services missing from a route are appended
/// (sorted by name, so the result does not depend on input order); any other destination that
/// still carries weight is deleted, which is how a finished experiment leaves the route, while
/// a zero-weight one is the user's and stays.
///
/// Errors when a named route is missing or a selected route lacks the canary or the stable.
pub fn set_weight(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> EditResult {
    let selection = select::weighted(vs, vs_ref, dr, desired, Mirrors::Include)?;
    let classifier = Classifier::new(dr, desired);
    let mut object = vs.clone();
    for section in SECTIONS {
        let Some(routes) = value::routes_mut(&mut object, section) else {
            continue;
        };
        for &i in selection.get(section) {
            if let Some(route) = routes.get_mut(i) {
                reweigh(route, &classifier, desired);
            }
        }
    }
    if object == *vs {
        return Ok(None);
    }
    order_http_routes(&mut object, &desired.managed_routes);
    let name = vs_name(vs, vs_ref);
    Ok(Some(Edit {
        object,
        event: (
            VIRTUAL_SERVICE_UPDATED,
            format!(
                "VirtualService `{name}` set to desiredWeight '{}'",
                desired.weight
            ),
        ),
    }))
}

/// The VirtualService's own name, or the one the reference points at.
fn vs_name(vs: &Value, vs_ref: &IstioVirtualService) -> String {
    match vs.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => name.to_string(),
        None => virtual_service_key(vs_ref.name.as_deref().unwrap_or(""), "").0,
    }
}

/// The stable weight of one route: 100 less the canary, the experiments and the hand-weighted
/// subsets of that route, floored at 0.
fn stable_weight(destinations: &[Value], classifier: &Classifier, desired: &Desired) -> i64 {
    let hand_weighted = destinations
        .iter()
        .filter(|d| classifier.role(d) == Role::AdditionalSubset)
        .map(value::weight)
        .fold(0_i64, i64::saturating_add);
    let experiments = desired
        .additional
        .iter()
        .map(|d| i64::from(d.weight))
        .fold(0_i64, i64::saturating_add);
    TOTAL_WEIGHT
        .saturating_sub(i64::from(desired.weight))
        .saturating_sub(experiments)
        .saturating_sub(hand_weighted)
        .max(0)
}

/// Rewrites the weighted destinations of one route in place.
fn reweigh(route: &mut Value, classifier: &Classifier, desired: &Desired) {
    let Some(destinations) = value::destinations_mut(route) else {
        return;
    };
    let stable = stable_weight(destinations, classifier, desired);
    let mut kept = Vec::with_capacity(destinations.len() + desired.additional.len());
    for mut destination in destinations.drain(..) {
        let target = match classifier.role(&destination) {
            Role::Canary => Some(i64::from(desired.weight)),
            Role::Stable => Some(stable),
            Role::Experiment(experiment) => Some(i64::from(experiment.weight)),
            Role::AdditionalSubset => None,
            Role::Unknown if value::weight(&destination) != 0 => continue,
            Role::Unknown => None,
        };
        if let Some(weight) = target
            && value::weight(&destination) != weight
            && let Some(fields) = destination.as_object_mut()
        {
            fields.insert("weight".to_string(), json!(weight));
        }
        kept.push(destination);
    }
    // Any destination already on the experiment's host counts as present, whatever its role,
    // so that a second call never appends it again.
    let present: BTreeSet<&str> = kept.iter().map(|d| host_label(value::host(d))).collect();
    let mut missing: Vec<_> = desired
        .additional
        .iter()
        .filter(|e| !e.service_name.is_empty() && !present.contains(e.service_name.as_str()))
        .collect();
    missing.sort_by(|a, b| a.service_name.cmp(&b.service_name));
    missing.dedup_by(|a, b| a.service_name == b.service_name);
    let missing: Vec<Value> = missing
        .into_iter()
        .map(|e| json!({"destination": {"host": e.service_name}, "weight": e.weight}))
        .collect();
    kept.extend(missing);
    *destinations = kept;
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod weight_tests;
