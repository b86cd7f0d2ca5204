//! Label selectors: well-formedness and whether one selects a given set of labels, as the
//! Kubernetes API machinery evaluates `matchLabels` and `matchExpressions`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::Problems;

/// Reports malformed requirements (unknown operator, values where none are allowed or none
/// where some are needed). Returns whether the selector can be evaluated.
pub(super) fn check_selector(
    selector: &LabelSelector,
    path: &str,
    problems: &mut Problems,
) -> bool {
    let mut well_formed = true;
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        if req.key.is_empty() {
            problems.add(&format!("{at}.key"), "must not be empty");
            well_formed = false;
        }
        let values = req.values.as_deref().unwrap_or_default();
        match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                problems.add(
                    &format!("{at}.values"),
                    format!("must not be empty with operator {}", req.operator),
                );
                well_formed = false;
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                problems.add(
                    &format!("{at}.values"),
                    format!("must be empty with operator {}", req.operator),
                );
                well_formed = false;
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                problems.add(
                    &format!("{at}.operator"),
                    format!("must be one of In, NotIn, Exists, DoesNotExist, got {other:?}"),
                );
                well_formed = false;
            }
        }
    }
    well_formed
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
                "spec.selector.matchExpressions[0].values: must not be empty with operator In",
                "spec.selector.matchExpressions[1].values: must be empty with operator Exists",
                "spec.selector.matchExpressions[2].operator: must be one of In, NotIn, Exists, DoesNotExist, got \"Equals\"",
                "spec.selector.matchExpressions[3].key: must not be empty",
            ]
        );
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
