//! Building the ReplicaSet for a Rollout's current pod template, exactly as Argo names and
//! labels it, so that either controller recognises the other's ReplicaSets; and reading one
//! ([`ReplicaSetExt`]), which every part of the engine does.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{PodAffinityTerm, PodSpec, WeightedPodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
};
use sluice_api::rollout::{AntiAffinity, Rollout};

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

/// Adds the strategy's `antiAffinity` to a pod spec: keep the new pods off the nodes that run
/// the stable pods (`stable_hash`), softly (preferred, with its weight) or strictly (required).
pub fn inject_anti_affinity(spec: &mut PodSpec, anti: &AntiAffinity, stable_hash: &str) {
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: POD_TEMPLATE_HASH.into(),
                operator: "In".into(),
                values: Some(vec![stable_hash.into()]),
            }]),
            ..Default::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    };
    let pod_anti = spec
        .affinity
        .get_or_insert_with(Default::default)
        .pod_anti_affinity
        .get_or_insert_with(Default::default);
    if let Some(preferred) = &anti.preferred_during_scheduling_ignored_during_execution {
        pod_anti
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(WeightedPodAffinityTerm {
                weight: preferred.weight.unwrap_or(1).clamp(1, 100),
                pod_affinity_term: term,
            });
    } else if anti
        .required_during_scheduling_ignored_during_execution
        .is_some()
    {
        pod_anti
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
    }
}

/// The new ReplicaSet for `pod_hash` at `revision`, starting at `replicas`. With
/// `anti_affinity`, its pods avoid the nodes of the stable pods.
pub fn build(
    rollout: &Rollout,
    pod_hash: &str,
    revision: i64,
    replicas: i32,
    anti_affinity: Option<(&AntiAffinity, &str)>,
) -> ReplicaSet {
    let name = rollout.metadata.name.clone().unwrap_or_default();
    let mut template = rollout.spec.template.clone().unwrap_or_default();
    let template_meta = template.metadata.get_or_insert_with(Default::default);
    template_meta
        .labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.into(), pod_hash.into());
    let labels = template_meta.labels.clone();
    if let Some((anti, stable_hash)) = anti_affinity
        && stable_hash != pod_hash
    {
        inject_anti_affinity(
            template.spec.get_or_insert_with(Default::default),
            anti,
            stable_hash,
        );
    }

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

/// Read-only helpers over a ReplicaSet, named after what the engine asks of one.
pub trait ReplicaSetExt {
    fn name(&self) -> &str;
    fn pod_hash(&self) -> Option<&str>;
    fn revision(&self) -> Option<i64>;
    fn annotation(&self, key: &str) -> Option<&str>;
    fn spec_replicas(&self) -> i32;
    fn status_replicas(&self) -> i32;
    fn ready_replicas(&self) -> i32;
    fn available_replicas(&self) -> i32;
    /// Whether the ReplicaSet controller has caught up with the latest spec change.
    fn status_is_current(&self) -> bool;
    fn is_being_deleted(&self) -> bool;
}

impl ReplicaSetExt for ReplicaSet {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    fn pod_hash(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_TEMPLATE_HASH))
            .map(String::as_str)
    }

    fn revision(&self) -> Option<i64> {
        self.annotation(REVISION).and_then(|v| v.parse().ok())
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    fn spec_replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn status_replicas(&self) -> i32 {
        self.status.as_ref().map(|s| s.replicas).unwrap_or(0)
    }

    fn ready_replicas(&self) -> i32 {
        self.status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0)
    }

    fn available_replicas(&self) -> i32 {
        self.status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0)
    }

    fn status_is_current(&self) -> bool {
        let generation = self.metadata.generation.unwrap_or(0);
        let observed = self
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0);
        observed >= generation
    }

    fn is_being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout() -> Rollout {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                         "annotations": {"team": "a", "rollout.argoproj.io/revision": "3",
                                         "notified.notifications.argoproj.io": "{}"}},
            "spec": {
                "replicas": 4,
                "minReadySeconds": 5,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "i"}]}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn new_replica_set_carries_argo_names_labels_and_annotations() {
        let rs = build(&rollout(), "abc123", 4, 1, None);
        assert_eq!(rs.metadata.name.as_deref(), Some("web-abc123"));
        let labels = rs.metadata.labels.clone().unwrap();
        assert_eq!(labels[POD_TEMPLATE_HASH], "abc123");
        let annotations = rs.metadata.annotations.clone().unwrap();
        assert_eq!(annotations["team"], "a");
        assert_eq!(annotations[REVISION], "4");
        assert_eq!(annotations[DESIRED_REPLICAS], "4");
        assert!(!annotations.contains_key("notified.notifications.argoproj.io"));
        let spec = rs.spec.unwrap();
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.min_ready_seconds, Some(5));
        assert_eq!(
            spec.selector.match_labels.unwrap()[POD_TEMPLATE_HASH],
            "abc123"
        );
        let owner = &rs.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Rollout", "u1", Some(true))
        );
    }

    #[test]
    fn anti_affinity_keeps_new_pods_off_stable_nodes() {
        let anti: AntiAffinity = serde_json::from_value(json!({
            "preferredDuringSchedulingIgnoredDuringExecution": {"weight": 40}
        }))
        .unwrap();
        let rs = build(&rollout(), "new", 2, 1, Some((&anti, "old")));
        let affinity = rs
            .spec
            .unwrap()
            .template
            .unwrap()
            .spec
            .unwrap()
            .affinity
            .unwrap();
        let terms = affinity
            .pod_anti_affinity
            .unwrap()
            .preferred_during_scheduling_ignored_during_execution
            .unwrap();
        assert_eq!(terms[0].weight, 40);
        let req = &terms[0]
            .pod_affinity_term
            .label_selector
            .as_ref()
            .unwrap()
            .match_expressions
            .as_ref()
            .unwrap()[0];
        assert_eq!(req.values.as_deref(), Some(&["old".to_string()][..]));

        let required: AntiAffinity = serde_json::from_value(json!({
            "requiredDuringSchedulingIgnoredDuringExecution": {}
        }))
        .unwrap();
        let rs = build(&rollout(), "new", 2, 1, Some((&required, "old")));
        let affinity = rs
            .spec
            .unwrap()
            .template
            .unwrap()
            .spec
            .unwrap()
            .affinity
            .unwrap();
        assert_eq!(
            affinity
                .pod_anti_affinity
                .unwrap()
                .required_during_scheduling_ignored_during_execution
                .unwrap()[0]
                .topology_key,
            "kubernetes.io/hostname"
        );
        // No stable to avoid: nothing injected.
        let rs = build(&rollout(), "new", 2, 1, Some((&required, "new")));
        assert!(
            rs.spec
                .unwrap()
                .template
                .unwrap()
                .spec
                .unwrap()
                .affinity
                .is_none()
        );
    }
}
