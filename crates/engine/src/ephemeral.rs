//! Ephemeral pod metadata: labels and annotations a Rollout puts on the pods of a ReplicaSet
//! only while that ReplicaSet plays a role — `canaryMetadata`/`stableMetadata`, or
//! `previewMetadata`/`activeMetadata` for blue-green. A ReplicaSet's pod template carries the
//! metadata of its role, and the `rollout.argoproj.io/ephemeral-metadata` annotation records
//! what was injected, so that a role change knows which keys to take away again.
//!
//! None of it enters the pod-template hash, which is computed from the Rollout's template; and
//! no label a selector depends on is ever injected.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::common::PodTemplateMetadata;
use sluice_api::rollout::Rollout;

use crate::labels::{EPHEMERAL_METADATA, POD_TEMPLATE_HASH};
use crate::replicaset::ReplicaSetExt;

/// Per key: set to the value, or remove (`None`).
pub type KeyChanges = BTreeMap<String, Option<String>>;

/// The ephemeral labels and annotations of one role. Empty maps mean none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMetadata {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// The part a ReplicaSet plays, which decides the ephemeral metadata of its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The ReplicaSet of an update in progress: canary, or blue-green preview.
    Update,
    /// The stable ReplicaSet, or one that was stable before: stable, or blue-green active.
    Stable,
}

impl PodMetadata {
    /// The metadata the Rollout's strategy gives pods of `role`, without the labels a selector
    /// depends on (the pod-template hash and the Rollout's selector keys): changing those would
    /// move pods out from under their ReplicaSet and Services.
    pub fn for_role(rollout: &Rollout, role: Role) -> Self {
        let Some(spec) = role_spec(rollout, role) else {
            return Self::default();
        };
        let protected = selector_keys(rollout);
        Self {
            labels: spec
                .labels
                .iter()
                .flatten()
                .filter(|(k, _)| !protected.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            annotations: spec.annotations.clone().unwrap_or_default(),
        }
    }

    /// What a ReplicaSet's annotation records as injected. A missing or unreadable record
    /// reads as nothing injected.
    pub fn recorded(rs: &ReplicaSet) -> Self {
        let Some(record) = rs.annotation(EPHEMERAL_METADATA) else {
            return Self::default();
        };
        let Ok(spec) = serde_json::from_str::<PodTemplateMetadata>(record) else {
            return Self::default();
        };
        Self {
            labels: spec.labels.unwrap_or_default(),
            annotations: spec.annotations.unwrap_or_default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }

    /// The annotation value recording this metadata, as Go's JSON encoder writes it (empty maps
    /// left out, HTML characters escaped); `None` when there is nothing to record.
    pub fn record(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let spec = PodTemplateMetadata {
            labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
            annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
        };
        serde_json::to_string(&spec)
            .ok()
            .map(|json| go_escape(&json))
    }

    /// Adds this metadata to an object's (a pod template's) labels and annotations.
    pub fn inject(&self, meta: &mut ObjectMeta) {
        if !self.labels.is_empty() {
            meta.labels
                .get_or_insert_with(Default::default)
                .extend(self.labels.clone());
        }
        if !self.annotations.is_empty() {
            meta.annotations
                .get_or_insert_with(Default::default)
                .extend(self.annotations.clone());
        }
    }

    /// Takes this metadata off an object's labels and annotations: the keys that still have
    /// this metadata's values.
    pub fn strip(&self, meta: &mut ObjectMeta) {
        if let Some(labels) = meta.labels.as_mut() {
            labels.retain(|k, v| self.labels.get(k) != Some(v));
        }
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.retain(|k, v| self.annotations.get(k) != Some(v));
        }
    }
}

/// Go's `json.Marshal` escapes these even inside strings; the record should read the same
/// whichever controller wrote it.
fn go_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for ch in json.chars() {
        match ch {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The strategy's metadata field for `role`.
fn role_spec(rollout: &Rollout, role: Role) -> Option<&PodTemplateMetadata> {
    let strategy = rollout.spec.strategy.as_ref()?;
    if let Some(canary) = &strategy.canary {
        return match role {
            Role::Update => canary.canary_metadata.as_ref(),
            Role::Stable => canary.stable_metadata.as_ref(),
        };
    }
    let bg = strategy.blue_green.as_ref()?;
    match role {
        Role::Update => bg.preview_metadata.as_ref(),
        Role::Stable => bg.active_metadata.as_ref(),
    }
}

/// Label keys that decide which pods belong where.
fn selector_keys(rollout: &Rollout) -> Vec<&str> {
    let mut keys = vec![POD_TEMPLATE_HASH];
    if let Some(selector) = &rollout.spec.selector {
        keys.extend(
            selector
                .match_labels
                .iter()
                .flatten()
                .map(|(k, _)| k.as_str()),
        );
        keys.extend(
            selector
                .match_expressions
                .iter()
                .flatten()
                .map(|e| e.key.as_str()),
        );
    }
    keys
}

/// The role of the ReplicaSet with hash `rs_hash` while the Rollout's template hashes to
/// `pod_hash`. Decided from the observed status: the current ReplicaSet is the update until
/// the status names it stable (or names no stable at all); every other one is, or was, stable.
pub fn role_of(rollout: &Rollout, rs_hash: Option<&str>, pod_hash: &str) -> Role {
    let stable = rollout.status.as_ref().and_then(|s| s.stable_rs.as_deref());
    if rs_hash == Some(pod_hash) && stable.is_some_and(|s| s != pod_hash) {
        Role::Update
    } else {
        Role::Stable
    }
}

/// Whether ephemeral metadata plays any part: set in the spec, or recorded on a ReplicaSet
/// (metadata that was removed from the spec must still be taken off).
pub fn in_use(rollout: &Rollout, replica_sets: &[ReplicaSet]) -> bool {
    let configured = [Role::Update, Role::Stable]
        .into_iter()
        .any(|role| role_spec(rollout, role).is_some());
    configured
        || replica_sets
            .iter()
            .any(|rs| rs.annotation(EPHEMERAL_METADATA).is_some())
}

/// The ReplicaSets whose recorded metadata is not what their role needs now, each with what it
/// needs. Those are the ones whose template and pods are to be changed.
pub fn out_of_date<'a>(
    rollout: &Rollout,
    replica_sets: impl IntoIterator<Item = &'a ReplicaSet>,
    pod_hash: &str,
) -> Vec<(&'a ReplicaSet, PodMetadata)> {
    replica_sets
        .into_iter()
        .filter(|rs| !rs.is_being_deleted())
        .filter_map(|rs| {
            let want = PodMetadata::for_role(rollout, role_of(rollout, rs.pod_hash(), pod_hash));
            (PodMetadata::recorded(rs) != want).then_some((rs, want))
        })
        .collect()
}

/// Edits of an object's labels and annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataChanges {
    pub labels: KeyChanges,
    pub annotations: KeyChanges,
}

impl MetadataChanges {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// The edits that make an object carrying `old` carry `new` instead: `old`'s keys that `new`
/// lacks are removed, `new`'s are set; keys already as wanted are left out.
pub fn changes(old: &PodMetadata, new: &PodMetadata, current: &ObjectMeta) -> MetadataChanges {
    MetadataChanges {
        labels: key_changes(&old.labels, &new.labels, current.labels.as_ref()),
        annotations: key_changes(
            &old.annotations,
            &new.annotations,
            current.annotations.as_ref(),
        ),
    }
}

fn key_changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
    current: Option<&BTreeMap<String, String>>,
) -> KeyChanges {
    let has = |k: &String| current.is_some_and(|c| c.contains_key(k));
    let mut out = KeyChanges::new();
    for k in old.keys().filter(|k| !new.contains_key(*k) && has(k)) {
        out.insert(k.clone(), None);
    }
    for (k, v) in new {
        if current.and_then(|c| c.get(k)) != Some(v) {
            out.insert(k.clone(), Some(v.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canary(status: serde_json::Value) -> Rollout {
        serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}},
                "strategy": {"canary": {
                    "canaryMetadata": {"labels": {"role": "canary", "app": "x",
                                                  "rollouts-pod-template-hash": "x"},
                                       "annotations": {"a": "<b>"}},
                    "stableMetadata": {"labels": {"role": "stable"}}
                }}
            },
            "status": status
        }))
        .unwrap()
    }

    fn rs(hash: &str, record: Option<&str>) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": format!("web-{hash}"),
                         "labels": {POD_TEMPLATE_HASH: hash},
                         "annotations": record.map(|r| json!({EPHEMERAL_METADATA: r}))
                             .unwrap_or(json!({}))}
        }))
        .unwrap()
    }

    #[test]
    fn selector_labels_are_never_injected_and_the_record_is_go_json() {
        let m = PodMetadata::for_role(&canary(json!({})), Role::Update);
        assert_eq!(
            m.labels,
            [("role".to_string(), "canary".to_string())].into()
        );
        assert_eq!(
            m.record().as_deref(),
            Some(r#"{"labels":{"role":"canary"},"annotations":{"a":"\u003cb\u003e"}}"#)
        );
        let back = rs("h", m.record().as_deref());
        assert_eq!(PodMetadata::recorded(&back), m);
        assert_eq!(PodMetadata::default().record(), None);
        assert_eq!(
            PodMetadata::recorded(&rs("h", Some("not json"))),
            Default::default()
        );
    }

    #[test]
    fn the_current_replica_set_is_the_update_until_it_is_stable() {
        let updating = canary(json!({"stableRS": "old"}));
        assert_eq!(role_of(&updating, Some("new"), "new"), Role::Update);
        assert_eq!(role_of(&updating, Some("old"), "new"), Role::Stable);
        let done = canary(json!({"stableRS": "new"}));
        assert_eq!(role_of(&done, Some("new"), "new"), Role::Stable);
        assert_eq!(
            role_of(&canary(json!({})), Some("new"), "new"),
            Role::Stable
        );

        let stable_record = r#"{"labels":{"role":"stable"}}"#;
        let rss = [
            rs("old", Some(stable_record)),
            rs("new", Some(stable_record)),
        ];
        let stale = out_of_date(&updating, &rss, "new");
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].0.name(), "web-new");
        assert!(out_of_date(&done, &rss, "new").is_empty());
    }

    #[test]
    fn changes_remove_the_old_role_keys_and_set_the_new_ones() {
        let old = PodMetadata {
            labels: [
                ("role".into(), "canary".into()),
                ("tier".into(), "x".into()),
            ]
            .into(),
            annotations: [("note".into(), "n".into())].into(),
        };
        let new = PodMetadata {
            labels: [("role".into(), "stable".into())].into(),
            annotations: Default::default(),
        };
        let mut pod = ObjectMeta::default();
        old.inject(&mut pod);
        pod.labels
            .get_or_insert_with(Default::default)
            .insert("app".into(), "web".into());
        let c = changes(&old, &new, &pod);
        assert_eq!(
            c.labels,
            [
                ("role".to_string(), Some("stable".to_string())),
                ("tier".to_string(), None)
            ]
            .into()
        );
        assert_eq!(c.annotations, [("note".to_string(), None)].into());
        // Already so: nothing to do; keys that are not there are not removed again.
        new.inject(&mut pod);
        old.strip(&mut pod);
        new.inject(&mut pod);
        assert!(changes(&old, &new, &pod).is_empty());
        assert_eq!(pod.labels.unwrap()["app"], "web");
    }
}
