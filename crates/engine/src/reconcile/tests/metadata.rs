//! Ephemeral pod metadata in the scenario world: the pods of a ReplicaSet carry its role's
//! labels and annotations, and are relabelled in place when the role changes.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use sluice_api::rollout::{Rollout, RolloutPhase};

use super::{World, bg_rollout, rollout};
use crate::labels::{EPHEMERAL_METADATA, POD_TEMPLATE_HASH};
use crate::observed::{Observed, ReplicaSetExt};
use crate::plan::Action;

fn label<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

impl World {
    fn pods_of(&self, hash: &str) -> Vec<&Pod> {
        self.pods
            .iter()
            .filter(|p| label(&p.metadata, POD_TEMPLATE_HASH) == Some(hash))
            .collect()
    }

    fn pod_names(&self, hash: &str) -> Vec<String> {
        self.pods_of(hash)
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    }

    /// The value of label `key` on every pod of `hash` (one entry per pod).
    fn pod_labels(&self, hash: &str, key: &str) -> Vec<Option<String>> {
        self.pods_of(hash)
            .iter()
            .map(|p| label(&p.metadata, key).map(str::to_string))
            .collect()
    }

    fn rs_of(&self, hash: &str) -> &k8s_openapi::api::apps::v1::ReplicaSet {
        self.rss
            .iter()
            .find(|rs| rs.pod_hash() == Some(hash))
            .unwrap()
    }

    fn template_meta(
        &self,
        hash: &str,
    ) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        self.rs_of(hash)
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.metadata.clone())
            .unwrap()
    }

    fn current_hash(&self) -> String {
        self.status().current_pod_hash.clone().unwrap()
    }

    fn needs_pods(&self) -> bool {
        Observed::needs_pods(&self.ro, &self.rss, self.now)
    }
}

fn some(v: &str, n: usize) -> Vec<Option<String>> {
    vec![Some(v.to_string()); n]
}

fn bg_with_metadata() -> World {
    let mut w = World::bg(bg_rollout(
        2,
        json!({
            "activeService": "active", "previewService": "preview",
            "autoPromotionEnabled": false,
            "previewMetadata": {"labels": {"role": "preview"}, "annotations": {"stage": "preview"}},
            "activeMetadata": {"labels": {"role": "active"}}
        }),
    ));
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    w
}

#[test]
fn blue_green_preview_pods_become_active_in_place_on_promotion() {
    let mut w = bg_with_metadata();
    let rev1 = w.current_hash();
    // A first revision is active at once.
    assert_eq!(w.pod_labels(&rev1, "role"), some("active", 2));
    assert_eq!(
        annotation(&w.rs_of(&rev1).metadata, EPHEMERAL_METADATA),
        Some(r#"{"labels":{"role":"active"}}"#)
    );
    assert!(!w.needs_pods(), "nothing to relabel: pods are not listed");

    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    let rev2 = w.current_hash();
    let rs2_name = w.rs_of(&rev2).name().to_string();
    let preview_pods = w.pod_names(&rev2);
    assert_eq!(preview_pods.len(), 2);
    assert_eq!(w.pod_labels(&rev2, "role"), some("preview", 2));
    assert!(
        w.pods_of(&rev2)
            .iter()
            .all(|p| annotation(&p.metadata, "stage") == Some("preview"))
    );
    assert_eq!(w.pod_labels(&rev1, "role"), some("active", 2));
    assert_eq!(label(&w.template_meta(&rev2), "role"), Some("preview"));
    assert_eq!(
        annotation(&w.rs_of(&rev2).metadata, EPHEMERAL_METADATA),
        Some(r#"{"labels":{"role":"preview"},"annotations":{"stage":"preview"}}"#)
    );

    w.promote();
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.selector_of("active").as_deref(), Some(rev2.as_str()));
    // The same pods, relabelled in place; the preview annotation is gone.
    assert_eq!(w.pod_names(&rev2), preview_pods);
    assert_eq!(w.pod_labels(&rev2, "role"), some("active", 2));
    assert!(
        w.pods_of(&rev2)
            .iter()
            .all(|p| annotation(&p.metadata, "stage").is_none())
    );
    let template = w.template_meta(&rev2);
    assert_eq!(label(&template, "role"), Some("active"));
    assert_eq!(annotation(&template, "stage"), None);
    assert_eq!(label(&template, POD_TEMPLATE_HASH), Some(rev2.as_str()));
    assert_eq!(
        annotation(&w.rs_of(&rev2).metadata, EPHEMERAL_METADATA),
        Some(r#"{"labels":{"role":"active"}}"#)
    );
    // Neither the hash nor the ReplicaSet changed.
    assert_eq!(w.current_hash(), rev2);
    assert_eq!(w.rs_of(&rev2).name(), rs2_name);
    let selector = w.rs_of(&rev2).spec.as_ref().unwrap().selector.clone();
    assert_eq!(
        selector.match_labels.unwrap()[POD_TEMPLATE_HASH],
        rev2.as_str()
    );
    assert!(!w.needs_pods());
}

fn canary_with_metadata() -> World {
    let mut ro: Rollout = rollout(4, json!([{"setWeight": 50}, {"pause": {}}]));
    let canary = ro.spec.strategy.as_mut().unwrap().canary.as_mut().unwrap();
    canary.canary_metadata =
        Some(serde_json::from_value(json!({"labels": {"role": "canary"}})).unwrap());
    canary.stable_metadata = Some(
        serde_json::from_value(
            json!({"labels": {"role": "stable"}, "annotations": {"tier": "stable"}}),
        )
        .unwrap(),
    );
    let mut w = World::new(ro);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    w
}

#[test]
fn canary_pods_carry_canary_metadata_then_stable_metadata_after_completion() {
    let mut w = canary_with_metadata();
    let rev1 = w.current_hash();
    assert_eq!(w.pod_labels(&rev1, "role"), some("stable", 4));

    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    let rev2 = w.current_hash();
    let canary_pods = w.pod_names(&rev2);
    assert_eq!(canary_pods.len(), 2);
    assert_eq!(w.pod_labels(&rev2, "role"), some("canary", 2));
    assert!(
        w.pods_of(&rev2)
            .iter()
            .all(|p| annotation(&p.metadata, "tier").is_none())
    );
    assert_eq!(w.pod_labels(&rev1, "role"), some("stable", 2));

    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.current_hash(), rev2);
    let pods = w.pod_names(&rev2);
    assert_eq!(pods.len(), 4);
    assert!(
        canary_pods.iter().all(|p| pods.contains(p)),
        "the canary pods stay, relabelled"
    );
    assert_eq!(w.pod_labels(&rev2, "role"), some("stable", 4));
    assert!(
        w.pods_of(&rev2)
            .iter()
            .all(|p| annotation(&p.metadata, "tier") == Some("stable"))
    );
    assert_eq!(label(&w.template_meta(&rev2), "role"), Some("stable"));
}

#[test]
fn removing_the_metadata_from_the_spec_takes_it_off_templates_and_pods() {
    let mut w = canary_with_metadata();
    let rev1 = w.current_hash();
    let rs_name = w.rs_of(&rev1).name().to_string();
    let pods = w.pod_names(&rev1);
    let canary =
        w.ro.spec
            .strategy
            .as_mut()
            .unwrap()
            .canary
            .as_mut()
            .unwrap();
    canary.canary_metadata = None;
    canary.stable_metadata = None;
    w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
    assert!(w.needs_pods());
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.rss.len(), 1, "no new ReplicaSet");
    assert_eq!(w.rs_of(&rev1).name(), rs_name);
    assert_eq!(w.current_hash(), rev1);
    assert_eq!(w.pod_names(&rev1), pods);
    assert_eq!(w.pod_labels(&rev1, "role"), vec![None; 4]);
    assert!(
        w.pods_of(&rev1)
            .iter()
            .all(|p| annotation(&p.metadata, "tier").is_none())
    );
    let template = w.template_meta(&rev1);
    assert_eq!(label(&template, "role"), None);
    assert_eq!(label(&template, "app"), Some("demo"));
    assert_eq!(label(&template, POD_TEMPLATE_HASH), Some(rev1.as_str()));
    assert_eq!(
        annotation(&w.rs_of(&rev1).metadata, EPHEMERAL_METADATA),
        None
    );
    assert!(!w.needs_pods());
    let plan = w.reconcile();
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
}

#[test]
fn selector_labels_are_never_injected() {
    let mut ro = rollout(2, json!([]));
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .stable_metadata = Some(
        serde_json::from_value(json!({"labels": {
            "app": "other", POD_TEMPLATE_HASH: "other", "role": "stable"
        }}))
        .unwrap(),
    );
    let mut w = World::new(ro);
    w.settle();
    let rev1 = w.current_hash();
    assert_eq!(w.pod_labels(&rev1, "app"), some("demo", 2));
    assert_eq!(w.pod_labels(&rev1, POD_TEMPLATE_HASH), some(&rev1, 2));
    assert_eq!(w.pod_labels(&rev1, "role"), some("stable", 2));
}

#[test]
fn relabelling_waits_for_a_replica_set_the_plan_already_writes() {
    let mut w = bg_with_metadata();
    w.set_image("app:v2");
    w.settle_bg();
    w.promote();
    // The promotion itself: roles are read from the observed status, so nothing is relabelled
    // yet; the next reconcile (which lists the pods) does it.
    let plan = w.reconcile();
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::PatchPodMetadata { .. })),
        "{:?}",
        plan.actions
    );
    assert!(w.needs_pods());
    let plan = w.reconcile();
    let rev2 = w.current_hash();
    let position = |f: &dyn Fn(&Action) -> bool| plan.actions.iter().position(f);
    let first_pod = position(&|a| matches!(a, Action::PatchPodMetadata { .. })).unwrap();
    let template = position(
        &|a| matches!(a, Action::SetReplicaSetPodMetadata { name, .. } if name.ends_with(&rev2)),
    )
    .unwrap();
    assert!(first_pod < template, "pods first: {:?}", plan.actions);
}

#[test]
fn a_template_copied_back_from_a_replica_set_with_metadata_reuses_it() {
    let mut w = canary_with_metadata();
    let rev1 = w.current_hash();
    // `undo` copies the ReplicaSet's template, injected metadata and all.
    let mut copied = w
        .rs_of(&rev1)
        .spec
        .as_ref()
        .unwrap()
        .template
        .clone()
        .unwrap();
    copied
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .remove(POD_TEMPLATE_HASH);
    assert_eq!(
        label(copied.metadata.as_ref().unwrap(), "role"),
        Some("stable")
    );
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.ro.spec.template = Some(copied);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.rss.len(),
        2,
        "no new ReplicaSet for the restored template"
    );
    assert_eq!(w.current_hash(), rev1);
    assert_eq!(w.pod_labels(&rev1, "role"), some("stable", 4));
}
