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

#[cfg(test)]
mod tests {
    use sluice_api::rollout::StringMatch;

    use super::*;
    use crate::RouterError;
    use crate::istio::fixtures::*;

    fn step(name: &str, matches: Option<&[(&str, &str, &str)]>) -> SetHeaderRoute {
        SetHeaderRoute {
            name: Some(name.into()),
            match_: matches.map(|matches| {
                matches
                    .iter()
                    .map(|(header, kind, value)| {
                        let value = Some(value.to_string());
                        let header_value = match *kind {
                            "exact" => StringMatch {
                                exact: value,
                                ..StringMatch::default()
                            },
                            "prefix" => StringMatch {
                                prefix: value,
                                ..StringMatch::default()
                            },
                            _ => StringMatch {
                                regex: value,
                                ..StringMatch::default()
                            },
                        };
                        HeaderRoutingMatch {
                            header_name: Some(header.to_string()),
                            header_value: Some(header_value),
                        }
                    })
                    .collect()
            }),
        }
    }

    fn edited(vs: &Value, step: &SetHeaderRoute, desired: &Desired) -> Value {
        match set_header_route(vs, "rollouts-demo-vsvc", step, None, None, desired) {
            Ok(Some(edit)) => {
                assert_eq!(
                    edit.event,
                    (
                        "Updated VirtualService",
                        format!(
                            "VirtualService `rollouts-demo-vsvc` set headerRoute '{}'",
                            step.name.as_deref().unwrap_or("")
                        )
                    )
                );
                assert_eq!(
                    set_header_route(
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

    #[test]
    fn added_replaced_removed() {
        let desired = demo(20, &["set-header-1"]);
        let firefox = step("set-header-1", Some(&[("agent", "regex", "firefox(.*)")]));
        let added = edited(&yaml(ROLLOUTS_DEMO_VS), &firefox, &desired);
        assert_eq!(route_names(&added), ["set-header-1", "primary"]);
        assert_eq!(
            added["spec"]["http"][0],
            yaml(
                "
name: set-header-1
match:
- headers:
    agent: {regex: firefox(.*)}
route:
- destination: {host: canary-service}
  weight: 100
"
            )
        );
        assert_eq!(
            added["spec"]["http"][1],
            yaml(ROLLOUTS_DEMO_VS)["spec"]["http"][0]
        );

        let chrome = step("set-header-1", Some(&[("agent", "regex", "chrome(.*)")]));
        let replaced = edited(&added, &chrome, &desired);
        assert_eq!(route_names(&replaced), ["set-header-1", "primary"]);
        assert_eq!(
            replaced["spec"]["http"][0]["match"],
            yaml("[{headers: {agent: {regex: chrome(.*)}}}]")
        );

        let removed = edited(&replaced, &step("set-header-1", None), &desired);
        assert_eq!(removed, yaml(ROLLOUTS_DEMO_VS));
        assert_eq!(
            set_header_route(
                &removed,
                "v",
                &step("set-header-1", None),
                None,
                None,
                &desired
            ),
            Ok(None),
            "nothing left to remove"
        );
    }

    #[test]
    fn one_match_entry_per_header() {
        let desired = demo(20, &["h"]);
        let matches = [("agent", "exact", "firefox"), ("x-beta", "prefix", "yes")];
        let object = edited(
            &yaml(ROLLOUTS_DEMO_VS),
            &step("h", Some(&matches)),
            &desired,
        );
        assert_eq!(
            object["spec"]["http"][0]["match"],
            yaml("[{headers: {agent: {exact: firefox}}}, {headers: {x-beta: {prefix: 'yes'}}}]")
        );
    }

    #[test]
    fn port_of_the_weighted_route_is_copied() {
        let vs = ROLLOUTS_DEMO_VS.replace(
            "        host: stable-service\n",
            "        host: stable-service\n        port: {number: 8080}\n",
        );
        let desired = demo(20, &["h"]);
        let object = edited(
            &yaml(&vs),
            &step("h", Some(&[("a", "exact", "b")])),
            &desired,
        );
        assert_eq!(
            object["spec"]["http"][0]["route"],
            yaml("[{destination: {host: canary-service, port: {number: 8080}}, weight: 100}]")
        );
    }

    #[test]
    fn with_a_destination_rule() {
        let desired = demo(20, &["h"]);
        let dr = dr_ref(&[]);
        let vs = yaml(SUBSET_SPLIT_VS);
        let Ok(Some(edit)) = set_header_route(
            &vs,
            "istio-subset-split-vsvc",
            &step("h", Some(&[("a", "exact", "b")])),
            Some("istio-subset-split"),
            Some(&dr),
            &desired,
        ) else {
            panic!("expected an edit")
        };
        assert_eq!(
            edit.object["spec"]["http"][0]["route"],
            yaml("[{destination: {host: istio-subset-split, subset: canary}, weight: 100}]")
        );
    }

    #[test]
    fn appended_last_without_managed_routes() {
        let object = edited(
            &yaml(ROLLOUTS_DEMO_VS),
            &step("h", Some(&[("a", "exact", "b")])),
            &demo(20, &[]),
        );
        assert_eq!(route_names(&object), ["primary", "h"]);
    }

    #[test]
    fn refused_steps() {
        let desired = demo(20, &["h"]);
        let unnamed = SetHeaderRoute::default();
        assert_eq!(
            set_header_route(&yaml(ROLLOUTS_DEMO_VS), "v", &unnamed, None, None, &desired),
            Err(RouterError::new("setHeaderRoute step has no route name"))
        );
        let tls_only = yaml(TLS_ONLY_VS);
        assert_eq!(
            set_header_route(&tls_only, "v", &step("h", Some(&[])), None, None, &desired),
            Err(RouterError::new(
                "spec.http not found in VirtualService `v`"
            ))
        );
        assert_eq!(
            set_header_route(&tls_only, "v", &step("h", None), None, None, &desired),
            Ok(None)
        );
    }
}
