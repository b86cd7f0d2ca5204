//! The API server's side of config rollouts: the copies labelled with a Rollout's uid, the
//! hash of a referenced ConfigMap's or Secret's content, a copy made only while its source
//! still hashes as decided, and a copy's owners set. Content is hashed by the controller's own
//! functions, so that the simulation and a real cluster name the same content alike.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use sluice_controller::cluster::WriteError;
use sluice_controller::cluster::config_copies::{config_map_hash, insert_copy, secret_hash};
use sluice_engine::config_rollout::{COPY_OF, ConfigCopy, ConfigKind, ConfigRef};

use super::{Reply, Response, to_write_error};
use crate::api_model::{ApiError, ApiServer, Endpoint, Kind, name_of};

/// The simulated kind of a ConfigMap or Secret.
pub fn kind_of(kind: ConfigKind) -> Kind {
    match kind {
        ConfigKind::ConfigMap => Kind::ConfigMap,
        ConfigKind::Secret => Kind::Secret,
    }
}

/// The hash of a stored ConfigMap's or Secret's content, as the controller computes it; an
/// object that does not read as its kind is refused as the API server would never hand it out.
pub fn content_hash(kind: ConfigKind, object: &Value) -> Result<String, WriteError> {
    let bad = |e: serde_json::Error| WriteError::Api(format!("{}: {e}", name_of(object)));
    Ok(match kind {
        ConfigKind::ConfigMap => {
            config_map_hash(&serde_json::from_value::<ConfigMap>(object.clone()).map_err(bad)?)
        }
        ConfigKind::Secret => {
            secret_hash(&serde_json::from_value::<Secret>(object.clone()).map_err(bad)?)
        }
    })
}

/// The copies labelled [`COPY_OF`] `uid`, by their metadata (both kinds in one answer).
pub fn list_copies(api: &ApiServer, uid: &str) -> Response {
    let mut copies: BTreeMap<ConfigRef, ConfigCopy> = BTreeMap::new();
    for kind in [ConfigKind::ConfigMap, ConfigKind::Secret] {
        for object in api.list(kind_of(kind)) {
            let labelled = object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(COPY_OF))
                .and_then(Value::as_str)
                == Some(uid);
            let meta = object
                .get("metadata")
                .and_then(|m| serde_json::from_value::<ObjectMeta>(m.clone()).ok());
            if let (true, Some(meta)) = (labelled, meta) {
                insert_copy(&mut copies, kind, meta);
            }
        }
    }
    Ok(Reply::ConfigCopies(copies))
}

/// The hash of `source`'s content; `None` when it is absent.
pub fn hash_of(api: &ApiServer, source: &ConfigRef) -> Response {
    let hash = match api.get(kind_of(source.kind), &source.name) {
        Some(object) => Some(content_hash(source.kind, object)?),
        None => None,
    };
    Ok(Reply::ConfigHash(hash))
}

/// Creates `copy` (its metadata; the content is the source's) if `source` still hashes to
/// `hash`, otherwise a conflict. A copy of that name already there is fine when its content
/// hashes the same.
pub fn copy(
    api: &mut ApiServer,
    kind: ConfigKind,
    source: &str,
    hash: &str,
    mut copy: Value,
    now: Timestamp,
) -> Response {
    let Some(original) = api.get(kind_of(kind), source) else {
        return Err(WriteError::Conflict);
    };
    if content_hash(kind, original)? != hash {
        return Err(WriteError::Conflict);
    }
    if let Some(object) = copy.as_object_mut() {
        for field in ["data", "binaryData", "type"] {
            if let Some(value) = original.get(field) {
                object.insert(field.into(), value.clone());
            }
        }
        object.insert("immutable".into(), Value::Bool(true));
    }
    let name = name_of(&copy).to_string();
    match api.create(kind_of(kind), copy, now) {
        Ok(_) => Ok(Reply::Done),
        Err(ApiError::AlreadyExists) => {
            let same = api
                .get(kind_of(kind), &name)
                .map(|existing| content_hash(kind, existing))
                .transpose()?
                .is_some_and(|h| h == hash);
            if same {
                Ok(Reply::Done)
            } else {
                Err(WriteError::Api(format!(
                    "{name} exists with other content than its name's hash says"
                )))
            }
        }
        Err(e) => Err(to_write_error(e)),
    }
}

/// A copy's owners set by the controller's merge patch (with its resourceVersion
/// precondition).
pub fn set_owners(api: &mut ApiServer, kind: ConfigKind, name: &str, patch: &Value) -> Response {
    api.patch(kind_of(kind), name, patch, Endpoint::Main)
        .map(|_| Reply::Done)
        .map_err(to_write_error)
}
