//! Services in the scenario world: a canary's canary and stable Services follow the new and
//! stable pods without a traffic router, and a Service the Rollout stops naming is given back.

use serde_json::json;
use sluice_api::rollout::{Rollout, RolloutPhase};

use super::{World, bg_rollout, rollout, service};
use crate::labels::{MANAGED_BY, POD_TEMPLATE_HASH};
use crate::observed::ReplicaSetExt;
use crate::plan::Action;

fn canary_with_services(replicas: i32, steps: serde_json::Value) -> Rollout {
    let mut ro = rollout(replicas, steps);
    let c = ro
        .spec
        .strategy
        .as_mut()
        .and_then(|s| s.canary.as_mut())
        .unwrap();
    c.canary_service = Some("canary".into());
    c.stable_service = Some("stable".into());
    ro
}

impl World {
    fn with_canary_services(ro: Rollout) -> Self {
        let mut w = World::new(ro);
        w.services = vec![service("canary"), service("stable")];
        w
    }

    fn hash_of_image(&self, image: &str) -> String {
        self.rss
            .iter()
            .find(|rs| World::image_of(rs) == image)
            .and_then(|rs| rs.pod_hash())
            .unwrap()
            .to_string()
    }

    fn managed_by(&self, svc: &str) -> Option<String> {
        self.services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(svc))?
            .metadata
            .annotations
            .as_ref()?
            .get(MANAGED_BY)
            .cloned()
    }
}

#[test]
fn canary_and_stable_services_follow_new_and_stable_pods_without_a_router() {
    let mut w = World::with_canary_services(canary_with_services(
        4,
        json!([{"setWeight": 25}, {"pause": {}}]),
    ));
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    let v1 = w.hash_of_image("app:v1");
    assert_eq!(w.selector_of("stable").as_deref(), Some(v1.as_str()));
    assert_eq!(w.selector_of("canary").as_deref(), Some(v1.as_str()));
    assert_eq!(w.managed_by("stable").as_deref(), Some("demo"));
    assert_eq!(w.managed_by("canary").as_deref(), Some("demo"));

    w.set_image("app:v2");
    let mut switch_events = Vec::new();
    for _ in 0..10 {
        let plan = w.reconcile();
        switch_events.extend(
            plan.events
                .iter()
                .filter(|e| e.reason == "SwitchService")
                .map(|e| e.message.clone()),
        );
    }
    let v2 = w.hash_of_image("app:v2");
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.selector_of("canary").as_deref(), Some(v2.as_str()));
    assert_eq!(w.selector_of("stable").as_deref(), Some(v1.as_str()));
    assert_eq!(
        switch_events,
        vec![format!(
            "Switched selector for service 'canary' from '{v1}' to '{v2}'"
        )]
    );

    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(w.selector_of("stable").as_deref(), Some(v2.as_str()));
    assert_eq!(w.selector_of("canary").as_deref(), Some(v2.as_str()));
}

#[test]
fn the_canary_service_switches_in_the_same_write_order_before_scaling() {
    let mut w = World::with_canary_services(canary_with_services(
        4,
        json!([{"setWeight": 25}, {"setWeight": 50}, {"pause": {}}]),
    ));
    w.settle();
    w.set_image("app:v2");
    let mut plan = w.reconcile();
    while !plan
        .actions
        .iter()
        .any(|a| matches!(a, Action::SwitchService { .. }))
    {
        plan = w.reconcile();
    }
    let switch = plan
        .actions
        .iter()
        .position(|a| matches!(a, Action::SwitchService { name, .. } if name == "canary"))
        .unwrap();
    let first_scale = plan
        .actions
        .iter()
        .position(|a| matches!(a, Action::ScaleReplicaSet { .. }));
    assert!(
        first_scale.is_none_or(|s| switch < s),
        "{:#?}",
        plan.actions
    );
}

#[test]
fn an_aborted_canary_points_the_canary_service_back_at_stable() {
    let mut w = World::with_canary_services(canary_with_services(
        4,
        json!([{"setWeight": 50}, {"pause": {}}]),
    ));
    w.settle();
    let v1 = w.hash_of_image("app:v1");
    w.set_image("app:v2");
    w.settle();
    let v2 = w.hash_of_image("app:v2");
    assert_eq!(w.selector_of("canary").as_deref(), Some(v2.as_str()));

    w.ro.status.as_mut().unwrap().abort = Some(true);
    let plan = w.reconcile();
    assert!(plan.events.iter().any(|e| e.reason == "SwitchService"
        && e.message == format!("Switched selector for service 'canary' from '{v2}' to '{v1}'")));
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(w.selector_of("canary").as_deref(), Some(v1.as_str()));
    assert_eq!(w.selector_of("stable").as_deref(), Some(v1.as_str()));
}

#[test]
fn a_missing_canary_service_is_invalid_spec_with_argos_field_error() {
    let mut w = World::new(canary_with_services(2, json!([{"setWeight": 50}])));
    w.services = vec![service("stable")];
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "InvalidSpec: The Rollout \"demo\" is invalid: spec.strategy.canary.canaryService: Invalid value: \"canary\": services \"canary\" not found"
        )
    );
    w.services = vec![service("canary")];
    w.reconcile();
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .contains("spec.strategy.canary.stableService: Invalid value: \"stable\": services \"stable\" not found")
    );
}

#[test]
fn an_unmanaged_service_is_adopted_only_once_its_target_is_fully_available() {
    let mut w = World::new(canary_with_services(4, json!([{"setWeight": 50}])));
    w.services = vec![service("canary"), service("stable")];
    w.bad_images.push("app:v1".into());
    w.settle();
    // No pod available: neither Service is switched.
    assert_eq!(w.selector_of("stable"), None);
    assert_eq!(w.managed_by("stable"), None);
    w.bad_images.clear();
    w.settle_pods();
    w.settle();
    assert!(w.selector_of("stable").is_some());
}

#[test]
fn a_service_the_rollout_no_longer_names_is_given_back() {
    // Blue-green first: the active Service gets the hash selector and the annotation.
    let mut w = World::bg(bg_rollout(2, json!({"activeService": "active"})));
    w.services = vec![service("active")];
    w.settle();
    assert!(w.selector_of("active").is_some());
    assert_eq!(w.managed_by("active").as_deref(), Some("demo"));

    // A strategy switch to canary: the active Service is no longer named.
    let canary = rollout(2, json!([{"setWeight": 50}]));
    w.ro.spec.strategy = canary.spec.strategy;
    w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
    let plan = w.reconcile();
    assert!(
        plan.actions
            .iter()
            .any(|a| matches!(a, Action::ReleaseService { name, .. } if name == "active")),
        "{:#?}",
        plan.actions
    );
    assert_eq!(w.selector_of("active"), None);
    assert_eq!(w.managed_by("active"), None);
    let selector = w.services[0].spec.as_ref().unwrap().selector.clone();
    assert_eq!(
        selector.unwrap().get("app").map(String::as_str),
        Some("demo")
    );
    // Given back once: nothing more to write.
    let plan = w.reconcile();
    assert!(
        !plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::ReleaseService { .. }))
    );
}

#[test]
fn services_managed_by_another_rollout_or_still_named_are_left_alone() {
    let mut w = World::with_canary_services(canary_with_services(2, json!([{"setWeight": 50}])));
    let mut other = service("other");
    other.metadata.annotations =
        Some([(MANAGED_BY.to_string(), "someone-else".to_string())].into());
    other
        .spec
        .as_mut()
        .unwrap()
        .selector
        .as_mut()
        .unwrap()
        .insert(POD_TEMPLATE_HASH.into(), "abc".into());
    w.services.push(other);
    w.settle();
    assert_eq!(w.selector_of("other").as_deref(), Some("abc"));
    assert!(w.selector_of("stable").is_some());
    assert!(w.selector_of("canary").is_some());
}
