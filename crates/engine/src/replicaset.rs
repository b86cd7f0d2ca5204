//! Building the ReplicaSet for a Rollout's current pod template, exactly as Argo names and
//! labels it, so that either controller recognises the other's ReplicaSets.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use sluice_api::rollout::Rollout;

use crate::labels::{DESIRED_REPLICAS, NOT_COPIED_TO_REPLICA_SET, POD_TEMPLATE_HASH, REVISION};

/// `<rollout>-<hash>`.
pub fn replica_set_name(rollout_name: &str, pod_hash: &str) -> String {
    format!("{rollout_name}-{pod_hash}")
}

/// Owner reference making the Rollout the controller of a child object.
pub fn controller_ref(rollout: &Rollout) -> OwnerReference {
    OwnerReference {
        api_version: sluice_api::API_VERSION.into(),
        kind: "Rollout".into(),
        name: rollout.metadata.name.clone().unwrap_or_default(),
        uid: rollout.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Rollout annotations that travel to its ReplicaSets.
pub fn copied_annotations(rollout: &Rollout) -> BTreeMap<String, String> {
    rollout
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !NOT_COPIED_TO_REPLICA_SET.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The new ReplicaSet for `pod_hash` at `revision`, starting at `replicas`.
pub fn build(rollout: &Rollout, pod_hash: &str, revision: i64, replicas: i32) -> ReplicaSet {
    let name = rollout.metadata.name.clone().unwrap_or_default();
    let mut template = rollout.spec.template.clone().unwrap_or_default();
    let template_meta = template.metadata.get_or_insert_with(Default::default);
    template_meta
        .labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.into(), pod_hash.into());
    let labels = template_meta.labels.clone();

    let mut selector: LabelSelector = rollout.spec.selector.clone().unwrap_or_default();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.into(), pod_hash.into());

    let mut annotations = copied_annotations(rollout);
    annotations.insert(REVISION.into(), revision.to_string());
    annotations.insert(
        DESIRED_REPLICAS.into(),
        rollout
            .spec
            .replicas
            .unwrap_or(sluice_api::rollout::DEFAULT_REPLICAS)
            .to_string(),
    );

    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(replica_set_name(&name, pod_hash)),
            namespace: rollout.metadata.namespace.clone(),
            labels,
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref(rollout)]),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: rollout.spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    }
}
