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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::istio::fixtures::*;

    fn rewritten(dr: &Value, dr_ref: &IstioDestinationRule, desired: &Desired) -> Edit {
        match update_hash(dr, dr_ref, "istio-subset-split", desired) {
            Ok(Some(edit)) => {
                assert_eq!(
                    update_hash(&edit.object, dr_ref, "istio-subset-split", desired),
                    Ok(None),
                    "idempotent"
                );
                edit
            }
            other => panic!("expected an edit, got {other:?}"),
        }
    }

    #[test]
    fn corpus_destination_rule() {
        let edit = rewritten(&yaml(SUBSET_SPLIT_DR), &dr_ref(&[]), &subset_split(10));
        let expected = yaml(
            "
apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata:
  name: istio-subset-split-destrule
  annotations:
    argo-rollouts.argoproj.io/managed-by-rollouts: istio-subset-split
spec:
  host: istio-subset-split
  subsets:
  - name: stable
    labels:
      app: istio-subset-split
      rollouts-pod-template-hash: stable-hash
  - name: canary
    labels:
      app: istio-subset-split
      rollouts-pod-template-hash: canary-hash
",
        );
        assert_eq!(edit.object, expected);
        assert_eq!(
            edit.event,
            (
                "UpdatedDestinationRule",
                "DestinationRule istio-subset-split-destrule subset updated \
                 (canary: canary-hash, stable: stable-hash)"
                    .to_string()
            )
        );
    }

    const RICH_DR: &str = "
metadata:
  name: dr
  annotations: {team: payments}
spec:
  host: svc
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
  exportTo: ['.']
  subsets:
  - name: canary
    labels: {rollouts-pod-template-hash: old-canary}
    trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}
  - name: preview
    labels: {version: v3}
  - name: old-experiment
    labels: {rollouts-pod-template-hash: old}
  - name: stable
    labels: {rollouts-pod-template-hash: old-stable}
  - name: exp-b
    labels: {rollouts-pod-template-hash: old-b}
";

    #[test]
    fn keeps_fields_drops_other_subsets_adds_experiments() {
        let mut desired = subset_split(10);
        desired.additional = vec![experiment("exp-a", 5), experiment("exp-b", 5)];
        let edit = rewritten(&yaml(RICH_DR), &dr_ref(&["preview"]), &desired);
        let expected = yaml(
            "
metadata:
  name: dr
  annotations:
    team: payments
    argo-rollouts.argoproj.io/managed-by-rollouts: istio-subset-split
spec:
  host: svc
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
  exportTo: ['.']
  subsets:
  - name: canary
    labels: {rollouts-pod-template-hash: canary-hash}
    trafficPolicy: {loadBalancer: {simple: ROUND_ROBIN}}
  - name: stable
    labels: {rollouts-pod-template-hash: stable-hash}
  - name: exp-b
    labels: {rollouts-pod-template-hash: exp-b-hash}
  - name: exp-a
    labels: {rollouts-pod-template-hash: exp-a-hash}
",
        );
        assert_eq!(edit.object, expected);
        assert_eq!(
            edit.event.1,
            "DestinationRule dr subset updated (canary: canary-hash, stable: stable-hash)"
        );
    }

    #[test]
    fn empty_hash_removes_the_label() {
        let mut desired = subset_split(0);
        desired.canary_hash = String::new();
        let dr = yaml(
            "
metadata: {name: dr}
spec:
  subsets:
  - name: canary
    labels: {rollouts-pod-template-hash: old, app: a}
  - name: stable
    labels: {rollouts-pod-template-hash: old}
",
        );
        let edit = rewritten(&dr, &dr_ref(&[]), &desired);
        assert_eq!(
            edit.object["spec"]["subsets"],
            yaml(
                "
- name: canary
  labels: {app: a}
- name: stable
  labels: {rollouts-pod-template-hash: stable-hash}
"
            )
        );
        desired.stable_hash = String::new();
        let edit = rewritten(&edit.object, &dr_ref(&[]), &desired);
        assert_eq!(
            edit.object["spec"]["subsets"][1],
            yaml("{name: stable}"),
            "no empty labels map is left"
        );
        assert_eq!(
            edit.event.1,
            "DestinationRule dr subset updated (canary: , stable: )"
        );
    }

    #[test]
    fn unchanged_rule_is_not_written() {
        let dr = yaml(
            "
metadata:
  name: dr
  annotations: {argo-rollouts.argoproj.io/managed-by-rollouts: istio-subset-split}
spec:
  subsets:
  - name: stable
    labels: {rollouts-pod-template-hash: stable-hash}
  - name: canary
    labels: {rollouts-pod-template-hash: canary-hash}
",
        );
        assert_eq!(
            update_hash(&dr, &dr_ref(&[]), "istio-subset-split", &subset_split(50)),
            Ok(None)
        );
        // Another Rollout's annotation is taken over.
        let edit = update_hash(&dr, &dr_ref(&[]), "other", &subset_split(50));
        assert!(matches!(edit, Ok(Some(_))), "{edit:?}");
    }

    #[test]
    fn rule_without_subsets() {
        let dr = yaml("metadata: {name: dr}\nspec: {host: svc}");
        let edit = rewritten(&dr, &dr_ref(&[]), &subset_split(0));
        assert_eq!(edit.object["spec"], yaml("{host: svc}"));
        let mut desired = subset_split(0);
        desired.additional = vec![experiment("exp", 10)];
        let edit = rewritten(&dr, &dr_ref(&[]), &desired);
        assert_eq!(
            edit.object["spec"]["subsets"],
            yaml("[{name: exp, labels: {rollouts-pod-template-hash: exp-hash}}]")
        );
    }

    #[test]
    fn malformed_rules_are_errors() {
        let cases = [
            ("[]", "DestinationRule is not an object"),
            ("{metadata: 1}", "DestinationRule metadata is not an object"),
            (
                "{metadata: {annotations: []}}",
                "DestinationRule metadata.annotations is not a map",
            ),
            ("{spec: []}", "DestinationRule spec is not an object"),
            (
                "{spec: {subsets: {}}}",
                "DestinationRule spec.subsets is not a list",
            ),
            (
                "{spec: {subsets: [1]}}",
                "DestinationRule spec.subsets[0] is not an object",
            ),
            (
                "{spec: {subsets: [{name: canary, labels: [a]}]}}",
                "DestinationRule spec.subsets[0].labels is not a map",
            ),
        ];
        for (dr, message) in cases {
            assert_eq!(
                update_hash(&yaml(dr), &dr_ref(&[]), "r", &subset_split(0)),
                Err(RouterError::new(message)),
                "{dr}"
            );
        }
    }

    #[test]
    fn hashes_of_all_subsets() {
        assert_eq!(
            subset_hashes(&yaml(RICH_DR)),
            ["old-canary", "old", "old-stable", "old-b"]
        );
        assert_eq!(subset_hashes(&yaml(SUBSET_SPLIT_DR)), Vec::<String>::new());
        let dr = yaml(
            "
spec:
  subsets:
  - {name: a, labels: {rollouts-pod-template-hash: h}}
  - {name: b, labels: {rollouts-pod-template-hash: h}}
  - {name: c, labels: {rollouts-pod-template-hash: ''}}
",
        );
        assert_eq!(subset_hashes(&dr), ["h"]);
        assert_eq!(
            subset_hashes(&yaml("{spec: {subsets: 3}}")),
            Vec::<String>::new()
        );
    }
}
