//! Reading Datadog's answers: v1's last point of the first series, v2's scalar columns (one
//! value, or one per group of a `by {tag}` query).

use std::collections::BTreeMap;

use expr::Value;
use serde_json::json;

use super::super::ProviderError;
use super::super::outcome::{format_float, format_floats};
use super::MAX_GROUPS;

/// What a Datadog response says: the value as recorded, what conditions see, and extra
/// metadata (the groups of a grouped query).
pub(super) struct Reading {
    pub(super) value: String,
    pub(super) result: Value,
    pub(super) metadata: BTreeMap<String, String>,
}

impl Reading {
    fn plain((value, result): (String, Value)) -> Self {
        Self {
            value,
            result,
            metadata: BTreeMap::new(),
        }
    }
}

pub(super) fn parse_v1(document: &serde_json::Value) -> Result<Reading, ProviderError> {
    if let Some(error) = document
        .get("error")
        .and_then(|e| e.as_str())
        .filter(|e| !e.is_empty())
    {
        return Err(ProviderError(format!("datadog query error: {error}")));
    }
    let series = document.get("series").cloned().unwrap_or(json!([]));
    let points = series
        .get(0)
        .and_then(|s| s.get("pointlist"))
        .and_then(|p| p.as_array())
        .filter(|p| !p.is_empty());
    let Some(points) = points else {
        return Ok(Reading::plain((series.to_string(), Value::Nil)));
    };
    let last = points
        .last()
        .and_then(|p| p.as_array())
        .filter(|p| p.len() == 2);
    let Some(last) = last else {
        return Err(ProviderError::new(
            "datadog datapoint does not have 2 values",
        ));
    };
    number(&last[1]).map(Reading::plain)
}

pub(super) fn parse_v2(document: &serde_json::Value) -> Result<Reading, ProviderError> {
    // Datadog documents `errors` beside `data`; Argo reads it inside `data`. Either counts.
    let reported = document
        .get("errors")
        .or_else(|| document.pointer("/data/errors"));
    let errors = match reported {
        Some(serde_json::Value::String(e)) => e.clone(),
        Some(serde_json::Value::Array(e)) => e
            .iter()
            .map(|e| {
                e.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| e.to_string())
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => String::new(),
    };
    if !errors.is_empty() {
        return Err(ProviderError(format!(
            "There were errors in your query: {errors}"
        )));
    }
    let attributes = document
        .pointer("/data/attributes")
        .cloned()
        .unwrap_or(json!({}));
    let columns = attributes
        .get("columns")
        .and_then(|c| c.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let is_type =
        |c: &serde_json::Value, t: &str| c.get("type").and_then(|t| t.as_str()) == Some(t);
    let values = columns
        .iter()
        .find(|c| is_type(c, "number") || c.get("type").is_none())
        .and_then(|c| c.get("values"))
        .and_then(|v| v.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let groups: Vec<&serde_json::Value> = columns.iter().filter(|c| is_type(c, "group")).collect();

    if groups.is_empty() {
        return match values.first() {
            None => Ok(Reading::plain((attributes.to_string(), Value::Nil))),
            Some(v) => number(v).map(Reading::plain),
        };
    }
    // A `by {tag}` query: one value per group, always a list.
    let mut floats = Vec::with_capacity(values.len());
    let mut results = Vec::with_capacity(values.len());
    let mut named = Vec::with_capacity(values.len());
    for (row, v) in values.iter().enumerate() {
        let f = v.as_f64();
        floats.push(f.unwrap_or(f64::NAN));
        results.push(f.map_or(Value::Nil, Value::Float));
        let name = groups
            .iter()
            .map(|g| group_name(g.pointer(&format!("/values/{row}"))))
            .collect::<Vec<_>>()
            .join(",");
        named.push((name, v.clone()));
    }
    named.sort_by(|a, b| {
        let (a, b) = (
            a.1.as_f64().unwrap_or(f64::MIN),
            b.1.as_f64().unwrap_or(f64::MIN),
        );
        b.total_cmp(&a)
    });
    let mut metadata = BTreeMap::new();
    if named.len() > MAX_GROUPS {
        named.truncate(MAX_GROUPS);
        metadata.insert("groups_truncated".to_owned(), "true".to_owned());
    }
    let listed: Vec<serde_json::Value> = named
        .into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    metadata.insert(
        "groups".to_owned(),
        serde_json::Value::Array(listed).to_string(),
    );
    let value = if floats.iter().all(|f| !f.is_nan()) {
        format_floats(&floats)
    } else {
        serde_json::Value::Array(values.to_vec()).to_string()
    };
    Ok(Reading {
        value,
        result: Value::Array(results),
        metadata,
    })
}

/// A group cell is a list of tag values (`["prod"]`); several are joined with `,`.
fn group_name(cell: Option<&serde_json::Value>) -> String {
    match cell {
        Some(serde_json::Value::Array(tags)) => tags
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| t.to_string())
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// A point's value: a number, or `null` (no data) which is `nil` to conditions.
fn number(v: &serde_json::Value) -> Result<(String, Value), ProviderError> {
    match v {
        serde_json::Value::Null => Ok(("null".to_owned(), Value::Nil)),
        serde_json::Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            Ok((format_float(f), Value::Float(f)))
        }
        other => Err(ProviderError(format!(
            "datadog returned a value that is not a number: {other}"
        ))),
    }
}
