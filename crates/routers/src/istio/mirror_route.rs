//! `set_mirror_route`: a managed HTTP route that keeps serving matching requests with the
//! current weights while copying a percentage of them to the canary.

use serde_json::{Map, Value, json};
use sluice_api::rollout::{IstioDestinationRule, RouteMatch, SetMirrorRoute};

use super::canary_target::{CanaryTarget, first_weighted_route};
use super::managed_route::{BuildRoute, Placement, replace_route, step_name, string_match};
use super::value;
use crate::{Desired, EditResult, RouterError};

/// Mirror percentage when the step gives none.
const DEFAULT_PERCENTAGE: i32 = 100;

/// Replaces the HTTP route named after the step with a mirror route; a step without `match`
/// only removes it (an empty `match` list is not absent: it mirrors everything).
///
/// The route copies the destinations and current weights of the weighted route, so matching
/// requests are served exactly as before (and `set_weight` keeps it in step from then on), and
/// mirrors `percentage` (default 100) of them to the canary: the DestinationRule's host and
/// canary subset when one is configured, the canary Service otherwise, on the port of the
/// weighted route's first destination. It is prepended, then the managed routes are put first.
/// Errors when there is no weighted route to copy.
pub fn set_mirror_route(
    vs: &Value,
    vs_name: &str,
    step: &SetMirrorRoute,
    dr_host: Option<&str>,
    dr_ref: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> EditResult {
    let name = step_name(step.name.as_deref(), "setMirrorRoute")?;
    let build = |routes: &[Value]| {
        let Some(weighted) = first_weighted_route(routes, dr_ref, desired) else {
            return Err(RouterError::new(format!(
                "VirtualService `{vs_name}` has no weighted HTTP route to mirror"
            )));
        };
        let target = CanaryTarget::new(Some(weighted), dr_host, dr_ref, desired);
        Ok(mirror_route(name, step, weighted, &target))
    };
    let new = step
        .match_
        .as_ref()
        .map(|_| (Placement::Prepend, &build as BuildRoute<'_>));
    replace_route(
        vs,
        vs_name,
        name,
        &desired.managed_routes,
        new,
        format!("VirtualService `{vs_name}` set mirrorRoute '{name}'"),
    )
}

/// The route itself: `{name, match, route, mirror, mirrorPercentage: {value}}`.
fn mirror_route(
    name: &str,
    step: &SetMirrorRoute,
    weighted: &Value,
    target: &CanaryTarget,
) -> Value {
    let matches: Vec<Value> = step.match_.iter().flatten().map(route_match).collect();
    json!({
        "name": name,
        "match": matches,
        "route": value::destinations(weighted),
        "mirror": target.mirror_destination(),
        "mirrorPercentage": {"value": step.percentage.unwrap_or(DEFAULT_PERCENTAGE)},
    })
}

/// An Istio `HTTPMatchRequest` from a step's match: `method`, `path` as `uri`, and `headers`.
fn route_match(m: &RouteMatch) -> Value {
    let mut fields = Map::new();
    if let Some(method) = &m.method {
        fields.insert("method".into(), string_match(method));
    }
    if let Some(path) = &m.path {
        fields.insert("uri".into(), string_match(path));
    }
    if let Some(headers) = &m.headers {
        let headers: Map<String, Value> = headers
            .iter()
            .map(|(k, v)| (k.clone(), string_match(v)))
            .collect();
        fields.insert("headers".into(), Value::Object(headers));
    }
    Value::Object(fields)
}
