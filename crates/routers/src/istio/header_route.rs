//! `set_header_route`: a managed HTTP route that sends every request matching the step's
//! headers to the canary, ahead of the weighted route.

use serde_json::{Map, Value, json};
use sluice_api::rollout::{HeaderRoutingMatch, IstioDestinationRule, SetHeaderRoute};

use super::canary_target::{CanaryTarget, first_weighted_route};
use super::managed_route::{BuildRoute, Placement, replace_route, step_name, string_match};
use crate::{Desired, EditResult};

/// Replaces the HTTP route named after the step with one that routes the step's header
/// matches to the canary with weight 100; a step without `match` only removes the route.
///
/// Each header condition becomes its own `match[]` entry (Istio ORs them). The destination is
/// the DestinationRule's host and canary subset when a DestinationRule is configured
/// (`dr_host` is its `spec.host`), the canary Service otherwise, on the port of the weighted
/// route's first destination when it names one. The route is appended, then the managed routes
/// are put first.
pub fn set_header_route(
    vs: &Value,
    vs_name: &str,
    step: &SetHeaderRoute,
    dr_host: Option<&str>,
    dr_ref: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> EditResult {
    let name = step_name(step.name.as_deref(), "setHeaderRoute")?;
    let build = |routes: &[Value]| {
        let weighted = first_weighted_route(routes, dr_ref, desired);
        let target = CanaryTarget::new(weighted, dr_host, dr_ref, desired);
        Ok(header_route(
            name,
            step.match_.as_deref().unwrap_or(&[]),
            &target,
        ))
    };
    let new = step
        .match_
        .as_ref()
        .map(|_| (Placement::Append, &build as BuildRoute<'_>));
    replace_route(
        vs,
        vs_name,
        name,
        &desired.managed_routes,
        new,
        format!("VirtualService `{vs_name}` set headerRoute '{name}'"),
    )
}

/// The route itself: `{name, match: [{headers: {<name>: <match>}}…], route: [canary, 100]}`.
fn header_route(name: &str, matches: &[HeaderRoutingMatch], target: &CanaryTarget) -> Value {
    let matches: Vec<Value> = matches
        .iter()
        .map(|m| {
            let value = m
                .header_value
                .as_ref()
                .map_or_else(|| Value::Object(Map::new()), string_match);
            let mut headers = Map::new();
            headers.insert(m.header_name.clone().unwrap_or_default(), value);
            json!({"headers": headers})
        })
        .collect();
    json!({
        "name": name,
        "match": matches,
        "route": [{"destination": target.header_destination(), "weight": 100}],
    })
}
