//! The checks of Rollouts with config rollouts on (`rollouts.sluice.dev/config-rollout`):
//! every ConfigMap and Secret a live ReplicaSet's template reads exists, after every change (a
//! pod of any revision, the stable one's above all, must find its content whenever it
//! starts); and at quiescence the stable ReplicaSet reads the copy of the content the verdict
//! chose: the ConfigMap's last content after a completed update, the stable revision's old
//! content after an abort, never the aborted content.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_api::Rollout;
use sluice_engine::config_rollout::{self, COPY_SOURCE, ConfigKind, ConfigRef};
use sluice_engine::labels::POD_TEMPLATE_HASH;

use super::analysis::Found;
use crate::api_model::{ApiServer, Kind, name_of};
use crate::net::{content_hash, kind_of};

/// No ReplicaSet of a Rollout with config rollouts on names a ConfigMap or Secret that does
/// not exist: a copy goes only with the last ReplicaSet that reads it.
pub const COPIES_EXIST_WHILE_READ: &str = "config-copies-exist-while-read";
/// At quiescence the stable ReplicaSet reads, for each ConfigMap, the copy whose content is
/// the one the inputs dictate, and that copy holds the content its name's hash says.
pub const SETTLED: &str = "config-settled-on-the-verdict";

/// What the scenario told the checks each source's content must be at the end.
#[derive(Debug, Default)]
pub struct ConfigChecks {
    expected: BTreeMap<String, Value>,
}

impl ConfigChecks {
    /// The stable revision must read `data` of ConfigMap `source` at quiescence.
    pub fn expect(&mut self, source: &str, data: Value) {
        self.expected.insert(source.to_string(), data);
    }
}

/// The Rollouts with config rollouts on (only those with the annotation are decoded: this runs
/// after every change of every scenario).
fn opted_in(api: &ApiServer) -> Vec<Rollout> {
    api.list(Kind::Rollout)
        .into_iter()
        .filter(|ro| {
            ro.pointer("/metadata/annotations")
                .and_then(|a| a.get(config_rollout::CONFIG_ROLLOUT))
                .is_some()
        })
        .filter_map(|ro| serde_json::from_value::<Rollout>(ro).ok())
        .filter(config_rollout::enabled)
        .collect()
}

/// The ReplicaSets whose controller is the Rollout `name`.
fn replica_sets_of(api: &ApiServer, name: &str) -> Vec<Value> {
    api.list(Kind::ReplicaSet)
        .into_iter()
        .filter(|rs| {
            rs.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|o| o["kind"] == "Rollout" && o["name"] == name && o["controller"] == true)
        })
        .collect()
}

/// What a ReplicaSet's pod template reads.
fn reads(rs: &Value) -> Vec<ConfigRef> {
    rs.pointer("/spec/template")
        .map(|t| config_rollout::references(t).into_iter().collect())
        .unwrap_or_default()
}

pub fn after_change(api: &ApiServer) -> Found {
    let mut found = Found::new();
    for ro in opted_in(api) {
        let name = ro.metadata.name.clone().unwrap_or_default();
        for rs in replica_sets_of(api, &name) {
            for missing in reads(&rs)
                .into_iter()
                .filter(|r| api.get(kind_of(r.kind), &r.name).is_none())
            {
                found.push((
                    COPIES_EXIST_WHILE_READ,
                    format!(
                        "rs/{} of rollout/{name} reads {}/{}, which does not exist",
                        name_of(&rs),
                        missing.kind.name(),
                        missing.name
                    ),
                ));
            }
        }
    }
    found
}

/// The content (`data`) of each copy of ConfigMap `source` the stable ReplicaSet of `rollout`
/// reads (through its volumes and its environment alike), by the copy's name. Empty when there
/// is no such ReplicaSet; a copy that is gone reads as `null`.
pub fn stable_contents(api: &ApiServer, rollout: &str, source: &str) -> BTreeMap<String, Value> {
    let Some(stable) = api
        .get(Kind::Rollout, rollout)
        .and_then(|ro| ro.pointer("/status/stableRS"))
        .and_then(Value::as_str)
    else {
        return BTreeMap::new();
    };
    let Some(rs) = replica_sets_of(api, rollout).into_iter().find(|rs| {
        rs.pointer(&format!("/metadata/labels/{POD_TEMPLATE_HASH}"))
            .and_then(Value::as_str)
            == Some(stable)
    }) else {
        return BTreeMap::new();
    };
    reads(&rs)
        .into_iter()
        .filter(|r| r.kind == ConfigKind::ConfigMap)
        .filter_map(|r| {
            let copy = api.get(Kind::ConfigMap, &r.name);
            // A reference to a copy of `source`: the copy says so, or (when gone) its name.
            let of_source = match copy {
                Some(copy) => copy_source(copy) == Some(source),
                None => r.name.starts_with(&format!("{source}-")),
            };
            of_source.then(|| {
                let data = copy.and_then(|c| c.get("data")).cloned();
                (r.name, data.unwrap_or(Value::Null))
            })
        })
        .collect()
}

/// Whether the stable ReplicaSet of `rollout` reads `data` and only that of `source`.
pub fn stable_reads(api: &ApiServer, rollout: &str, source: &str, data: &Value) -> bool {
    let read = stable_contents(api, rollout, source);
    !read.is_empty() && read.values().all(|d| d == data)
}

fn copy_source(copy: &Value) -> Option<&str> {
    copy.pointer("/metadata/annotations")
        .and_then(|a| a.get(COPY_SOURCE))
        .and_then(Value::as_str)
}

pub fn at_quiescence(api: &ApiServer, checks: &ConfigChecks) -> Found {
    let mut found = Found::new();
    for ro in opted_in(api) {
        let name = ro.metadata.name.clone().unwrap_or_default();
        for (source, want) in &checks.expected {
            if !stable_reads(api, &name, source, want) {
                let read = stable_contents(api, &name, source);
                found.push((
                    SETTLED,
                    format!(
                        "rollout/{name}: the stable revision reads {read:?} of configmap/{source}, \
                         the inputs dictate {want}"
                    ),
                ));
            }
        }
        // Each copy a ReplicaSet reads holds what its name says: `<source>-<hash of content>`.
        for rs in replica_sets_of(api, &name) {
            for r in reads(&rs) {
                let Some(copy) = api.get(kind_of(r.kind), &r.name) else {
                    continue;
                };
                let Some(source) = copy_source(copy) else {
                    continue;
                };
                let named = content_hash(r.kind, copy)
                    .map(|hash| config_rollout::copy_name(source, &hash))
                    .unwrap_or_default();
                if named != r.name {
                    found.push((
                        SETTLED,
                        format!(
                            "{}/{} (a copy of {source}) holds the content of {named}",
                            r.kind.name(),
                            r.name
                        ),
                    ));
                }
            }
        }
    }
    found
}
