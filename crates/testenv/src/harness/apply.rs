//! Applying YAML of any kind by server-side apply.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use anyhow::{Context as _, anyhow, bail};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope, pinned_kind};
use serde_json::Value;

use super::FIELD_MANAGER;

/// Kinds resolved so far; the resource names of a kind do not change while a process runs.
static KINDS: LazyLock<Mutex<HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>> =
    LazyLock::new(Mutex::default);

/// Splits multi-document YAML into JSON values, skipping empty documents.
pub fn parse_documents(yaml: &str) -> anyhow::Result<Vec<Value>> {
    let docs: Vec<Value> = match serde_saphyr::from_multiple(yaml) {
        Ok(docs) => docs,
        // Some published manifests (Istio's CRDs among them) continue quoted scalars on lines
        // indented less than YAML allows; kubectl's libyaml-based parser takes them, and so
        // does this fallback, which is libyaml's.
        Err(strict) => parse_leniently(yaml)
            .map_err(|_| anyhow::Error::new(strict))
            .context("parsing YAML")?,
    };
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn parse_leniently(yaml: &str) -> Result<Vec<Value>, serde_yaml::Error> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(yaml)
        .map(Value::deserialize)
        .collect()
}

/// Looks up the API resource serving `apiVersion` + `kind` (one discovery request per kind and
/// process).
pub async fn resolve_kind(
    client: &Client,
    api_version: &str,
    kind: &str,
) -> anyhow::Result<(ApiResource, ApiCapabilities)> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    if let Some(found) = kinds().get(&gvk) {
        return Ok(found.clone());
    }
    let found = pinned_kind(client, &gvk).await.map_err(|e| {
        anyhow!(
            "kind {kind} of {api_version} is not served by the API server ({e}); \
             if it is one of the project's kinds, use TestEnv::with_crds()"
        )
    })?;
    kinds().insert(gvk, found.clone());
    Ok(found)
}

fn kinds() -> MutexGuard<'static, HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>> {
    KINDS.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) async fn apply_yaml(
    client: &Client,
    namespace: &str,
    yaml: &str,
) -> anyhow::Result<Vec<DynamicObject>> {
    let mut applied = Vec::new();
    for doc in parse_documents(yaml)? {
        applied.push(apply_document(client, namespace, doc).await?);
    }
    Ok(applied)
}

pub(super) async fn apply_document(
    client: &Client,
    namespace: &str,
    mut doc: Value,
) -> anyhow::Result<DynamicObject> {
    let field = |doc: &Value, pointer: &str| {
        doc.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (Some(api_version), Some(kind)) = (field(&doc, "/apiVersion"), field(&doc, "/kind")) else {
        bail!("a YAML document has no apiVersion or kind: {doc}");
    };
    let Some(name) = field(&doc, "/metadata/name") else {
        bail!("{kind} without metadata.name: server-side apply needs a name");
    };
    default_port_protocols(&mut doc);
    let (resource, capabilities) = resolve_kind(client, &api_version, &kind).await?;
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => {
            doc["metadata"]["namespace"] = Value::String(namespace.to_string());
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&doc))
        .await
        .with_context(|| format!("applying {kind} {name}"))
}

/// Sets `protocol: TCP` on Service and container ports that leave it out. Those lists are keyed by
/// port and protocol, and a 1.20 API server rejects an apply with a key missing instead of
/// defaulting it.
fn default_port_protocols(doc: &mut Value) {
    if doc["kind"] == "Service"
        && let Some(ports) = doc.pointer_mut("/spec/ports").and_then(Value::as_array_mut)
    {
        ports.iter_mut().for_each(default_protocol);
    }
    default_container_port_protocols(doc);
}

fn default_container_port_protocols(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let is_container_list = matches!(
                    key.as_str(),
                    "containers" | "initContainers" | "ephemeralContainers"
                );
                if let (true, Some(containers)) = (is_container_list, child.as_array_mut()) {
                    for container in containers {
                        if let Some(ports) =
                            container.get_mut("ports").and_then(Value::as_array_mut)
                        {
                            ports.iter_mut().for_each(default_protocol);
                        }
                    }
                } else {
                    default_container_port_protocols(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(default_container_port_protocols),
        _ => {}
    }
}

fn default_protocol(port: &mut Value) {
    if let Some(port) = port.as_object_mut() {
        port.entry("protocol")
            .or_insert_with(|| Value::String("TCP".to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_split_and_empty_ones_are_skipped() {
        let docs = parse_documents(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n# only a comment\n---\napiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: b\n",
        )
        .unwrap();
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, vec!["ConfigMap", "ReplicaSet"]);
    }

    #[test]
    fn port_protocols_default_to_tcp() {
        let mut service = serde_json::json!({"kind": "Service", "spec": {"ports": [
            {"port": 80}, {"port": 53, "protocol": "UDP"}
        ]}});
        default_port_protocols(&mut service);
        assert_eq!(service["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(service["spec"]["ports"][1]["protocol"], "UDP");

        let mut rollout = serde_json::json!({"kind": "Rollout", "spec": {"template": {"spec": {
            "containers": [{"name": "app", "ports": [{"containerPort": 8080}]}],
            "initContainers": [{"name": "init"}]
        }}}});
        default_port_protocols(&mut rollout);
        let container = &rollout["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["ports"][0]["protocol"], "TCP");
        assert!(
            rollout["spec"]["template"]["spec"]["initContainers"][0]
                .get("ports")
                .is_none()
        );
    }

    #[test]
    fn invalid_yaml_is_an_error() {
        assert!(parse_documents("kind: [unclosed").is_err());
    }
}
