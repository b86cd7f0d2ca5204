//! Argument values a Rollout takes from its own fields (`valueFrom.fieldRef`). Paths under
//! `metadata` follow the Kubernetes downward API; any other path is walked through the
//! Rollout's JSON and must end at a string, number or boolean.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_api::Rollout;

/// The value at `path` in the Rollout, as text.
pub(crate) fn rollout_field(rollout: &Rollout, path: &str) -> Result<String, String> {
    if path.starts_with("metadata") {
        return metadata_field(rollout, path);
    }
    let json = serde_json::to_value(rollout).map_err(|e| e.to_string())?;
    json_field(&json, path)
}

fn metadata_field(rollout: &Rollout, path: &str) -> Result<String, String> {
    let meta = &rollout.metadata;
    if let Some((field, key)) = subscripted(path) {
        let map = match field {
            "metadata.annotations" => meta.annotations.as_ref(),
            "metadata.labels" => meta.labels.as_ref(),
            _ => return Err(format!("fieldPath {path:?} does not support subscript")),
        };
        return Ok(map.and_then(|m| m.get(key)).cloned().unwrap_or_default());
    }
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    match path {
        "metadata.annotations" => Ok(format_map(meta.annotations.as_ref())),
        "metadata.labels" => Ok(format_map(meta.labels.as_ref())),
        "metadata.name" => Ok(text(&meta.name)),
        "metadata.namespace" => Ok(text(&meta.namespace)),
        "metadata.uid" => Ok(text(&meta.uid)),
        _ => Err(format!("unsupported fieldPath: {path}")),
    }
}

/// Splits `metadata.labels['key']` into the field and the key.
fn subscripted(path: &str) -> Option<(&str, &str)> {
    let (field, key) = path.strip_suffix("']")?.split_once("['")?;
    (!field.is_empty()).then_some((field, key))
}

/// A whole label or annotation map as the downward API renders it: sorted `key="value"` lines.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A double-quoted string with Go's escapes.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Walks `a.b[0].c` (dots and brackets both separate) through a JSON value.
fn json_field(root: &Value, path: &str) -> Result<String, String> {
    let invalid = || format!("invalid path {path} in rollout");
    let mut node = Some(root);
    for section in path.split(['.', '[', ']']).filter(|s| !s.is_empty()) {
        node = match node {
            Some(Value::Array(items)) => {
                let i: usize = section
                    .parse()
                    .map_err(|_| format!("invalid index '{section}'"))?;
                Some(
                    items
                        .get(i)
                        .ok_or_else(|| format!("index {i} out of range"))?,
                )
            }
            Some(Value::Object(map)) => map.get(section),
            _ => return Err(invalid()),
        };
    }
    match node {
        None | Some(Value::Null) => Err(invalid()),
        Some(Value::Array(_) | Value::Object(_)) => Err(format!(
            "path {path} in rollout must terminate in a primitive value"
        )),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        Some(Value::Number(n)) => Ok(n.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout() -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {
                "name": "guestbook", "namespace": "apps", "uid": "u-1",
                "labels": {"team": "a", "tier": "web \"front\""},
                "annotations": {"owner": "ops"}
            },
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "guestbook"}},
                "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.19"}]}},
                "strategy": {"canary": {"steps": [{"setWeight": 20}]}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn downward_api_paths() {
        let ro = rollout();
        let cases = [
            ("metadata.name", "guestbook"),
            ("metadata.namespace", "apps"),
            ("metadata.uid", "u-1"),
            ("metadata.labels['team']", "a"),
            ("metadata.labels['missing']", ""),
            ("metadata.annotations['owner']", "ops"),
            ("metadata.labels", "team=\"a\"\ntier=\"web \\\"front\\\"\""),
            ("metadata.annotations", "owner=\"ops\""),
        ];
        for (path, want) in cases {
            assert_eq!(rollout_field(&ro, path).unwrap(), want, "{path}");
        }
        assert_eq!(
            rollout_field(&ro, "metadata.generation").unwrap_err(),
            "unsupported fieldPath: metadata.generation"
        );
        assert!(rollout_field(&ro, "metadata.name['x']").is_err());
    }

    #[test]
    fn json_paths() {
        let ro = rollout();
        let cases = [
            ("spec.template.spec.containers[0].image", "nginx:1.19"),
            ("spec.replicas", "3"),
            ("spec.strategy.canary.steps[0].setWeight", "20"),
            ("spec.selector.matchLabels.app", "guestbook"),
        ];
        for (path, want) in cases {
            assert_eq!(rollout_field(&ro, path).unwrap(), want, "{path}");
        }
        let errors = [
            (
                "spec.template.spec.containers[3].image",
                "index 3 out of range",
            ),
            ("spec.template.spec.containers[x]", "invalid index 'x'"),
            (
                "spec.nothing.here",
                "invalid path spec.nothing.here in rollout",
            ),
            (
                "spec.selector",
                "path spec.selector in rollout must terminate in a primitive value",
            ),
        ];
        for (path, want) in errors {
            assert_eq!(rollout_field(&ro, path).unwrap_err(), want, "{path}");
        }
    }
}
