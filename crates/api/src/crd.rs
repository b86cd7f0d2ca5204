//! CustomResourceDefinitions generated from the types.
//!
//! The schemas kube derives are adjusted so that the CRDs install wherever Argo's install
//! (Kubernetes 1.25 and later: CEL rules) and so that the API server stores objects the way it
//! does with Argo's own CRDs:
//! - descriptions, titles, `nullable` and `default` are dropped (defaults would change stored
//!   pod templates and with them the pod-template hash);
//! - the only CEL rule is Argo's: a Rollout's `.spec.selector` is immutable (`self == oldSelf`,
//!   on an atomic map, as in Argo's CRD); rules derived from the types are dropped;
//! - int-or-string fields (IntOrString, resource quantities) get `anyOf: [integer, string]`;
//! - embedded ObjectMeta (pod and job templates) is reduced to labels and annotations, as in
//!   Argo's CRDs, so other metadata fields are pruned the same way;
//! - `x-kubernetes-list-type: map` is dropped where a key is neither required nor defaulted;
//! - anything not allowed in a structural schema is reported as an error, not written.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresources, JSONSchemaProps, ValidationRule,
};
use kube::CustomResourceExt;
use serde_json::{Map, Value, json};

use crate::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate, Experiment, Rollout};

/// A CRD and the file it is written to.
#[derive(Clone, Debug)]
pub struct CrdManifest {
    pub file_name: &'static str,
    pub crd: CustomResourceDefinition,
}

/// Why a CRD could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("{kind}: schema at `{path}` is not structural: {reason}")]
    NotStructural {
        kind: String,
        path: String,
        reason: String,
    },
    #[error("{kind}: the schema does not convert to JSONSchemaProps without loss")]
    Lossy { kind: String },
    #[error("{kind}: {source}")]
    Json {
        kind: String,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Yaml(#[from] crate::yaml::YamlError),
}

/// File name of the kustomization listing the CRDs.
pub const KUSTOMIZATION_FILE: &str = "kustomization.yaml";

/// The five CRDs, in the order Argo's kustomization lists them.
pub fn manifests() -> Result<Vec<CrdManifest>, CrdError> {
    Ok(vec![
        with_immutable_selector(manifest::<Rollout>("rollout-crd.yaml", true)?)?,
        manifest::<Experiment>("experiment-crd.yaml", false)?,
        manifest::<AnalysisRun>("analysis-run-crd.yaml", false)?,
        manifest::<AnalysisTemplate>("analysis-template-crd.yaml", false)?,
        manifest::<ClusterAnalysisTemplate>("cluster-analysis-template-crd.yaml", false)?,
    ])
}

/// Every file of `manifests/crds/` as (file name, contents): the CRDs and the kustomization.
pub fn render_files() -> Result<Vec<(String, String)>, CrdError> {
    let manifests = manifests()?;
    let mut files = Vec::with_capacity(manifests.len() + 1);
    let mut kustomization = String::from(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\nresources:\n",
    );
    for m in &manifests {
        files.push((m.file_name.to_owned(), crate::yaml::to_string(&m.crd)?));
        kustomization.push_str(&format!("- {}\n", m.file_name));
    }
    files.push((KUSTOMIZATION_FILE.to_owned(), kustomization));
    Ok(files)
}

/// Builds the adjusted CRD of `K`. Only Rollout keeps the status (and scale) subresource: Argo
/// writes the status of the other kinds with plain updates.
fn manifest<K: CustomResourceExt>(
    file_name: &'static str,
    status_subresource: bool,
) -> Result<CrdManifest, CrdError> {
    let mut crd = K::crd();
    let kind = crd.spec.names.kind.clone();
    crd.spec.names.list_kind = Some(format!("{kind}List"));
    for version in &mut crd.spec.versions {
        if !status_subresource {
            version.subresources = Some(CustomResourceSubresources::default());
        }
        if let Some(validation) = &mut version.schema
            && let Some(schema) = validation.open_api_v3_schema.take()
        {
            validation.open_api_v3_schema = Some(structural_schema(&kind, schema)?);
        }
    }
    Ok(CrdManifest { file_name, crd })
}

/// The message Argo's CRD gives when an update changes a Rollout's selector.
pub const SELECTOR_IMMUTABLE_MESSAGE: &str = ".spec.selector is immutable";

/// Adds Argo's CEL rule to `.spec.selector`: once created, a Rollout's selector never changes
/// (its ReplicaSets and Services are chosen by it). The map is atomic, as in Argo's CRD, so the
/// rule compares whole selectors.
fn with_immutable_selector(mut m: CrdManifest) -> Result<CrdManifest, CrdError> {
    let kind = m.crd.spec.names.kind.clone();
    for version in &mut m.crd.spec.versions {
        let selector = version
            .schema
            .as_mut()
            .and_then(|v| v.open_api_v3_schema.as_mut())
            .and_then(|root| root.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
            .and_then(|spec| spec.properties.as_mut())
            .and_then(|p| p.get_mut("selector"))
            .ok_or_else(|| not_structural(&kind, ".spec.selector", "missing"))?;
        selector.x_kubernetes_map_type = Some("atomic".into());
        selector.x_kubernetes_validations = Some(vec![ValidationRule {
            rule: "self == oldSelf".into(),
            message: Some(SELECTOR_IMMUTABLE_MESSAGE.into()),
            ..ValidationRule::default()
        }]);
    }
    Ok(m)
}

fn structural_schema(kind: &str, schema: JSONSchemaProps) -> Result<JSONSchemaProps, CrdError> {
    let json_err = |source| CrdError::Json {
        kind: kind.to_owned(),
        source,
    };
    let mut value = serde_json::to_value(schema).map_err(json_err)?;
    clean(kind, "", &mut value)?;
    let root = value
        .as_object_mut()
        .and_then(|root| root.get_mut("properties"))
        .and_then(Value::as_object_mut)
        .ok_or_else(|| not_structural(kind, "", "the root has no properties"))?;
    // Validated by the API server itself; declared as in Argo's CRDs.
    let mut props = Map::new();
    props.insert("apiVersion".into(), json!({"type": "string"}));
    props.insert("kind".into(), json!({"type": "string"}));
    props.insert("metadata".into(), json!({"type": "object"}));
    props.append(root);
    *root = props;

    let schema: JSONSchemaProps = serde_json::from_value(value.clone()).map_err(json_err)?;
    if serde_json::to_value(&schema).map_err(json_err)? != value {
        return Err(CrdError::Lossy {
            kind: kind.to_owned(),
        });
    }
    Ok(schema)
}

/// Keywords removed from every schema node.
const DROPPED: &[&str] = &[
    "description",
    "title",
    "nullable",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "uniqueItems",
    "x-kubernetes-validations",
    "$schema",
];

/// Keywords a node may keep.
const ALLOWED: &[&str] = &[
    "type",
    "format",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "anyOf",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
];

fn not_structural(kind: &str, path: &str, reason: impl Into<String>) -> CrdError {
    CrdError::NotStructural {
        kind: kind.to_owned(),
        path: if path.is_empty() {
            ".".into()
        } else {
            path.to_owned()
        },
        reason: reason.into(),
    }
}

fn flag(node: &Map<String, Value>, key: &str) -> bool {
    node.get(key) == Some(&Value::Bool(true))
}

fn clean(kind: &str, path: &str, value: &mut Value) -> Result<(), CrdError> {
    let node = value
        .as_object_mut()
        .ok_or_else(|| not_structural(kind, path, "not a schema object"))?;
    node.retain(|key, _| !DROPPED.contains(&key.as_str()));
    // With `nullable` gone, null is no longer an allowed value.
    if let Some(Value::Array(values)) = node.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(key) = node.keys().find(|k| !ALLOWED.contains(&k.as_str())) {
        return Err(not_structural(kind, path, format!("keyword `{key}`")));
    }

    let int_or_string = flag(node, "x-kubernetes-int-or-string");
    if int_or_string {
        node.remove("type");
        node.remove("format");
        node.insert(
            "anyOf".into(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
    } else if node.contains_key("anyOf") {
        return Err(not_structural(kind, path, "anyOf outside int-or-string"));
    }
    if !node.contains_key("type")
        && !int_or_string
        && !flag(node, "x-kubernetes-preserve-unknown-fields")
    {
        return Err(not_structural(kind, path, "no type"));
    }
    if node.contains_key("properties") && node.contains_key("additionalProperties") {
        return Err(not_structural(
            kind,
            path,
            "both properties and additionalProperties",
        ));
    }

    if let Some(Value::Object(props)) = node.get_mut("properties") {
        for (name, child) in props.iter_mut() {
            let child_path = format!("{path}.{name}");
            if name == "metadata" && is_object_meta(child) {
                *child = labels_and_annotations();
            } else {
                clean(kind, &child_path, child)?;
            }
        }
    }
    if let Some(items) = node.get_mut("items") {
        clean(kind, &format!("{path}[]"), items)?;
    }
    if let Some(additional) = node.get_mut("additionalProperties") {
        clean(kind, &format!("{path}{{}}"), additional)?;
    }
    drop_unkeyed_list_map(node);
    Ok(())
}

/// Kubernetes rejects list-map keys that are neither required nor defaulted.
fn drop_unkeyed_list_map(node: &mut Map<String, Value>) {
    if node.get("x-kubernetes-list-type") != Some(&json!("map")) {
        return;
    }
    let items = node.get("items").and_then(Value::as_object);
    let required: Vec<&str> = items
        .and_then(|i| i.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let keys: Vec<&str> = node
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let keyed = !keys.is_empty()
        && keys.iter().all(|key| {
            required.contains(key)
                || items
                    .and_then(|i| i.get("properties"))
                    .and_then(|p| p.get(*key))
                    .is_some_and(|p| p.get("default").is_some())
        });
    if !keyed {
        node.remove("x-kubernetes-list-type");
        node.remove("x-kubernetes-list-map-keys");
    }
}

fn is_object_meta(schema: &Value) -> bool {
    let props = schema.get("properties");
    ["managedFields", "ownerReferences", "resourceVersion"]
        .iter()
        .all(|p| props.and_then(|props| props.get(*p)).is_some())
}

fn labels_and_annotations() -> Value {
    json!({
        "type": "object",
        "properties": {
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaned(mut schema: Value) -> Result<Value, CrdError> {
        clean("Test", "", &mut schema).map(|_| schema)
    }

    #[test]
    fn drops_annotations_and_defaults() {
        let out = cleaned(json!({
            "type": "object",
            "description": "d",
            "properties": {"a": {"type": "string", "default": "", "nullable": true, "title": "t"}}
        }))
        .unwrap();
        assert_eq!(
            out,
            json!({"type": "object", "properties": {"a": {"type": "string"}}})
        );
    }

    #[test]
    fn int_or_string_gets_any_of() {
        let out = cleaned(json!({"x-kubernetes-int-or-string": true, "nullable": true})).unwrap();
        assert_eq!(
            out,
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]})
        );
    }

    #[test]
    fn rejects_non_structural_nodes() {
        assert!(cleaned(json!({"$ref": "#/x"})).is_err());
        assert!(cleaned(json!({"properties": {}})).is_err());
        assert!(cleaned(json!({"type": "object", "properties": {"a": true}})).is_err());
        assert!(cleaned(json!({"type": "object", "anyOf": [{"type": "string"}]})).is_err());
        assert!(cleaned(json!({"x-kubernetes-preserve-unknown-fields": true})).is_ok());
    }

    #[test]
    fn list_maps_need_required_or_defaulted_keys() {
        let list = |required: Value, default: Option<&str>| {
            let mut port = json!({"type": "string"});
            if let Some(d) = default {
                port["default"] = json!(d);
            }
            json!({
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name", "protocol"],
                "items": {"type": "object", "required": required,
                          "properties": {"name": {"type": "string"}, "protocol": port}}
            })
        };
        let mut keyed = list(json!(["name", "protocol"]), None);
        drop_unkeyed_list_map(keyed.as_object_mut().unwrap());
        assert_eq!(keyed["x-kubernetes-list-type"], "map");
        let mut defaulted = list(json!(["name"]), Some("TCP"));
        drop_unkeyed_list_map(defaulted.as_object_mut().unwrap());
        assert_eq!(defaulted["x-kubernetes-list-type"], "map");
        let mut unkeyed = list(json!(["name"]), None);
        drop_unkeyed_list_map(unkeyed.as_object_mut().unwrap());
        assert!(unkeyed.get("x-kubernetes-list-type").is_none());
        assert!(unkeyed.get("x-kubernetes-list-map-keys").is_none());
    }

    #[test]
    fn crd_names_scope_and_subresources() {
        let manifests = manifests().unwrap();
        let by_kind = |kind: &str| {
            manifests
                .iter()
                .find(|m| m.crd.spec.names.kind == kind)
                .unwrap()
                .crd
                .clone()
        };
        let ro = by_kind("Rollout");
        assert_eq!(ro.metadata.name.as_deref(), Some("rollouts.argoproj.io"));
        assert_eq!(ro.spec.names.short_names, Some(vec!["ro".to_owned()]));
        assert_eq!(ro.spec.names.list_kind.as_deref(), Some("RolloutList"));
        let sub = ro.spec.versions[0].subresources.clone().unwrap();
        assert!(sub.status.is_some());
        let scale = sub.scale.unwrap();
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.HPAReplicas");
        assert_eq!(
            scale.label_selector_path.as_deref(),
            Some(".status.selector")
        );

        for kind in [
            "Experiment",
            "AnalysisRun",
            "AnalysisTemplate",
            "ClusterAnalysisTemplate",
        ] {
            let crd = by_kind(kind);
            let sub = crd.spec.versions[0].subresources.clone().unwrap();
            assert!(sub.status.is_none() && sub.scale.is_none(), "{kind}");
        }
        assert_eq!(by_kind("ClusterAnalysisTemplate").spec.scope, "Cluster");
        assert_eq!(by_kind("AnalysisTemplate").spec.scope, "Namespaced");
        assert_eq!(
            by_kind("Experiment").spec.names.short_names,
            Some(vec!["exp".to_owned()])
        );
    }

    #[test]
    fn embedded_object_meta_is_reduced() {
        let ro = manifests().unwrap().remove(0).crd;
        let schema = serde_json::to_value(&ro.spec.versions[0].schema).unwrap();
        let meta = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["template"]["properties"]
            ["metadata"];
        assert_eq!(*meta, labels_and_annotations());
    }

    #[test]
    fn rollout_selector_is_immutable_as_in_argo() {
        let ro = manifests().unwrap().remove(0).crd;
        let schema = serde_json::to_value(&ro.spec.versions[0].schema).unwrap();
        let selector = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["selector"];
        assert_eq!(selector["x-kubernetes-map-type"], "atomic");
        assert_eq!(
            selector["x-kubernetes-validations"],
            json!([{"rule": "self == oldSelf", "message": ".spec.selector is immutable"}])
        );
        // The only rule in any of the CRDs.
        for m in manifests().unwrap() {
            let text = serde_json::to_string(&m.crd).unwrap();
            let rules = text.matches("x-kubernetes-validations").count();
            let expected = usize::from(m.crd.spec.names.kind == "Rollout");
            assert_eq!(rules, expected, "{}", m.file_name);
        }
    }
}
