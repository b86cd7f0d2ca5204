//! What every router that edits Ingresses (ALB, NGINX) reads and writes of one: its name and
//! its annotations, with the same error for an Ingress that is not the shape it should be.

use serde_json::{Map, Value, json};

use crate::RouterError;

/// `metadata.name`, empty when absent.
pub(crate) fn name(ingress: &Value) -> &str {
    ingress
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub(crate) fn malformed(ingress: &Value, what: &str) -> RouterError {
    RouterError::new(format!("ingress `{}` is malformed: {what}", name(ingress)))
}

/// The annotations, empty when there are none.
pub(crate) fn annotations(ingress: &Value) -> Result<Map<String, Value>, RouterError> {
    match ingress.pointer("/metadata/annotations") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(a)) => Ok(a.clone()),
        Some(_) => Err(malformed(ingress, "metadata.annotations is not a map")),
    }
}

/// A copy of `ingress` with these annotations. An Ingress without annotations is left
/// without them when there are still none, so that it does not read as changed.
pub(crate) fn with_annotations(
    ingress: &Value,
    annotations: Map<String, Value>,
) -> Result<Value, RouterError> {
    let mut out = ingress.clone();
    if annotations.is_empty()
        && matches!(
            ingress.pointer("/metadata/annotations"),
            None | Some(Value::Null)
        )
    {
        return Ok(out);
    }
    let metadata = out
        .as_object_mut()
        .ok_or_else(|| malformed(ingress, "not an object"))?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    let metadata = match metadata {
        Value::Null => {
            *metadata = json!({});
            metadata
        }
        m => m,
    };
    metadata
        .as_object_mut()
        .ok_or_else(|| malformed(ingress, "metadata is not a map"))?
        .insert("annotations".into(), Value::Object(annotations));
    Ok(out)
}
