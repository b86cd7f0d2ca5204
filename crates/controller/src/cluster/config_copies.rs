//! The reads and writes of config rollouts (`rollouts.sluice.dev/config-rollout`, see
//! docs/config-rollouts.md): the referenced ConfigMaps' and Secrets' content hashes, the
//! Rollout's copies, a copy made, a copy's owners set. The content of a Secret is read and
//! written here only; the engine sees its hash.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use sluice_api::Rollout;
use sluice_engine::config_rollout::{
    COPY_OF, COPY_SOURCE, ConfigCopy, ConfigKind, ConfigObserved, ConfigRef, Owner, OwnerKind,
    content_hash, sources_to_read,
};

use super::WriteError;
use super::field_manager::{FIELD_MANAGER, post_params};

/// A Secret of this type is the API server's (its token is made for the account it names):
/// never copied, its references left as they are.
const SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";

/// What the engine needs to decide on `rollout`'s copies: its copies (by the label with its
/// uid) and the hash of each object its template references.
pub(super) async fn observe(
    client: &Client,
    rollout: &Rollout,
) -> Result<ConfigObserved, WriteError> {
    let ns = rollout.metadata.namespace.as_deref().unwrap_or("default");
    let uid = rollout.metadata.uid.as_deref().unwrap_or_default();
    let mut copies = BTreeMap::new();
    let by_label = ListParams::default().labels(&format!("{COPY_OF}={uid}"));
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for meta in config_maps.list_metadata(&by_label).await?.items {
        insert_copy(&mut copies, ConfigKind::ConfigMap, meta.metadata);
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    for meta in secrets.list_metadata(&by_label).await?.items {
        insert_copy(&mut copies, ConfigKind::Secret, meta.metadata);
    }
    let mut sources = BTreeMap::new();
    for source in sources_to_read(rollout, &copies) {
        let hash = read_hash(client, ns, &source).await?;
        sources.insert(source, hash);
    }
    Ok(ConfigObserved { sources, copies })
}

/// Files a copy listed by its metadata under its kind and name (public for the simulator,
/// whose API server answers the same list).
pub fn insert_copy(
    copies: &mut BTreeMap<ConfigRef, ConfigCopy>,
    kind: ConfigKind,
    meta: ObjectMeta,
) {
    let Some(name) = meta.name else { return };
    let source = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(COPY_SOURCE))
        .cloned()
        .unwrap_or_default();
    let owners = meta
        .owner_references
        .iter()
        .flatten()
        .map(|o| o.uid.clone())
        .collect();
    copies.insert(
        ConfigRef { kind, name },
        ConfigCopy {
            source,
            resource_version: meta.resource_version,
            owners,
        },
    );
}

/// The hash of the content of `source`; `None` when it is absent or not to be copied.
async fn read_hash(
    client: &Client,
    ns: &str,
    source: &ConfigRef,
) -> Result<Option<String>, WriteError> {
    Ok(match source.kind {
        ConfigKind::ConfigMap => Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt(&source.name)
            .await?
            .map(|cm| config_map_hash(&cm)),
        ConfigKind::Secret => Api::<Secret>::namespaced(client.clone(), ns)
            .get_opt(&source.name)
            .await?
            .filter(|s| s.type_.as_deref() != Some(SERVICE_ACCOUNT_TOKEN))
            .map(|s| secret_hash(&s)),
    })
}

/// The hash a ConfigMap's content is copied under (public so that the simulator's API server
/// hashes as the controller does).
pub fn config_map_hash(cm: &ConfigMap) -> String {
    let data = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_bytes(), "data"));
    let binary = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.0.as_slice(), "binaryData"));
    hash_of(data.chain(binary), None)
}

/// The hash a Secret's content (its type with its data) is copied under.
pub fn secret_hash(secret: &Secret) -> String {
    let data = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.0.as_slice(), "data"));
    hash_of(data, Some(secret.type_.as_deref().unwrap_or("Opaque")))
}

/// Each key is named with its field, so that a key moved from `data` to `binaryData` is
/// another content.
fn hash_of<'a>(
    fields: impl Iterator<Item = (&'a str, &'a [u8], &'a str)>,
    kind: Option<&'a str>,
) -> String {
    let named: Vec<(String, &[u8])> = fields
        .map(|(key, bytes, field)| (format!("{field}/{key}"), bytes))
        .chain(kind.map(|t| ("type".to_string(), t.as_bytes())))
        .collect();
    content_hash(named.iter().map(|(k, v)| (k.as_str(), *v)))
}

/// Makes `copy` of `source` for `rollout`, if the source still hashes to `hash` (otherwise it
/// changed since the decision: a conflict, observed again). A copy of that name that exists
/// already is the same content (the name is its hash), unless the hash collided, which is
/// reported rather than rolled out.
pub(super) async fn copy(
    client: &Client,
    rollout: &Rollout,
    kind: ConfigKind,
    source: &str,
    hash: &str,
    copy: &str,
) -> Result<(), WriteError> {
    let ns = rollout.metadata.namespace.as_deref().unwrap_or("default");
    let meta = copy_meta(rollout, source, copy);
    match kind {
        ConfigKind::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            let Some(original) = api.get_opt(source).await? else {
                return Err(WriteError::Conflict);
            };
            if config_map_hash(&original) != hash {
                return Err(WriteError::Conflict);
            }
            let object = ConfigMap {
                metadata: meta,
                data: original.data,
                binary_data: original.binary_data,
                immutable: Some(true),
            };
            match api.create(&post_params(), &object).await {
                Err(kube::Error::Api(status)) if status.is_already_exists() => {
                    let existing = api.get(copy).await?;
                    same(config_map_hash(&existing) == hash, copy)
                }
                other => other.map(|_| ()).map_err(WriteError::from),
            }
        }
        ConfigKind::Secret => {
            let api: Api<Secret> = Api::namespaced(client.clone(), ns);
            let Some(original) = api.get_opt(source).await? else {
                return Err(WriteError::Conflict);
            };
            if secret_hash(&original) != hash {
                return Err(WriteError::Conflict);
            }
            let object = Secret {
                metadata: meta,
                data: original.data,
                type_: original.type_,
                immutable: Some(true),
                ..Default::default()
            };
            match api.create(&post_params(), &object).await {
                Err(kube::Error::Api(status)) if status.is_already_exists() => {
                    let existing = api.get(copy).await?;
                    same(secret_hash(&existing) == hash, copy)
                }
                other => other.map(|_| ()).map_err(WriteError::from),
            }
        }
    }
}

/// The metadata of `copy` of `source` made for `rollout`: its label with the Rollout's uid,
/// its source annotation, and the Rollout as its first owner (public so that the simulator
/// makes the same object).
pub fn copy_meta(rollout: &Rollout, source: &str, copy: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(copy.to_string()),
        namespace: Some(
            rollout
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
        ),
        labels: Some(
            [(
                COPY_OF.to_string(),
                rollout.metadata.uid.clone().unwrap_or_default(),
            )]
            .into(),
        ),
        annotations: Some([(COPY_SOURCE.to_string(), source.to_string())].into()),
        owner_references: Some(vec![owner_reference(&Owner {
            kind: OwnerKind::Rollout,
            name: rollout.metadata.name.clone().unwrap_or_default(),
            uid: rollout.metadata.uid.clone().unwrap_or_default(),
        })]),
        ..Default::default()
    }
}

fn same(equal: bool, copy: &str) -> Result<(), WriteError> {
    if equal {
        Ok(())
    } else {
        Err(WriteError::Api(format!(
            "{copy} exists with other content than its name's hash says; delete it to have it made again"
        )))
    }
}

/// Sets the owners of a copy, at the resourceVersion read.
pub(super) async fn set_owners(
    client: &Client,
    ns: &str,
    kind: ConfigKind,
    name: &str,
    resource_version: Option<&str>,
    owners: &[Owner],
) -> Result<(), WriteError> {
    let patch = owners_patch(resource_version, owners);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match kind {
        ConfigKind::ConfigMap => {
            Api::<ConfigMap>::namespaced(client.clone(), ns)
                .patch(name, &params, &Patch::Merge(&patch))
                .await?;
        }
        ConfigKind::Secret => {
            Api::<Secret>::namespaced(client.clone(), ns)
                .patch(name, &params, &Patch::Merge(&patch))
                .await?;
        }
    }
    Ok(())
}

/// The merge patch that sets a copy's owners, conditional on the resourceVersion read
/// (public so that the simulator's API server is sent the same).
pub fn owners_patch(resource_version: Option<&str>, owners: &[Owner]) -> serde_json::Value {
    let references: Vec<OwnerReference> = owners.iter().map(owner_reference).collect();
    json!({"metadata": {"resourceVersion": resource_version, "ownerReferences": references}})
}

/// An owner reference that makes no owner the copy's controller: several ReplicaSets may own
/// one copy, and Kubernetes' garbage collector removes it with the last.
pub fn owner_reference(owner: &Owner) -> OwnerReference {
    let (api_version, kind) = match owner.kind {
        OwnerKind::Rollout => ("argoproj.io/v1alpha1", "Rollout"),
        OwnerKind::ReplicaSet => ("apps/v1", "ReplicaSet"),
    };
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn a_key_moved_between_data_and_binary_data_is_other_content() {
        let text = ConfigMap {
            data: Some([("k".to_string(), "v".to_string())].into()),
            ..Default::default()
        };
        let binary = ConfigMap {
            binary_data: Some([("k".to_string(), ByteString(b"v".to_vec()))].into()),
            ..Default::default()
        };
        assert_ne!(config_map_hash(&text), config_map_hash(&binary));
        assert_eq!(config_map_hash(&text), config_map_hash(&text.clone()));
    }

    #[test]
    fn a_secrets_type_is_part_of_its_content() {
        let opaque = Secret {
            data: Some([("k".to_string(), ByteString(b"v".to_vec()))].into()),
            ..Default::default()
        };
        let tls = Secret {
            type_: Some("kubernetes.io/tls".into()),
            ..opaque.clone()
        };
        assert_ne!(secret_hash(&opaque), secret_hash(&tls));
    }
}
