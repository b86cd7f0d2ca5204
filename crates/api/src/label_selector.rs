//! Label selectors: their text form (for `status.selector` and list calls) and matching.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// `metav1.FormatLabelSelector`-style string for `status.selector` (used by the scale
/// subresource and HPA).
pub fn format_selector(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for expr in selector.match_expressions.iter().flatten() {
        let values = expr.values.clone().unwrap_or_default();
        let part = match expr.operator.as_str() {
            "In" => format!("{} in ({})", expr.key, values.join(",")),
            "NotIn" => format!("{} notin ({})", expr.key, values.join(",")),
            "Exists" => expr.key.clone(),
            "DoesNotExist" => format!("!{}", expr.key),
            other => format!("{} {other}", expr.key),
        };
        parts.push(part);
    }
    parts.join(",")
}

/// Whether `labels` satisfy `selector` (matchLabels and matchExpressions, ANDed). An unknown
/// operator matches nothing.
pub fn matches(
    selector: &LabelSelector,
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k));
    let by_label = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| get(k) == Some(v));
    let by_expression = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => get(&e.key).is_some(),
            "DoesNotExist" => get(&e.key).is_none(),
            _ => false,
        }
    });
    by_label && by_expression
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn labels_and_expressions_are_anded() {
        let selector: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["edge", "api"]},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        let labels = |v: serde_json::Value| serde_json::from_value(v).unwrap();
        assert!(matches(
            &selector,
            Some(&labels(json!({"app": "web", "tier": "api"})))
        ));
        assert!(!matches(
            &selector,
            Some(&labels(json!({"app": "web", "tier": "db"})))
        ));
        assert!(!matches(
            &selector,
            Some(&labels(json!({"app": "web", "tier": "api", "legacy": "1"})))
        ));
        assert!(!matches(&selector, None));
        assert_eq!(
            format_selector(&selector),
            "app=web,tier in (edge,api),!legacy"
        );
    }
}
