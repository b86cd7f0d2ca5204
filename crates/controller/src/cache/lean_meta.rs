//! Object metadata decoded without `managedFields`.
//!
//! Every watch event carries the object's managed fields: a tree of field paths per writer,
//! often as large as the rest of the object. No part of the controller reads them (its writes
//! are merge patches naming only what they change), so the kinds decoded with [`LeanMeta`]
//! skip them while parsing instead of building the tree and dropping it afterwards: the
//! parser steps over the text without allocating.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::Deserialize;

/// [`ObjectMeta`] as it is decoded for a cache: every field but `managedFields`, which is
/// skipped unread.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LeanMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<LeanMeta> for ObjectMeta {
    fn from(m: LeanMeta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_what_object_meta_decodes_but_the_managed_fields() {
        let meta = json!({
            "name": "r", "generateName": "r-", "namespace": "ns", "uid": "u",
            "resourceVersion": "7", "generation": 3, "selfLink": "/x",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-02T00:00:00Z", "deletionGracePeriodSeconds": 30,
            "labels": {"a": "1"}, "annotations": {"b": "2"}, "finalizers": ["f"],
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                                 "name": "r", "uid": "o", "controller": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
        });
        let lean: ObjectMeta = serde_json::from_value::<LeanMeta>(meta.clone())
            .unwrap()
            .into();
        let mut full: ObjectMeta = serde_json::from_value(meta).unwrap();
        assert!(full.managed_fields.is_some());
        full.managed_fields = None;
        assert_eq!(lean, full);
    }

    #[test]
    fn nulls_read_as_absent_fields() {
        let lean: ObjectMeta =
            serde_json::from_value::<LeanMeta>(json!({"name": "r", "labels": null}))
                .unwrap()
                .into();
        assert_eq!(lean.name.as_deref(), Some("r"));
        assert_eq!(lean.labels, None);
    }
}
