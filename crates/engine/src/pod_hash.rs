//! Which ReplicaSet runs a Rollout's pod template.
//!
//! A new ReplicaSet is named and labelled with the template's hash as Argo Rollouts 1.9.0 and
//! later compute it. An existing one is found, as Argo finds it, in three steps, so that a
//! change of hash never redeploys anything:
//!
//! 1. the ReplicaSet labelled with that hash;
//! 2. the one labelled with the hash of the encoders before Argo 1.9 (Argo 1.6 to 1.8 wrote
//!    `"creationTimestamp":null` into the hashed bytes, and so did Sluice's own earlier
//!    releases);
//! 3. the oldest one whose template equals the Rollout's, compared as Argo compares them
//!    ([`runs_template`]): whatever hash its name carries, from whichever controller or
//!    release, and also the ReplicaSet a rollback copied its template from.
//!
//! Both the reconcile and the observe step (deciding whether pods must be read) ask this, so
//! it lives apart from either.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Affinity, PodTemplateSpec};
use serde_json::Value;
use sluice_api::pod_template_hash::{self as hash, HashVersion};
use sluice_api::rollout::Rollout;

use crate::ephemeral::PodMetadata;
use crate::labels::POD_TEMPLATE_HASH;
use crate::replicaset::ReplicaSetExt;

/// The hash of the Rollout's own pod template, as Argo computes it.
pub fn template_hash(rollout: &Rollout) -> Result<String, String> {
    let template = rollout
        .spec
        .template
        .as_ref()
        .ok_or("spec.template is required")?;
    let collision = rollout.status.as_ref().and_then(|s| s.collision_count);
    hash::compute_pod_template_hash(template, collision)
        .map_err(|e| format!("cannot hash the pod template: {e}"))
}

/// The hash of the ReplicaSet the Rollout's current template belongs to, as a reconcile finds
/// it (see the module). `None` when the template cannot be hashed.
pub fn current_pod_hash(rollout: &Rollout, replica_sets: &[ReplicaSet]) -> Option<String> {
    let pod_hash = template_hash(rollout).ok()?;
    Some(adopted_hash(rollout, replica_sets, pod_hash))
}

/// `pod_hash` (the template's own hash) when a live ReplicaSet carries it, else the hash of
/// the live ReplicaSet found by the earlier hash or by an equal template, else `pod_hash`.
pub fn adopted_hash(rollout: &Rollout, replica_sets: &[ReplicaSet], pod_hash: String) -> String {
    let mut live: Vec<&ReplicaSet> = replica_sets
        .iter()
        .filter(|rs| !rs.is_being_deleted() && rs.pod_hash().is_some())
        .collect();
    if live
        .iter()
        .any(|rs| rs.pod_hash() == Some(pod_hash.as_str()))
    {
        return pod_hash;
    }
    let Some(template) = rollout.spec.template.as_ref() else {
        return pod_hash;
    };
    let Ok(template_json) = serde_json::to_value(template) else {
        return pod_hash;
    };
    let collision = rollout.status.as_ref().and_then(|s| s.collision_count);
    if let Ok(earlier) =
        hash::pod_template_hash_as(&template_json, collision, HashVersion::BeforeArgo19)
        && live
            .iter()
            .any(|rs| rs.pod_hash() == Some(earlier.as_str()))
    {
        return earlier;
    }
    // Oldest first, as Argo looks: with several equal templates the first one made wins.
    live.sort_by(|a, b| {
        let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.clone().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| a.name().cmp(b.name()))
    });
    let plain = comparable(template_json);
    live.into_iter()
        .find(|rs| equal_templates(rollout, template, plain.as_deref(), rs))
        .and_then(|rs| rs.pod_hash())
        .map_or(pod_hash, str::to_owned)
}

/// Whether `rs` runs the Rollout's pod template, compared as Argo compares them: the live
/// template without the hash label, the ephemeral metadata recorded as injected and the
/// injected anti-affinity; the Rollout's template after the API server's pod-template
/// defaults; `serviceAccount` (deprecated, filled in by the API server) ignored on both; and
/// the rest by Kubernetes' semantic equality (empty lists as absent ones, quantities by
/// value).
pub fn runs_template(rollout: &Rollout, rs: &ReplicaSet) -> bool {
    let Some(template) = rollout.spec.template.as_ref() else {
        return false;
    };
    let plain = serde_json::to_value(template).ok().and_then(comparable);
    equal_templates(rollout, template, plain.as_deref(), rs)
}

/// [`runs_template`] with the Rollout's comparable bytes computed once (`plain`).
fn equal_templates(
    rollout: &Rollout,
    template: &PodTemplateSpec,
    plain: Option<&[u8]>,
    rs: &ReplicaSet,
) -> bool {
    let Some(live) = comparable_live(rollout, rs) else {
        return false;
    };
    let injected = PodMetadata::recorded(rs);
    if injected.is_empty() {
        return plain == Some(live.as_slice());
    }
    // A template copied back from this ReplicaSet (a rollback) carries the metadata its
    // role added: that is not part of the comparison either.
    let mut wanted = template.clone();
    if let Some(meta) = wanted.metadata.as_mut() {
        injected.strip(meta);
    }
    serde_json::to_value(wanted).ok().and_then(comparable) == Some(live)
}

/// What [`runs_template`] compares of a ReplicaSet: equal for two ReplicaSets exactly when
/// they run the same template (whatever their hashes). `None` without a template.
pub fn template_key(rollout: &Rollout, rs: &ReplicaSet) -> Option<Vec<u8>> {
    comparable_live(rollout, rs)
}

fn comparable_live(rollout: &Rollout, rs: &ReplicaSet) -> Option<Vec<u8>> {
    let mut template: PodTemplateSpec = rs.spec.as_ref()?.template.clone()?;
    let injected = PodMetadata::recorded(rs);
    if let Some(meta) = template.metadata.as_mut() {
        injected.strip(meta);
    }
    if let Some(spec) = template.spec.as_mut()
        && has_anti_affinity(rollout)
    {
        spec.affinity = spec.affinity.take().and_then(remove_injected_anti_affinity);
    }
    comparable(serde_json::to_value(template).ok()?)
}

/// Defaults, the deprecated `serviceAccount` blanked, then the semantic bytes. Defaults on
/// the live side too: a no-op on what the API server stored, and it keeps the comparison
/// true where a ReplicaSet was written without them.
fn comparable(mut template: Value) -> Option<Vec<u8>> {
    remove_hash_label(&mut template);
    sluice_api::pod_defaults::apply(&mut template);
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("serviceAccount");
    }
    hash::semantic_bytes(&template).ok()
}

fn remove_hash_label(template: &mut Value) {
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
    }
}

fn has_anti_affinity(rollout: &Rollout) -> bool {
    rollout.canary().is_some_and(|c| c.anti_affinity.is_some())
        || rollout
            .blue_green()
            .is_some_and(|b| b.anti_affinity.is_some())
}

/// Takes off the pod anti-affinity terms keyed on the pod-template hash label (the ones
/// `antiAffinity` injects to keep new pods off the stable pods' nodes), dropping what they
/// leave empty.
fn remove_injected_anti_affinity(mut affinity: Affinity) -> Option<Affinity> {
    let on_hash = |term: &k8s_openapi::api::core::v1::PodAffinityTerm| {
        term.label_selector
            .as_ref()
            .and_then(|s| s.match_expressions.as_ref())
            .is_some_and(|e| e.iter().any(|r| r.key == POD_TEMPLATE_HASH))
    };
    if let Some(anti) = affinity.pod_anti_affinity.as_mut() {
        if let Some(preferred) = anti
            .preferred_during_scheduling_ignored_during_execution
            .as_mut()
        {
            preferred.retain(|w| !on_hash(&w.pod_affinity_term));
        }
        if let Some(required) = anti
            .required_during_scheduling_ignored_during_execution
            .as_mut()
        {
            required.retain(|t| !on_hash(t));
        }
        if anti
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .is_some_and(Vec::is_empty)
        {
            anti.required_during_scheduling_ignored_during_execution = None;
        }
        if anti
            .preferred_during_scheduling_ignored_during_execution
            .as_ref()
            .is_some_and(Vec::is_empty)
        {
            anti.preferred_during_scheduling_ignored_during_execution = None;
        }
        if anti
            .required_during_scheduling_ignored_during_execution
            .is_none()
            && anti
                .preferred_during_scheduling_ignored_during_execution
                .is_none()
        {
            affinity.pod_anti_affinity = None;
        }
    }
    let nothing_left = affinity.pod_anti_affinity.is_none()
        && affinity.pod_affinity.is_none()
        && affinity.node_affinity.is_none();
    (!nothing_left).then_some(affinity)
}

#[cfg(test)]
mod tests;
