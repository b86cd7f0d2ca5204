//! Reading route rules and their backendRefs, and telling the rules the controller manages
//! (header routes) from the user's own.

use serde_json::{Map, Value};

use super::RouteKind;
use crate::{Desired, RouterError};

/// `metadata.name` of a route, for messages; empty when absent.
pub(super) fn route_name(route: &Value) -> &str {
    route
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `spec.rules`, checked to be a list of objects whose `backendRefs` and `matches` are lists
/// of objects, so that the helpers below can read them without further checks. A route
/// without rules has none.
pub(super) fn rules(route: &Value, kind: RouteKind) -> Result<&[Value], RouterError> {
    let malformed = |what: &str| {
        RouterError::new(format!(
            "{kind} `{}` has malformed {what}",
            route_name(route)
        ))
    };
    if !route.is_object() {
        return Err(RouterError::new(format!("{kind} is not an object")));
    }
    let rules = match route.pointer("/spec/rules") {
        None | Some(Value::Null) => return Ok(&[]),
        Some(Value::Array(rules)) => rules.as_slice(),
        Some(_) => return Err(malformed("spec.rules")),
    };
    for rule in rules {
        if !rule.is_object() {
            return Err(malformed("spec.rules"));
        }
        for list in ["backendRefs", "matches"] {
            match rule.get(list) {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) if items.iter().all(Value::is_object) => {}
                Some(_) => return Err(malformed(&format!("spec.rules[].{list}"))),
            }
        }
    }
    Ok(rules)
}

/// `route` with `spec.rules` replaced. The route was checked by [`rules`], so it is an
/// object; a missing `spec` is created.
pub(super) fn with_rules(route: &Value, rules: Vec<Value>) -> Value {
    let mut route = route.clone();
    if let Some(object) = route.as_object_mut() {
        let spec = object
            .entry("spec")
            .or_insert_with(|| Value::Object(Map::new()));
        if !spec.is_object() {
            *spec = Value::Object(Map::new());
        }
        if let Some(spec) = spec.as_object_mut() {
            spec.insert("rules".into(), Value::Array(rules));
        }
    }
    route
}

/// A rule's backendRefs.
pub(super) fn backend_refs(rule: &Value) -> &[Value] {
    rule.get("backendRefs")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A rule's backendRefs, to change.
pub(super) fn backend_refs_mut(rule: &mut Value) -> impl Iterator<Item = &mut Value> {
    rule.get_mut("backendRefs")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// The Service (or other backend) a backendRef names.
pub(super) fn ref_name(backend_ref: &Value) -> Option<&str> {
    backend_ref.get("name").and_then(Value::as_str)
}

/// Whether a rule has a backendRef named `service`.
pub(super) fn references(rule: &Value, service: &str) -> bool {
    backend_refs(rule)
        .iter()
        .any(|r| ref_name(r) == Some(service))
}

/// Sets `weight` on a backendRef (an object, checked by [`rules`]).
pub(super) fn set_ref_weight(backend_ref: &mut Value, weight: i32) {
    if let Some(r) = backend_ref.as_object_mut() {
        r.insert("weight".into(), weight.into());
    }
}

/// A rule Sluice manages for a header route rather than one of the user's: named after a
/// `managedRoutes` entry (`<name>` or `<name>-<n>`), or whose only backend is the canary
/// Service. Weights are never set on managed rules, and route removal deletes them.
pub(super) fn is_managed(rule: &Value, desired: &Desired) -> bool {
    let named = rule
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|name| {
            desired
                .managed_routes
                .iter()
                .any(|managed| is_name_or_indexed(name, managed))
        });
    let refs = backend_refs(rule);
    named || (refs.len() == 1 && ref_name(&refs[0]) == Some(desired.canary_service.as_str()))
}

/// `name` is `base` or `base-<digits>`: the names the header rules of one route get.
pub(super) fn is_name_or_indexed(name: &str, base: &str) -> bool {
    name == base
        || name
            .strip_prefix(base)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn indexed_names() {
        let cases = [
            ("canary-header", true),
            ("canary-header-1", true),
            ("canary-header-12", true),
            ("canary-header-", false),
            ("canary-header-x", false),
            ("canary-header-1a", false),
            ("canary-headers", false),
            ("canary", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_name_or_indexed(name, "canary-header"), want, "{name}");
        }
    }

    #[test]
    fn managed_rules() {
        let desired = Desired {
            canary_service: "canary".into(),
            stable_service: "stable".into(),
            managed_routes: vec!["header".into()],
            ..Desired::default()
        };
        let cases = [
            (
                json!({"name": "header", "backendRefs": [{"name": "stable"}]}),
                true,
            ),
            (json!({"name": "header-2", "backendRefs": []}), true),
            (json!({"backendRefs": [{"name": "canary"}]}), true),
            (
                json!({"name": "user", "backendRefs": [{"name": "canary"}]}),
                true,
            ),
            (
                json!({"backendRefs": [{"name": "canary"}, {"name": "stable"}]}),
                false,
            ),
            (
                json!({"name": "other", "backendRefs": [{"name": "stable"}]}),
                false,
            ),
            (json!({"backendRefs": [{"name": "stable"}]}), false),
            (json!({}), false),
        ];
        for (rule, want) in cases {
            assert_eq!(is_managed(&rule, &desired), want, "{rule}");
        }
    }

    #[test]
    fn malformed_rules_are_errors() {
        let route = |spec: Value| json!({"metadata": {"name": "r"}, "spec": spec});
        let cases = [
            (
                route(json!({"rules": 1})),
                "HTTPRoute `r` has malformed spec.rules",
            ),
            (
                route(json!({"rules": [1]})),
                "HTTPRoute `r` has malformed spec.rules",
            ),
            (
                route(json!({"rules": [{"backendRefs": {}}]})),
                "HTTPRoute `r` has malformed spec.rules[].backendRefs",
            ),
            (
                route(json!({"rules": [{"backendRefs": ["x"]}]})),
                "HTTPRoute `r` has malformed spec.rules[].backendRefs",
            ),
            (
                route(json!({"rules": [{"matches": "x"}]})),
                "HTTPRoute `r` has malformed spec.rules[].matches",
            ),
            (json!("route"), "HTTPRoute is not an object"),
        ];
        for (route, want) in cases {
            assert_eq!(
                rules(&route, RouteKind::Http),
                Err(RouterError::new(want)),
                "{route}"
            );
        }
        assert_eq!(rules(&route(json!({})), RouteKind::Http), Ok(&[][..]));
    }

    #[test]
    fn with_rules_creates_the_spec() {
        let route = json!({"metadata": {"name": "r"}});
        assert_eq!(
            with_rules(&route, vec![json!({})]),
            json!({"metadata": {"name": "r"}, "spec": {"rules": [{}]}})
        );
    }
}
