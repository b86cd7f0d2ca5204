//! ConfigMap and Secret changes as rollouts (`rollouts.sluice.dev/config-rollout: "true"`,
//! see docs/config-rollouts.md). The pod template of such a Rollout is decided on with each
//! ConfigMap and Secret it references replaced by an immutable copy of that object's content,
//! named by a hash of it (`<name>-<hash>`). A changed ConfigMap is then a changed template: a
//! new revision that walks the steps and analyses, whose pods read the new copy while the
//! stable pods keep reading the old one, so an abort or an undo goes back to the old content.
//!
//! The engine never sees the content (a Secret's data stays in the controller): the controller
//! reads each referenced object and hands over the hash of its content
//! ([`ConfigObserved::sources`]); a copy to make is an [`Action::CopyConfig`] naming the
//! source and the hash it was decided on, which the controller checks again when it copies.
//! Copies are owned by the Rollout until a ReplicaSet uses them, then by the ReplicaSets that
//! use them ([`Action::OwnConfigCopy`]): Kubernetes' garbage collector removes a copy with the
//! last revision that used it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sluice_api::Rollout;

pub use crate::config_copies::{
    ConfigCopy, ConfigKind, ConfigObserved, ConfigRef, Owner, OwnerKind,
};
use crate::observed::Observed;
use crate::plan::Action;
use crate::replicaset::ReplicaSetExt as _;

#[cfg(test)]
mod tests;

pub use sluice_api::rollout::CONFIG_ROLLOUT_ANNOTATION as CONFIG_ROLLOUT;

/// The label each copy carries: the uid of the Rollout it was made for (a name may be longer
/// than a label value may be).
pub const COPY_OF: &str = "rollouts.sluice.dev/config-copy-of";
/// The annotation each copy carries: the name of the object it copies.
pub const COPY_SOURCE: &str = "rollouts.sluice.dev/config-source";
/// How long the hash in a copy's name is.
pub const HASH_LEN: usize = 10;
/// A Kubernetes object name's longest (a DNS subdomain).
const NAME_MAX: usize = 253;

/// Whether the Rollout asks for config rollouts: `"true"`, and a pod template of its own
/// (not a StatefulSet's or DaemonSet's). Any other value is off; validation warns of it.
pub fn enabled(rollout: &Rollout) -> bool {
    sluice_api::rollout::config_rollout(rollout) == Some("true")
        && sluice_api::rollout::stateful_set_name(rollout).is_none()
        && sluice_api::rollout::daemon_set_name(rollout).is_none()
}

/// The name of the copy of `source` whose content hashes to `hash`. A source name too long
/// to take the suffix is cut short (the hash still tells the copies apart).
pub fn copy_name(source: &str, hash: &str) -> String {
    let keep = NAME_MAX.saturating_sub(hash.len() + 1);
    let mut cut = source.len().min(keep);
    while !source.is_char_boundary(cut) {
        cut -= 1;
    }
    let stem = source[..cut].trim_end_matches(['-', '.']);
    format!("{stem}-{hash}")
}

/// The hash a copy is named by: FNV-1a (64 bits) over the content in a fixed order, the first
/// [`HASH_LEN`] hex digits. `fields` are the content's parts (a Secret's type, each key and
/// value of data and binaryData), each as a name and bytes.
pub fn content_hash<'a>(fields: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> String {
    let mut sorted: Vec<(&str, &[u8])> = fields.into_iter().collect();
    sorted.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, bytes) in sorted {
        // Lengths first, so that no two different contents read as the same byte stream.
        eat(&(name.len() as u64).to_le_bytes());
        eat(name.as_bytes());
        eat(&(bytes.len() as u64).to_le_bytes());
        eat(bytes);
    }
    format!("{hash:016x}")[..HASH_LEN].to_string()
}

/// Every ConfigMap and Secret name a pod template (as JSON) references, with a way to change
/// it: volumes (and projected volumes), `envFrom` and `env[].valueFrom` of every container.
/// Image pull secrets are not configuration the pods read, and are left alone.
fn visit(template: &mut Value, f: &mut impl FnMut(ConfigKind, &mut Value)) {
    let Some(spec) = template.get_mut("spec") else {
        return;
    };
    for volume in array(spec, "volumes") {
        if let Some(name) = volume.pointer_mut("/configMap/name") {
            f(ConfigKind::ConfigMap, name);
        }
        if let Some(name) = volume.pointer_mut("/secret/secretName") {
            f(ConfigKind::Secret, name);
        }
        for source in volume
            .pointer_mut("/projected/sources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(name) = source.pointer_mut("/configMap/name") {
                f(ConfigKind::ConfigMap, name);
            }
            if let Some(name) = source.pointer_mut("/secret/name") {
                f(ConfigKind::Secret, name);
            }
        }
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in array(spec, list) {
            for from in array(container, "envFrom") {
                if let Some(name) = from.pointer_mut("/configMapRef/name") {
                    f(ConfigKind::ConfigMap, name);
                }
                if let Some(name) = from.pointer_mut("/secretRef/name") {
                    f(ConfigKind::Secret, name);
                }
            }
            for env in array(container, "env") {
                if let Some(name) = env.pointer_mut("/valueFrom/configMapKeyRef/name") {
                    f(ConfigKind::ConfigMap, name);
                }
                if let Some(name) = env.pointer_mut("/valueFrom/secretKeyRef/name") {
                    f(ConfigKind::Secret, name);
                }
            }
        }
    }
}

fn array<'v>(value: &'v mut Value, key: &str) -> impl Iterator<Item = &'v mut Value> {
    value
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// The ConfigMaps and Secrets a pod template (as JSON) references.
pub fn references(template: &Value) -> BTreeSet<ConfigRef> {
    let mut found = BTreeSet::new();
    let mut template = template.clone();
    visit(&mut template, &mut |kind, name| {
        if let Some(name) = name.as_str().filter(|n| !n.is_empty()) {
            found.insert(ConfigRef {
                kind,
                name: name.to_string(),
            });
        }
    });
    found
}

/// The objects the controller is to read for `rollout`: what its template references, less
/// the copies it already names (a template an undo brought back names its revision's copies).
pub fn sources_to_read(
    rollout: &Rollout,
    copies: &BTreeMap<ConfigRef, ConfigCopy>,
) -> Vec<ConfigRef> {
    let Some(template) = template_json(rollout) else {
        return Vec::new();
    };
    references(&template)
        .into_iter()
        .filter(|r| !copies.contains_key(r))
        .collect()
}

fn template_json(rollout: &Rollout) -> Option<Value> {
    rollout
        .spec
        .template
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
}

/// The Rollout as it is decided on: its template's references to copied objects replaced by
/// the copies' names, and the copies still to make. A source that is absent now keeps the
/// copy the current revision reads, so that deleting a ConfigMap does not start an update
/// to pods that cannot start; one never copied is left as it is.
pub fn resolve(
    observed: &Observed,
    config: &ConfigObserved,
) -> Result<(Rollout, Vec<Action>), String> {
    let rollout = &observed.rollout;
    let Some(mut template) = template_json(rollout) else {
        return Ok((rollout.clone(), Vec::new()));
    };
    let current = current_copies(observed, config);
    let mut copies = Vec::new();
    let mut made: BTreeSet<ConfigRef> = BTreeSet::new();
    visit(&mut template, &mut |kind, name| {
        let Some(source) = name.as_str().map(str::to_string) else {
            return;
        };
        let key = ConfigRef {
            kind,
            name: source.clone(),
        };
        if config.copies.contains_key(&key) {
            return;
        }
        let copy = match config.sources.get(&key) {
            Some(Some(hash)) => {
                let copy = copy_name(&source, hash);
                let copy_key = ConfigRef {
                    kind,
                    name: copy.clone(),
                };
                if !config.copies.contains_key(&copy_key) && made.insert(copy_key) {
                    copies.push(Action::CopyConfig {
                        kind,
                        source: source.clone(),
                        hash: hash.clone(),
                        copy: copy.clone(),
                    });
                }
                copy
            }
            _ => match current.get(&key) {
                Some(copy) => copy.clone(),
                None => return,
            },
        };
        *name = Value::String(copy);
    });
    let mut resolved = rollout.clone();
    resolved.spec.template = Some(serde_json::from_value(template).map_err(|e| {
        format!("spec.template: cannot be read back after its copies were named: {e}")
    })?);
    Ok((resolved, copies))
}

/// For each source, the copy the current revision's ReplicaSet reads (by the copies'
/// [`COPY_SOURCE`]).
fn current_copies(observed: &Observed, config: &ConfigObserved) -> BTreeMap<ConfigRef, String> {
    let current = observed
        .rollout
        .status
        .as_ref()
        .and_then(|s| s.current_pod_hash.as_deref());
    let Some(rs) = observed
        .replica_sets
        .iter()
        .find(|rs| current.is_some() && rs.pod_hash() == current)
    else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for used in replica_set_references(rs) {
        if let Some(copy) = config.copies.get(&used) {
            out.insert(
                ConfigRef {
                    kind: used.kind,
                    name: copy.source.clone(),
                },
                used.name,
            );
        }
    }
    out
}

fn replica_set_references(rs: &k8s_openapi::api::apps::v1::ReplicaSet) -> BTreeSet<ConfigRef> {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .map(|t| references(&t))
        .unwrap_or_default()
}

/// The owner changes the copies need: each copy a ReplicaSet of the Rollout reads is owned by
/// exactly the ReplicaSets that read it (so that it goes with the last of them); one no
/// ReplicaSet reads stays the Rollout's.
pub fn owners(observed: &Observed, config: &ConfigObserved) -> Vec<Action> {
    let rollout_uid = observed.rollout.metadata.uid.clone().unwrap_or_default();
    let mut readers: BTreeMap<&ConfigRef, Vec<Owner>> = BTreeMap::new();
    for rs in observed
        .replica_sets
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
    {
        let (Some(name), Some(uid)) = (rs.metadata.name.clone(), rs.metadata.uid.clone()) else {
            continue;
        };
        for used in replica_set_references(rs) {
            if let Some((key, _)) = config.copies.get_key_value(&used) {
                readers.entry(key).or_default().push(Owner {
                    kind: OwnerKind::ReplicaSet,
                    name: name.clone(),
                    uid: uid.clone(),
                });
            }
        }
    }
    let mut actions = Vec::new();
    for (key, copy) in &config.copies {
        let owners = readers.remove(key).unwrap_or_else(|| {
            vec![Owner {
                kind: OwnerKind::Rollout,
                name: observed.rollout.metadata.name.clone().unwrap_or_default(),
                uid: rollout_uid.clone(),
            }]
        });
        let uids: BTreeSet<String> = owners.iter().map(|o| o.uid.clone()).collect();
        if uids != copy.owners {
            actions.push(Action::OwnConfigCopy {
                kind: key.kind,
                name: key.name.clone(),
                resource_version: copy.resource_version.clone(),
                owners,
            });
        }
    }
    actions
}

/// The owner writes a plan makes of the copies, in two parts: the claims that go before its
/// other writes, and the owner changes that go after them ([`owners`] less what is claimed:
/// one copy is written once a plan, as a second write at the resourceVersion read would
/// conflict).
///
/// A claim: before a plan creates a ReplicaSet whose pods read a copy that exists already and
/// that the Rollout does not own, the Rollout becomes an owner of the copy too, ahead of the
/// ReplicaSet. The owners the copy has may be going: a revision deleted beyond the history
/// limit, whose copy the garbage collector is about to take when the ConfigMap is set back to
/// that revision's content. A ReplicaSet created just before the copy is taken would read a
/// copy that is gone, its pods unable to start. The claim carries the resourceVersion read: if
/// the collector was first it finds no copy and the plan stops before the ReplicaSet (the next
/// reconcile copies again); if the claim is first, the copy has a live owner (Kubernetes'
/// collector deletes at the resourceVersion it judged, so it leaves it).
pub fn owner_writes(
    observed: &Observed,
    config: &ConfigObserved,
    actions: &[Action],
) -> (Vec<Action>, Vec<Action>) {
    let rollout = Owner {
        kind: OwnerKind::Rollout,
        name: observed.rollout.metadata.name.clone().unwrap_or_default(),
        uid: observed.rollout.metadata.uid.clone().unwrap_or_default(),
    };
    let mut claims = Vec::new();
    let mut claimed: BTreeSet<ConfigRef> = BTreeSet::new();
    let created = actions.iter().filter_map(|a| match a {
        Action::CreateReplicaSet { replica_set } => Some(replica_set),
        _ => None,
    });
    for rs in created {
        for used in replica_set_references(rs) {
            let Some(copy) = config.copies.get(&used) else {
                continue;
            };
            if copy.owners.contains(&rollout.uid) || !claimed.insert(used.clone()) {
                continue;
            }
            // The owners it has that are ReplicaSets known here stay; one not known (gone, or
            // too new for the cache) is left to the owner change once it is seen.
            let mut owners: Vec<Owner> = observed
                .replica_sets
                .iter()
                .filter_map(|rs| {
                    let uid = rs.metadata.uid.clone()?;
                    copy.owners.contains(&uid).then(|| Owner {
                        kind: OwnerKind::ReplicaSet,
                        name: rs.metadata.name.clone().unwrap_or_default(),
                        uid,
                    })
                })
                .collect();
            owners.push(rollout.clone());
            claims.push(Action::OwnConfigCopy {
                kind: used.kind,
                name: used.name.clone(),
                resource_version: copy.resource_version.clone(),
                owners,
            });
        }
    }
    let changes = owners(observed, config)
        .into_iter()
        .filter(|a| match a {
            Action::OwnConfigCopy { kind, name, .. } => !claimed.contains(&ConfigRef {
                kind: *kind,
                name: name.clone(),
            }),
            _ => true,
        })
        .collect();
    (claims, changes)
}
