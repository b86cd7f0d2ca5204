//! The DestinationRule side of a subset split: the canary and stable subsets select pods by
//! pod-template hash, and every experiment Service gets a subset of its own.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};
use sluice_api::rollout::IstioDestinationRule;

use super::value::spec;
use super::{DESTINATION_RULE_UPDATED, MANAGED_BY, POD_TEMPLATE_HASH};
use crate::{Desired, Edit, EditResult, RouterError};

fn malformed(path: &str, what: &str) -> RouterError {
    RouterError::new(format!("DestinationRule {path} is not {what}"))
}

/// Points the canary and stable subsets at `desired.canary_hash` and `desired.stable_hash`
/// (an empty hash removes the label), gives each experiment Service a subset labelled with its
/// hash (appended when missing), and marks the DestinationRule as managed by `rollout`.
///
/// Subsets that are none of these are dropped from the list, those in `additionalSubsetNames`
/// included. Every other field, of the subsets kept and of the object, is preserved. Whether
/// the switch must wait for the ReplicaSets to be available is the engine's decision.
pub fn update_hash(
    dr: &Value,
    dr_ref: &IstioDestinationRule,
    rollout: &str,
    desired: &Desired,
) -> EditResult {
    let canary = dr_ref.canary_subset_name.as_deref().unwrap_or("");
    let stable = dr_ref.stable_subset_name.as_deref().unwrap_or("");
    let mut object = dr.clone();
    mark_managed(&mut object, rollout)?;
    let subsets = subsets(dr)?;
    let mut kept = Vec::with_capacity(subsets.len() + desired.additional.len());
    let mut seen = BTreeSet::new();
    for subset in subsets {
        let name = subset.get("name").and_then(Value::as_str).unwrap_or("");
        let hash = if !name.is_empty() && name == canary {
            &desired.canary_hash
        } else if !name.is_empty() && name == stable {
            &desired.stable_hash
        } else if let Some(e) = desired.additional.iter().find(|e| e.service_name == name) {
            seen.insert(name);
            &e.pod_template_hash
        } else {
            continue;
        };
        let mut subset = subset.clone();
        label(&mut subset, hash);
        kept.push(subset);
    }
    for e in &desired.additional {
        if !e.service_name.is_empty() && seen.insert(&e.service_name) {
            let mut subset = json!({"name": e.service_name});
            label(&mut subset, &e.pod_template_hash);
            kept.push(subset);
        }
    }
    if !kept.is_empty() || !subsets.is_empty() {
        set_subsets(&mut object, kept)?;
    }
    if object == *dr {
        return Ok(None);
    }
    let name = dr
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .or(dr_ref.name.as_deref())
        .unwrap_or("");
    Ok(Some(Edit {
        object,
        event: (
            DESTINATION_RULE_UPDATED,
            format!(
                "DestinationRule {name} subset updated ({canary}: {}, {stable}: {})",
                desired.canary_hash, desired.stable_hash
            ),
        ),
    }))
}

/// The pod-template hashes every subset of a DestinationRule selects. A ReplicaSet whose hash
/// is among them still receives routed traffic and must not be scaled down.
pub fn subset_hashes(dr: &Value) -> Vec<String> {
    let mut hashes: Vec<String> = Vec::new();
    for subset in subsets(dr).unwrap_or(&[]) {
        let hash = subset
            .get("labels")
            .and_then(|labels| labels.get(POD_TEMPLATE_HASH))
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty());
        if let Some(hash) = hash
            && !hashes.iter().any(|h| h == hash)
        {
            hashes.push(hash.to_string());
        }
    }
    hashes
}

/// `spec.subsets`: empty when absent, an error when not a list of objects.
fn subsets(dr: &Value) -> Result<&[Value], RouterError> {
    let list = match spec(dr, "DestinationRule")?.and_then(|spec| spec.get("subsets")) {
        None | Some(Value::Null) => return Ok(&[]),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(malformed("spec.subsets", "a list")),
    };
    for (i, subset) in list.iter().enumerate() {
        if !subset.is_object() {
            return Err(malformed(&format!("spec.subsets[{i}]"), "an object"));
        }
        match subset.get("labels") {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            Some(_) => return Err(malformed(&format!("spec.subsets[{i}].labels"), "a map")),
        }
    }
    Ok(list)
}

/// The child object under `key`, created when absent or null.
fn child<'a>(
    parent: &'a mut Value,
    key: &str,
    path: &str,
) -> Result<&'a mut Map<String, Value>, RouterError> {
    let Some(fields) = parent.as_object_mut() else {
        return Err(malformed(path, "inside an object"));
    };
    let entry = fields
        .entry(key)
        .and_modify(|v| {
            if v.is_null() {
                *v = Value::Object(Map::new());
            }
        })
        .or_insert_with(|| Value::Object(Map::new()));
    entry
        .as_object_mut()
        .ok_or_else(|| malformed(path, "an object"))
}

/// Adds the managed-by annotation naming the Rollout.
fn mark_managed(dr: &mut Value, rollout: &str) -> Result<(), RouterError> {
    if !dr.is_object() {
        return Err(RouterError::new("DestinationRule is not an object"));
    }
    let metadata = child(dr, "metadata", "metadata")?;
    let annotations = metadata
        .entry("annotations")
        .and_modify(|v| {
            if v.is_null() {
                *v = Value::Object(Map::new());
            }
        })
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| malformed("metadata.annotations", "a map"))?;
    annotations.insert(MANAGED_BY.into(), rollout.into());
    Ok(())
}

/// Sets or, for an empty hash, removes the hash label of a subset. A subset left without labels
/// loses the empty `labels` map, as a typed client would write it.
fn label(subset: &mut Value, hash: &str) {
    let Some(fields) = subset.as_object_mut() else {
        return;
    };
    if hash.is_empty() {
        if let Some(labels) = fields.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(POD_TEMPLATE_HASH);
        }
    } else {
        let labels = fields
            .entry("labels")
            .and_modify(|v| {
                if !v.is_object() {
                    *v = Value::Object(Map::new());
                }
            })
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(POD_TEMPLATE_HASH.into(), hash.into());
        }
    }
    let empty = match fields.get("labels") {
        Some(Value::Object(labels)) => labels.is_empty(),
        Some(Value::Null) => true,
        _ => false,
    };
    if empty {
        fields.remove("labels");
    }
}

/// Writes `spec.subsets`, creating `spec` when absent.
fn set_subsets(dr: &mut Value, subsets: Vec<Value>) -> Result<(), RouterError> {
    let spec = child(dr, "spec", "spec")?;
    spec.insert("subsets".into(), Value::Array(subsets));
    Ok(())
}
