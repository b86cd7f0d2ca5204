//! setHeaderRoute on HTTP and GRPC routes: rules that send requests with the step's headers to
//! the canary Service alone.

use serde_json::{Map, Value, json};
use sluice_api::rollout::{HeaderRoutingMatch, SetHeaderRoute};

use super::RouteKind;
use super::managed::remove_managed_routes;
use super::rules::{
    backend_refs, is_name_or_indexed, ref_name, references, route_name, rules, with_rules,
};
use crate::{Desired, Edit, EditResult, RouterError};

/// The route with the header rules of step `name` (the step's route name, a `managedRoutes`
/// entry), as the plugin v0.15.0 writes them:
///
/// - one new rule per rule that references both canary and stable, named `<name>`, then
///   `<name>-1`, `<name>-2`, …; its single backendRef is the canary Service (with the port
///   of the source's canary backendRef) and its filters are the source's;
/// - its matches are the source's, each with the step's headers added to the source's
///   headers (all ANDed); HTTP keeps path, queryParams and method, GRPC keeps method; a
///   source without matches gives one match of the step's headers alone;
/// - previous header rules are removed: those named `<name>`/`<name>-<n>`, and canary-only
///   rules with a match on all the step's header names;
/// - the new rules go at the end of `spec.rules`.
///
/// A step without `match` removes every managed rule instead ([`remove_managed_routes`]).
/// TCP and TLS routes have no headers and are left alone. `None` when the route already has
/// exactly these rules.
///
/// The caller applies this only to routes with `useHeaderRoutes`, and only while the step is
/// current and the Rollout revision is above 1, as for every router.
pub fn set_header_route(
    route: &Value,
    kind: RouteKind,
    name: &str,
    step: &SetHeaderRoute,
    desired: &Desired,
) -> EditResult {
    if !kind.has_header_routes() {
        return Ok(None);
    }
    let Some(matches) = step.match_.as_deref() else {
        return remove_managed_routes(route, kind, desired);
    };
    let headers = header_matches(matches)?;
    let rules = rules(route, kind)?;
    let new_rules: Vec<Value> = rules
        .iter()
        .filter(|r| {
            references(r, &desired.canary_service) && references(r, &desired.stable_service)
        })
        .enumerate()
        .map(|(i, source)| header_rule(kind, name, i, source, &headers, desired))
        .collect();
    if new_rules.is_empty() {
        return Err(kind.backend_not_found());
    }
    let mut updated_rules: Vec<Value> = rules
        .iter()
        .filter(|r| !is_previous_header_rule(r, name, &headers, desired))
        .cloned()
        .collect();
    updated_rules.extend(new_rules);
    if updated_rules == rules {
        return Ok(None);
    }
    Ok(Some(Edit {
        object: with_rules(route, updated_rules),
        event: (
            kind.updated_reason(),
            format!("{kind} `{}` set headerRoute '{name}'", route_name(route)),
        ),
    }))
}

/// The step's header conditions as Gateway API header matches: exact → `Exact`; prefix →
/// `RegularExpression` `<prefix>.*`; regex → `RegularExpression`. The first non-empty one
/// wins, in that order.
fn header_matches(matches: &[HeaderRoutingMatch]) -> Result<Vec<Value>, RouterError> {
    matches
        .iter()
        .map(|m| {
            let name = m.header_name.as_deref().unwrap_or_default();
            let value = m.header_value.as_ref();
            // Go's zero value: an empty string is not set.
            let given = |v: Option<&String>| v.filter(|s| !s.is_empty()).cloned();
            let (kind, value) = if let Some(exact) = given(value.and_then(|v| v.exact.as_ref())) {
                ("Exact", exact)
            } else if let Some(prefix) = given(value.and_then(|v| v.prefix.as_ref())) {
                ("RegularExpression", format!("{prefix}.*"))
            } else if let Some(regex) = given(value.and_then(|v| v.regex.as_ref())) {
                ("RegularExpression", regex)
            } else {
                return Err(RouterError::new("invalid header match type"));
            };
            Ok(json!({"name": name, "type": kind, "value": value}))
        })
        .collect()
}

/// The header rule built from the `index`-th source rule.
fn header_rule(
    kind: RouteKind,
    name: &str,
    index: usize,
    source: &Value,
    headers: &[Value],
    desired: &Desired,
) -> Value {
    let mut backend = Map::new();
    backend.insert("group".into(), "".into());
    backend.insert("kind".into(), "Service".into());
    backend.insert("name".into(), desired.canary_service.as_str().into());
    if let Some(port) = backend_refs(source)
        .iter()
        .find(|r| ref_name(r) == Some(desired.canary_service.as_str()))
        .and_then(|r| r.get("port"))
        .filter(|p| !p.is_null())
    {
        backend.insert("port".into(), port.clone());
    }

    let kept_keys: &[&str] = match kind {
        RouteKind::Http => &["path", "queryParams", "method"],
        _ => &["method"],
    };
    let source_matches = source
        .get("matches")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let matches: Vec<Value> = if source_matches.is_empty() {
        vec![json!({"headers": headers})]
    } else {
        source_matches
            .iter()
            .map(|m| {
                let mut out = Map::new();
                for key in kept_keys {
                    if let Some(v) = m.get(*key).filter(|v| !v.is_null()) {
                        out.insert((*key).into(), v.clone());
                    }
                }
                let mut all = m
                    .get("headers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                all.extend(headers.iter().cloned());
                out.insert("headers".into(), Value::Array(all));
                Value::Object(out)
            })
            .collect()
    };

    let mut rule = Map::new();
    let rule_name = if index == 0 {
        name.to_string()
    } else {
        format!("{name}-{index}")
    };
    rule.insert("name".into(), rule_name.into());
    rule.insert("matches".into(), Value::Array(matches));
    if let Some(filters) = source
        .get("filters")
        .filter(|f| f.as_array().is_some_and(|a| !a.is_empty()))
    {
        rule.insert("filters".into(), filters.clone());
    }
    rule.insert("backendRefs".into(), json!([backend]));
    Value::Object(rule)
}

/// A header rule an earlier run of this step wrote: named after the step, or a canary-only
/// rule with a match on every one of the step's header names.
fn is_previous_header_rule(rule: &Value, name: &str, headers: &[Value], desired: &Desired) -> bool {
    if rule
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| is_name_or_indexed(n, name))
    {
        return true;
    }
    let refs = backend_refs(rule);
    if refs.len() != 1 || ref_name(&refs[0]) != Some(desired.canary_service.as_str()) {
        return false;
    }
    let wanted: Vec<&str> = headers
        .iter()
        .filter_map(|h| h.get("name").and_then(Value::as_str))
        .collect();
    rule.get("matches")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|m| {
            let names: Vec<&str> = m
                .get("headers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|h| h.get("name").and_then(Value::as_str))
                .collect();
            wanted.iter().all(|w| names.contains(w))
        })
}

#[cfg(test)]
mod tests {
    use sluice_api::rollout::StringMatch;

    use super::*;
    use crate::gateway::fixtures::{desired, http_route};

    const STABLE: &str = "argo-rollouts-stable-service";
    const CANARY: &str = "argo-rollouts-canary-service";

    fn step(matches: &[(&str, StringMatch)]) -> SetHeaderRoute {
        SetHeaderRoute {
            name: Some("header-route".into()),
            match_: Some(
                matches
                    .iter()
                    .map(|(name, value)| HeaderRoutingMatch {
                        header_name: Some(name.to_string()),
                        header_value: Some(value.clone()),
                    })
                    .collect(),
            ),
        }
    }

    fn exact(v: &str) -> StringMatch {
        StringMatch {
            exact: Some(v.into()),
            ..StringMatch::default()
        }
    }

    fn apply(route: &Value, kind: RouteKind, step: &SetHeaderRoute) -> EditResult {
        set_header_route(route, kind, "header-route", step, &desired())
    }

    #[test]
    fn one_rule_per_source_rule_appended_at_the_end() {
        let edit = apply(
            &http_route(),
            RouteKind::Http,
            &step(&[("x-canary", exact("yes"))]),
        )
        .unwrap()
        .unwrap();
        let header = json!({"name": "x-canary", "type": "Exact", "value": "yes"});
        let rules = edit.object["spec"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 5);
        assert_eq!(
            &rules[..3],
            http_route()["spec"]["rules"].as_array().unwrap().as_slice()
        );
        assert_eq!(
            rules[3],
            json!({
                "name": "header-route",
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "headers": [header]}],
                "backendRefs": [{"group": "", "kind": "Service", "name": CANARY, "port": 80}]
            })
        );
        assert_eq!(
            rules[4],
            json!({
                "name": "header-route-1",
                "matches": [
                    {
                        "path": {"type": "PathPrefix", "value": "/api"},
                        "queryParams": [{"type": "Exact", "name": "v", "value": "2"}],
                        "method": "GET",
                        "headers": [{"type": "Exact", "name": "x-tenant", "value": "a"}, header]
                    },
                    {"path": {"type": "Exact", "value": "/api/health"}, "headers": [header]}
                ],
                "filters": [{"type": "RequestHeaderModifier",
                             "requestHeaderModifier": {"add": [{"name": "x-via", "value": "gw"}]}}],
                "backendRefs": [{"group": "", "kind": "Service", "name": CANARY, "port": 8080}]
            })
        );
        assert_eq!(
            edit.event,
            (
                "UpdatedHTTPRoute",
                "HTTPRoute `argo-rollouts-http-route` set headerRoute 'header-route'".to_string()
            )
        );
        // Applying the step again finds the route as it wants it.
        let again = apply(
            &edit.object,
            RouteKind::Http,
            &step(&[("x-canary", exact("yes"))]),
        );
        assert_eq!(again, Ok(None));
    }

    #[test]
    fn a_new_match_replaces_the_previous_rules() {
        let first = apply(
            &http_route(),
            RouteKind::Http,
            &step(&[("x-canary", exact("yes"))]),
        )
        .unwrap()
        .unwrap()
        .object;
        let second = apply(&first, RouteKind::Http, &step(&[("x-canary", exact("no"))]))
            .unwrap()
            .unwrap()
            .object;
        let rules = second["spec"]["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 5);
        assert_eq!(rules[3]["name"], "header-route");
        assert_eq!(rules[3]["matches"][0]["headers"][0]["value"], "no");
        assert_eq!(rules[4]["name"], "header-route-1");
    }

    #[test]
    fn header_value_kinds() {
        let cases = [
            (
                exact("a"),
                json!({"name": "h", "type": "Exact", "value": "a"}),
            ),
            (
                StringMatch {
                    prefix: Some("Mozilla".into()),
                    ..StringMatch::default()
                },
                json!({"name": "h", "type": "RegularExpression", "value": "Mozilla.*"}),
            ),
            (
                StringMatch {
                    regex: Some("^v[0-9]+$".into()),
                    ..StringMatch::default()
                },
                json!({"name": "h", "type": "RegularExpression", "value": "^v[0-9]+$"}),
            ),
            (
                StringMatch {
                    exact: Some(String::new()),
                    prefix: Some("p".into()),
                    regex: Some("r".into()),
                },
                json!({"name": "h", "type": "RegularExpression", "value": "p.*"}),
            ),
        ];
        let route = json!({"metadata": {"name": "r"}, "spec": {"rules": [
            {"backendRefs": [{"name": STABLE}, {"name": CANARY}]}
        ]}});
        for (value, want) in cases {
            let edit = apply(&route, RouteKind::Http, &step(&[("h", value)]))
                .unwrap()
                .unwrap();
            // A source without matches gives one match of the headers alone; no port when the
            // canary backendRef has none.
            assert_eq!(
                edit.object["spec"]["rules"][1],
                json!({
                    "name": "header-route",
                    "matches": [{"headers": [want]}],
                    "backendRefs": [{"group": "", "kind": "Service", "name": CANARY}]
                })
            );
        }
    }

    #[test]
    fn invalid_header_match_type() {
        let invalid = Err(RouterError::new("invalid header match type"));
        let steps = [
            step(&[("h", StringMatch::default())]),
            step(&[
                ("ok", exact("1")),
                (
                    "h",
                    StringMatch {
                        exact: Some(String::new()),
                        ..StringMatch::default()
                    },
                ),
            ]),
            SetHeaderRoute {
                name: Some("header-route".into()),
                match_: Some(vec![HeaderRoutingMatch {
                    header_name: Some("h".into()),
                    header_value: None,
                }]),
            },
        ];
        for step in steps {
            assert_eq!(apply(&http_route(), RouteKind::Http, &step), invalid);
        }
    }

    #[test]
    fn several_headers_are_anded_in_each_match() {
        let edit = apply(
            &http_route(),
            RouteKind::Http,
            &step(&[("x-a", exact("1")), ("x-b", exact("2"))]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            edit.object["spec"]["rules"][3]["matches"][0]["headers"],
            json!([
                {"name": "x-a", "type": "Exact", "value": "1"},
                {"name": "x-b", "type": "Exact", "value": "2"}
            ])
        );
    }

    #[test]
    fn older_canary_only_rules_with_the_same_headers_are_replaced() {
        let mut route = http_route();
        let rules = route["spec"]["rules"].as_array_mut().unwrap();
        // A header rule of an older plugin version, without a name, in the middle.
        rules.insert(
            1,
            json!({
                "matches": [{"path": {"type": "PathPrefix", "value": "/"},
                             "headers": [{"name": "x-canary", "type": "Exact", "value": "old"}]}],
                "backendRefs": [{"name": CANARY, "port": 80}]
            }),
        );
        // A canary-only rule on other headers stays.
        rules.push(json!({
            "matches": [{"headers": [{"name": "x-other", "value": "1"}]}],
            "backendRefs": [{"name": CANARY, "port": 80}]
        }));
        let edit = apply(
            &route,
            RouteKind::Http,
            &step(&[("x-canary", exact("yes"))]),
        )
        .unwrap()
        .unwrap();
        let names: Vec<Option<&str>> = edit.object["spec"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.get("name").and_then(Value::as_str))
            .collect();
        assert_eq!(
            names,
            [
                None,
                Some("api"),
                None,
                None,
                Some("header-route"),
                Some("header-route-1")
            ]
        );
        assert_eq!(
            edit.object["spec"]["rules"][3]["matches"][0]["headers"][0]["name"],
            "x-other"
        );
    }

    #[test]
    fn grpc_keeps_the_method() {
        let route = json!({
            "metadata": {"name": "argo-rollouts-grpc-route"},
            "spec": {"rules": [{
                "matches": [{"method": {"service": "helloworld.Greeter", "method": "SayHello"},
                             "headers": [{"name": "x-region", "value": "eu"}]}],
                "backendRefs": [{"name": STABLE, "port": 9000}, {"name": CANARY, "port": 9000}]
            }]}
        });
        let edit = apply(
            &route,
            RouteKind::Grpc,
            &step(&[("x-canary", exact("yes"))]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            edit.object["spec"]["rules"][1],
            json!({
                "name": "header-route",
                "matches": [{
                    "method": {"service": "helloworld.Greeter", "method": "SayHello"},
                    "headers": [
                        {"name": "x-region", "value": "eu"},
                        {"name": "x-canary", "type": "Exact", "value": "yes"}
                    ]
                }],
                "backendRefs": [{"group": "", "kind": "Service", "name": CANARY, "port": 9000}]
            })
        );
        assert_eq!(edit.event.0, "UpdatedGRPCRoute");
    }

    #[test]
    fn no_match_removes_the_managed_rules() {
        let with_header = apply(
            &http_route(),
            RouteKind::Http,
            &step(&[("x-canary", exact("yes"))]),
        )
        .unwrap()
        .unwrap()
        .object;
        let remove = SetHeaderRoute {
            name: Some("header-route".into()),
            match_: None,
        };
        let edit = apply(&with_header, RouteKind::Http, &remove)
            .unwrap()
            .unwrap();
        assert_eq!(edit.object, http_route());
        assert_eq!(
            edit.event.1,
            "HTTPRoute `argo-rollouts-http-route` removed all managed routes."
        );
        assert_eq!(apply(&http_route(), RouteKind::Http, &remove), Ok(None));
    }

    #[test]
    fn tcp_and_tls_are_left_alone() {
        let route =
            json!({"spec": {"rules": [{"backendRefs": [{"name": STABLE}, {"name": CANARY}]}]}});
        for kind in [RouteKind::Tcp, RouteKind::Tls] {
            assert_eq!(apply(&route, kind, &step(&[("h", exact("1"))])), Ok(None));
        }
    }

    #[test]
    fn no_rule_with_both_services_is_an_error() {
        let route = json!({"spec": {"rules": [{"backendRefs": [{"name": STABLE}]}]}});
        assert_eq!(
            apply(&route, RouteKind::Http, &step(&[("h", exact("1"))])),
            Err(RouterError::new("backendRef was not found in httpRoute"))
        );
        assert_eq!(
            apply(&route, RouteKind::Grpc, &step(&[("h", exact("1"))])),
            Err(RouterError::new("backendRef was not found in grpcRoute"))
        );
    }
}
