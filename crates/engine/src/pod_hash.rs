//! The current pod-template hash: which ReplicaSet a Rollout's template belongs to. Normally
//! the template's own hash; but a ReplicaSet whose pod template equals the Rollout's (ignoring
//! the hash label and ephemeral metadata) is the current one even when its name carries
//! another hash. That is how a rollback to a template copied from a ReplicaSet (with the API
//! server's defaults filled in) re-uses that ReplicaSet instead of starting a new one.
//!
//! Both the reconcile and the observe step (deciding whether pods must be read) ask this, so
//! it lives apart from either.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use sluice_api::rollout::Rollout;

use crate::ephemeral::PodMetadata;
use crate::observed::ReplicaSetExt;

/// The hash of the Rollout's own pod template, as Argo computes it.
pub fn template_hash(rollout: &Rollout) -> Result<String, String> {
    let template = rollout
        .spec
        .template
        .as_ref()
        .ok_or("spec.template is required")?;
    let collision = rollout.status.as_ref().and_then(|s| s.collision_count);
    sluice_api::pod_template_hash::compute_pod_template_hash(template, collision)
        .map_err(|e| format!("cannot hash the pod template: {e}"))
}

/// The hash of the ReplicaSet the Rollout's current template belongs to, as a reconcile finds
/// it: the template's own hash, or that of a ReplicaSet with an equal template. `None` when the
/// template cannot be hashed.
pub fn current_pod_hash(rollout: &Rollout, replica_sets: &[ReplicaSet]) -> Option<String> {
    let pod_hash = template_hash(rollout).ok()?;
    Some(adopted_hash(rollout, replica_sets, pod_hash))
}

/// `pod_hash` (the template's own hash), or the hash of a live ReplicaSet with an equal
/// template when none carries `pod_hash`.
pub fn adopted_hash(rollout: &Rollout, replica_sets: &[ReplicaSet], pod_hash: String) -> String {
    let by_name = replica_sets
        .iter()
        .any(|rs| rs.pod_hash() == Some(pod_hash.as_str()) && !rs.is_being_deleted());
    if by_name {
        return pod_hash;
    }
    let Some(template) = rollout.spec.template.as_ref() else {
        return pod_hash;
    };
    let equal = replica_sets.iter().find(|rs| {
        if rs.is_being_deleted() {
            return false;
        }
        let Some(mut rs_template) = rs.spec.as_ref().and_then(|s| s.template.clone()) else {
            return false;
        };
        // What the ReplicaSet adds to the Rollout's template: its hash and ephemeral metadata.
        // A template copied back from the ReplicaSet (a rollback) carries that metadata too.
        let injected = PodMetadata::recorded(rs);
        let mut wanted = template.clone();
        if let Some(meta) = wanted.metadata.as_mut() {
            injected.strip(meta);
        }
        if let Some(meta) = rs_template.metadata.as_mut() {
            injected.strip(meta);
            if let Some(labels) = meta.labels.as_mut() {
                labels.remove(crate::labels::POD_TEMPLATE_HASH);
            }
        }
        comparable(rs_template) == comparable(wanted)
    });
    match equal.and_then(|rs| rs.pod_hash()) {
        Some(hash) => hash.to_string(),
        None => pod_hash,
    }
}

/// A template with empty label and annotation maps read as absent ones.
fn comparable(mut template: PodTemplateSpec) -> PodTemplateSpec {
    if let Some(meta) = template.metadata.as_mut() {
        if meta.labels.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.labels = None;
        }
        if meta.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.annotations = None;
        }
    }
    template
}
