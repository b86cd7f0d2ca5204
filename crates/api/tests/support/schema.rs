//! A small validator for Kubernetes structural schemas, a schema walker and a generator of
//! sample instances.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// What validating an object against a CRD schema found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Values the API server would reject.
    pub errors: Vec<String>,
    /// Fields the API server would silently drop (unknown fields, non-nullable nulls).
    pub pruned: Vec<String>,
}

impl Findings {
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty() && self.pruned.is_empty()
    }
}

/// Validates `value` against a CRD's openAPIV3Schema the way the API server does for the
/// keywords structural schemas use: type, format (int32, int64, date-time), properties,
/// required, items, additionalProperties, anyOf, enum, minimum/maximum, length and count
/// limits, x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields and nullable.
/// `metadata` at the root is left to the API server's own checks, as it is not pruned.
pub fn validate(schema: &Value, value: &Value) -> Findings {
    let mut findings = Findings::default();
    check(schema, value, "", &mut findings);
    findings
}

fn flag(schema: &Map<String, Value>, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn is_integer(value: &Value) -> bool {
    value.is_i64() || value.is_u64()
}

fn check(schema: &Value, value: &Value, path: &str, f: &mut Findings) {
    let at = if path.is_empty() { "." } else { path };
    let Some(s) = schema.as_object() else {
        f.errors.push(format!("{at}: schema is not an object"));
        return;
    };
    if value.is_null() {
        if !flag(s, "nullable") {
            f.pruned.push(format!("{at} (null)"));
        }
        return;
    }
    if flag(s, "x-kubernetes-int-or-string") {
        if !(value.is_string() || is_integer(value)) {
            f.errors
                .push(format!("{at}: {value} is neither an integer nor a string"));
        }
        return;
    }
    if let Some(Value::Array(branches)) = s.get("anyOf") {
        let matches = branches.iter().any(|b| {
            let mut sub = Findings::default();
            check(b, value, path, &mut sub);
            sub.errors.is_empty()
        });
        if !matches {
            f.errors
                .push(format!("{at}: {value} matches no anyOf branch"));
        }
    }
    if let Some(Value::Array(allowed)) = s.get("enum")
        && !allowed.contains(value)
    {
        f.errors
            .push(format!("{at}: {value} not in enum {allowed:?}"));
    }
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    match s.get("type").and_then(Value::as_str) {
        Some("object") => check_object(s, value, path, preserve, f),
        Some("array") => {
            let Some(items) = value.as_array() else {
                f.errors
                    .push(format!("{at}: expected an array, got {value}"));
                return;
            };
            bounds(s, "minItems", "maxItems", items.len(), at, f);
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"), f);
                }
            }
        }
        Some("string") => {
            let Some(text) = value.as_str() else {
                f.errors
                    .push(format!("{at}: expected a string, got {value}"));
                return;
            };
            bounds(s, "minLength", "maxLength", text.chars().count(), at, f);
            if s.get("format").and_then(Value::as_str) == Some("date-time")
                && text.parse::<jiff::Timestamp>().is_err()
            {
                f.errors.push(format!("{at}: {text:?} is not a date-time"));
            }
        }
        Some("integer") => {
            if !is_integer(value) {
                f.errors
                    .push(format!("{at}: expected an integer, got {value}"));
                return;
            }
            let n = value
                .as_i64()
                .map(i128::from)
                .unwrap_or(i128::from(value.as_u64().unwrap_or(u64::MAX)));
            let (lo, hi) = match s.get("format").and_then(Value::as_str) {
                Some("int32") => (i128::from(i32::MIN), i128::from(i32::MAX)),
                _ => (i128::from(i64::MIN), i128::from(i64::MAX)),
            };
            if n < lo || n > hi {
                f.errors.push(format!("{at}: {n} out of range"));
            }
            range(s, n as f64, at, f);
        }
        Some("number") => match value.as_f64() {
            Some(n) => range(s, n, at, f),
            None => f
                .errors
                .push(format!("{at}: expected a number, got {value}")),
        },
        Some("boolean") => {
            if !value.is_boolean() {
                f.errors
                    .push(format!("{at}: expected a boolean, got {value}"));
            }
        }
        Some(other) => f.errors.push(format!("{at}: unknown schema type {other}")),
        None if preserve => {}
        None => f.errors.push(format!("{at}: schema without type")),
    }
}

fn check_object(
    s: &Map<String, Value>,
    value: &Value,
    path: &str,
    preserve: bool,
    f: &mut Findings,
) {
    let at = if path.is_empty() { "." } else { path };
    let Some(object) = value.as_object() else {
        f.errors
            .push(format!("{at}: expected an object, got {value}"));
        return;
    };
    bounds(s, "minProperties", "maxProperties", object.len(), at, f);
    for required in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = required.as_str().unwrap_or_default();
        if object.get(name).is_none_or(Value::is_null) {
            f.errors.push(format!("{path}.{name}: required"));
        }
    }
    let properties = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    for (key, child) in object {
        let child_path = format!("{path}.{key}");
        if path.is_empty() && key == "metadata" {
            continue;
        }
        if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
            check(child_schema, child, &child_path, f);
        } else if let Some(ap) = additional.filter(|ap| ap.is_object()) {
            check(ap, child, &child_path, f);
        } else if additional == Some(&Value::Bool(true)) || preserve {
            // Kept as given.
        } else {
            f.pruned.push(child_path);
        }
    }
}

fn bounds(s: &Map<String, Value>, min: &str, max: &str, len: usize, at: &str, f: &mut Findings) {
    let len = len as u64;
    if s.get(min).and_then(Value::as_u64).is_some_and(|m| len < m) {
        f.errors.push(format!("{at}: fewer than {min}"));
    }
    if s.get(max).and_then(Value::as_u64).is_some_and(|m| len > m) {
        f.errors.push(format!("{at}: more than {max}"));
    }
}

fn range(s: &Map<String, Value>, n: f64, at: &str, f: &mut Findings) {
    if s.get("minimum")
        .and_then(Value::as_f64)
        .is_some_and(|m| n < m)
    {
        f.errors.push(format!("{at}: {n} below minimum"));
    }
    if s.get("maximum")
        .and_then(Value::as_f64)
        .is_some_and(|m| n > m)
    {
        f.errors.push(format!("{at}: {n} above maximum"));
    }
}

/// Every schema node by path: `.spec.steps[].setWeight`, `.labels{}` for map values.
pub fn paths(schema: &Value) -> BTreeMap<String, &Value> {
    let mut out = BTreeMap::new();
    walk(schema, String::new(), &mut out);
    out
}

fn walk<'a>(schema: &'a Value, path: String, out: &mut BTreeMap<String, &'a Value>) {
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            walk(child, format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        walk(items, format!("{path}[]"), out);
    }
    if let Some(ap) = schema
        .get("additionalProperties")
        .filter(|ap| ap.is_object())
    {
        walk(ap, format!("{path}{{}}"), out);
    }
    out.insert(path, schema);
}

/// Whether a node accepts any content (free-form).
pub fn is_free_form(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        && schema.get("properties").is_none()
}

/// Whether a node is int-or-string.
pub fn is_int_or_string(schema: &Value) -> bool {
    schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
}

/// An instance of `schema` with every declared field set (one item per list, one entry per
/// map). Free-form nodes get nested content when `ours` (our schema by path) is free-form there
/// too, and are left out otherwise (Argo declares some typed Kubernetes fields free-form only to
/// keep its CRDs small).
pub fn sample(schema: &Value, ours: &BTreeMap<String, &Value>) -> Value {
    sample_at(schema, "", ours).unwrap_or(Value::Null)
}

fn sample_at(schema: &Value, path: &str, ours: &BTreeMap<String, &Value>) -> Option<Value> {
    if is_free_form(schema) {
        return ours
            .get(path)
            .filter(|o| is_free_form(o))
            .map(|_| json!({"key": {"nested": [1, "two", true, null], "empty": {}}}));
    }
    if is_int_or_string(schema) {
        // A string, so that resource quantities (which are always written as strings) compare equal.
        return Some(json!("7"));
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return Some(first.clone());
    }
    match schema.get("type").and_then(Value::as_str)? {
        "object" => {
            let mut object = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, child) in props {
                    if let Some(v) = sample_at(child, &format!("{path}.{name}"), ours) {
                        object.insert(name.clone(), v);
                    }
                }
            }
            if let Some(ap) = schema
                .get("additionalProperties")
                .filter(|ap| ap.is_object())
                && let Some(v) = sample_at(ap, &format!("{path}{{}}"), ours)
            {
                object.insert("some-key".into(), v);
            }
            Some(Value::Object(object))
        }
        "array" => {
            let item = schema
                .get("items")
                .and_then(|items| sample_at(items, &format!("{path}[]"), ours));
            Some(Value::Array(item.into_iter().collect()))
        }
        "string" => Some(match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => json!("2024-08-01T15:13:36Z"),
            _ => json!("text"),
        }),
        "integer" => Some(json!(3)),
        "number" => Some(json!(1.5)),
        "boolean" => Some(json!(true)),
        _ => None,
    }
}
