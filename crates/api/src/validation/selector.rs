//! Label selectors: well-formedness and whether one selects a given set of labels, as the
//! Kubernetes API machinery evaluates `matchLabels` and `matchExpressions`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::{BadValue, FieldError, Problems};

/// Reports malformed requirements as Kubernetes does for a Deployment's selector (unknown
/// operator, values where none are allowed or none where some are needed, an empty key).
/// Returns whether the selector can be evaluated.
pub(super) fn check_selector(
    selector: &LabelSelector,
    path: &str,
    problems: &mut Problems,
) -> bool {
    let mut well_formed = true;
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = req.values.as_deref().unwrap_or_default();
        match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                problems.argo(FieldError::required(
                    &format!("{at}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
                well_formed = false;
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                problems.argo(FieldError::forbidden(
                    &format!("{at}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
                well_formed = false;
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                problems.argo(FieldError::invalid(
                    &format!("{at}.operator"),
                    other,
                    "not a valid selector operator",
                ));
                well_formed = false;
            }
        }
        if req.key.is_empty() {
            problems.argo(FieldError::invalid(
                &format!("{at}.key"),
                "",
                "name part must be non-empty",
            ));
            well_formed = false;
        }
    }
    well_formed
}

/// The selector as Go's `encoding/json` writes a `LabelSelector` (Go's field order, empty
/// fields left out), for messages that show it.
pub(super) fn selector_value(selector: &LabelSelector) -> BadValue {
    use serde_json::{Map, Value, json};
    let mut object = Map::new();
    if let Some(labels) = selector.match_labels.as_ref().filter(|l| !l.is_empty()) {
        object.insert("matchLabels".into(), json!(labels));
    }
    if let Some(expressions) = selector
        .match_expressions
        .as_ref()
        .filter(|e| !e.is_empty())
    {
        let expressions = expressions
            .iter()
            .map(|req| {
                let mut item = Map::new();
                item.insert("key".into(), json!(req.key));
                item.insert("operator".into(), json!(req.operator));
                if let Some(values) = req.values.as_ref().filter(|v| !v.is_empty()) {
                    item.insert("values".into(), json!(values));
                }
                Value::Object(item)
            })
            .collect();
        object.insert("matchExpressions".into(), Value::Array(expressions));
    }
    BadValue::Json(Value::Object(object))
}

/// Whether the selector has neither labels nor expressions (it would select every pod).
pub(super) fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

/// Whether a well-formed selector selects an object with these labels.
pub(super) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_match = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    labels_match
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|req| requirement_holds(req, labels))
}

fn requirement_holds(req: &LabelSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&req.key);
    let listed = |v: &String| req.values.iter().flatten().any(|allowed| allowed == v);
    match req.operator.as_str() {
        "In" => value.is_some_and(listed),
        "NotIn" => !value.is_some_and(listed),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(value: serde_json::Value) -> LabelSelector {
        serde_json::from_value(value).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn problems_of(sel: &LabelSelector) -> Vec<String> {
        let mut problems = Problems::default();
        check_selector(sel, "spec.selector", &mut problems);
        problems.into_messages()
    }

    #[test]
    fn match_labels_must_be_a_subset() {
        let sel = selector(json!({"matchLabels": {"app": "web"}}));
        assert!(selects(&sel, &labels(&[("app", "web"), ("tier", "front")])));
        assert!(!selects(&sel, &labels(&[("app", "api")])));
        assert!(!selects(&sel, &labels(&[])));
    }

    #[test]
    fn expressions_are_evaluated() {
        let sel = selector(json!({"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web", "api"]},
            {"key": "track", "operator": "NotIn", "values": ["canary"]},
            {"key": "team", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist"}
        ]}));
        assert!(selects(&sel, &labels(&[("app", "api"), ("team", "x")])));
        assert!(selects(
            &sel,
            &labels(&[("app", "web"), ("team", "x"), ("track", "stable")])
        ));
        assert!(!selects(&sel, &labels(&[("app", "db"), ("team", "x")])));
        assert!(!selects(
            &sel,
            &labels(&[("app", "web"), ("team", "x"), ("track", "canary")])
        ));
        assert!(!selects(&sel, &labels(&[("app", "web")])));
        assert!(!selects(
            &sel,
            &labels(&[("app", "web"), ("team", "x"), ("legacy", "1")])
        ));
    }

    #[test]
    fn malformed_requirements_are_reported() {
        assert!(
            problems_of(&selector(json!({"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["a"]},
                {"key": "b", "operator": "Exists"}
            ]})))
            .is_empty()
        );
        let problems = problems_of(&selector(json!({"matchExpressions": [
            {"key": "app", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c", "operator": "Equals", "values": ["x"]},
            {"key": "", "operator": "Exists"}
        ]})));
        assert_eq!(
            problems,
            [
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "spec.selector.matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "spec.selector.matchExpressions[2].operator: Invalid value: \"Equals\": not a valid selector operator",
                "spec.selector.matchExpressions[3].key: Invalid value: \"\": name part must be non-empty",
            ]
        );
    }

    #[test]
    fn selector_values_follow_go_field_order() {
        let sel = selector(json!({
            "matchExpressions": [{"key": "tier", "operator": "Exists", "values": []}],
            "matchLabels": {"b": "2", "a": "1"}
        }));
        assert_eq!(
            selector_value(&sel).render(),
            r#"{"matchLabels":{"a":"1","b":"2"},"matchExpressions":[{"key":"tier","operator":"Exists"}]}"#
        );
        assert_eq!(selector_value(&selector(json!({}))).render(), "{}");
    }

    #[test]
    fn emptiness() {
        assert!(is_empty(&selector(json!({}))));
        assert!(is_empty(&selector(
            json!({"matchLabels": {}, "matchExpressions": []})
        )));
        assert!(!is_empty(&selector(json!({"matchLabels": {"a": "b"}}))));
    }
}
