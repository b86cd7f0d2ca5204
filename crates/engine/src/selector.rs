//! The text form of a label selector, for `status.selector`.

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
