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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use sluice_api::rollout::StringMatch;

    use super::*;
    use crate::istio::fixtures::*;

    fn prefix(p: &str) -> Option<StringMatch> {
        Some(StringMatch {
            prefix: Some(p.into()),
            ..StringMatch::default()
        })
    }

    fn exact(e: &str) -> Option<StringMatch> {
        Some(StringMatch {
            exact: Some(e.into()),
            ..StringMatch::default()
        })
    }

    fn step(
        name: &str,
        matches: Option<Vec<RouteMatch>>,
        percentage: Option<i32>,
    ) -> SetMirrorRoute {
        SetMirrorRoute {
            name: Some(name.into()),
            match_: matches,
            percentage,
        }
    }

    fn edited(vs: &Value, step: &SetMirrorRoute, desired: &Desired) -> Value {
        match set_mirror_route(vs, "rollouts-demo-vsvc", step, None, None, desired) {
            Ok(Some(edit)) => {
                assert_eq!(
                    edit.event,
                    (
                        "Updated VirtualService",
                        format!(
                            "VirtualService `rollouts-demo-vsvc` set mirrorRoute '{}'",
                            step.name.as_deref().unwrap_or("")
                        )
                    )
                );
                assert_eq!(
                    set_mirror_route(
                        &edit.object,
                        "rollouts-demo-vsvc",
                        step,
                        None,
                        None,
                        desired
                    ),
                    Ok(None),
                    "idempotent"
                );
                edit.object
            }
            other => panic!("expected an edit, got {other:?}"),
        }
    }

    /// The steps of `mirror-route/istio-mirror-host.yaml`.
    #[test]
    fn corpus_mirror_steps() {
        let desired = demo(20, &["mirror-route-1", "mirror-route-2"]);
        let first = step(
            "mirror-route-1",
            Some(vec![RouteMatch {
                path: prefix("/"),
                ..RouteMatch::default()
            }]),
            Some(100),
        );
        let object = edited(&yaml(ROLLOUTS_DEMO_VS), &first, &desired);
        assert_eq!(
            object["spec"]["http"][0],
            yaml(
                "
name: mirror-route-1
match:
- uri: {prefix: /}
route:
- destination: {host: stable-service}
  weight: 80
- destination: {host: canary-service}
  weight: 20
mirror: {host: canary-service}
mirrorPercentage: {value: 100}
"
            )
        );

        let second = step(
            "mirror-route-2",
            Some(vec![RouteMatch {
                path: prefix("/"),
                method: exact("GET"),
                ..RouteMatch::default()
            }]),
            Some(80),
        );
        let object = edited(&object, &second, &desired);
        assert_eq!(
            route_names(&object),
            ["mirror-route-1", "mirror-route-2", "primary"]
        );
        assert_eq!(
            object["spec"]["http"][1]["match"],
            yaml("[{method: {exact: GET}, uri: {prefix: /}}]")
        );
        assert_eq!(
            object["spec"]["http"][1]["mirrorPercentage"],
            yaml("{value: 80}")
        );

        let rewrite = step(
            "mirror-route-1",
            Some(vec![RouteMatch {
                path: prefix("/rewrite"),
                ..RouteMatch::default()
            }]),
            Some(100),
        );
        let object = edited(&object, &rewrite, &desired);
        assert_eq!(
            route_names(&object),
            ["mirror-route-1", "mirror-route-2", "primary"]
        );
        assert_eq!(
            object["spec"]["http"][0]["match"],
            yaml("[{uri: {prefix: /rewrite}}]")
        );

        let object = edited(&object, &step("mirror-route-1", None, None), &desired);
        assert_eq!(route_names(&object), ["mirror-route-2", "primary"]);
    }

    #[test]
    fn prepended_without_managed_routes_with_defaults() {
        let headers = BTreeMap::from([(
            "x-user".to_string(),
            StringMatch {
                regex: Some("beta.*".into()),
                ..StringMatch::default()
            },
        )]);
        let matches = vec![RouteMatch {
            headers: Some(headers),
            ..RouteMatch::default()
        }];
        let object = edited(
            &yaml(ROLLOUTS_DEMO_VS),
            &step("m", Some(matches), None),
            &demo(20, &[]),
        );
        assert_eq!(route_names(&object), ["m", "primary"]);
        assert_eq!(
            object["spec"]["http"][0]["match"],
            yaml("[{headers: {x-user: {regex: beta.*}}}]")
        );
        assert_eq!(
            object["spec"]["http"][0]["mirrorPercentage"],
            yaml("{value: 100}")
        );

        // An empty match list is a route that mirrors everything, not a removal.
        let object = edited(
            &yaml(ROLLOUTS_DEMO_VS),
            &step("m", Some(vec![]), None),
            &demo(20, &[]),
        );
        assert_eq!(object["spec"]["http"][0]["match"], yaml("[]"));
    }

    #[test]
    fn with_a_destination_rule_and_port() {
        let vs = SUBSET_SPLIT_VS.replace(
            "        subset: stable\n",
            "        subset: stable\n        port: {number: 9090}\n",
        );
        let dr = dr_ref(&[]);
        let Ok(Some(edit)) = set_mirror_route(
            &yaml(&vs),
            "istio-subset-split-vsvc",
            &step("m", Some(vec![]), Some(50)),
            Some("istio-subset-split"),
            Some(&dr),
            &subset_split(10),
        ) else {
            panic!("expected an edit")
        };
        assert_eq!(
            edit.object["spec"]["http"][0]["mirror"],
            yaml("{host: istio-subset-split, subset: canary, port: {number: 9090}}")
        );
        assert_eq!(
            edit.object["spec"]["http"][0]["route"],
            yaml(&vs)["spec"]["http"][0]["route"]
        );
    }

    #[test]
    fn copies_the_weighted_route_not_another_managed_one() {
        let desired = demo(20, &["header", "m"]);
        let vs = format!(
            "{ROLLOUTS_DEMO_VS}  - name: header\n    route: [{{destination: {{host: canary-service}}, weight: 100}}]\n"
        );
        let object = edited(&yaml(&vs), &step("m", Some(vec![]), None), &desired);
        assert_eq!(route_names(&object), ["header", "m", "primary"]);
        assert_eq!(
            object["spec"]["http"][1]["route"],
            yaml(ROLLOUTS_DEMO_VS)["spec"]["http"][0]["route"]
        );
    }

    #[test]
    fn refused_steps() {
        let desired = demo(20, &["m"]);
        assert_eq!(
            set_mirror_route(
                &yaml(ROLLOUTS_DEMO_VS),
                "v",
                &SetMirrorRoute::default(),
                None,
                None,
                &desired
            ),
            Err(RouterError::new("setMirrorRoute step has no route name"))
        );
        let only_managed = yaml("spec: {http: [{name: m, route: []}]}");
        assert_eq!(
            set_mirror_route(
                &only_managed,
                "v",
                &step("m", Some(vec![]), None),
                None,
                None,
                &desired
            ),
            Err(RouterError::new(
                "VirtualService `v` has no weighted HTTP route to mirror"
            ))
        );
    }
}
