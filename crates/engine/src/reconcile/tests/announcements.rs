//! Events of first deploys and updates, in Argo's order and with Argo's reasons.

use super::*;

// Argo's order, from its source: the pass that creates a ReplicaSet records the revision
// (`RolloutUpdated`) and the creation at 0 replicas, then writes the reset status
// (`RolloutNotCompleted`, also on a canary's first revision, whose first status has no step
// hash); later passes scale (`ScalingReplicaSet`), step, pause and promote.

#[test]
fn a_canary_with_steps_announces_its_first_deploy_and_an_update_as_argo_does() {
    let mut w = World::new(rollout(
        1,
        json!([{"setWeight": 50}, {"pause": {"duration": 3}}]),
    ));
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutCompleted",
        ])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);

    w.set_image("app:v2");
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutStepCompleted",
            "RolloutPaused",
        ])
    );
    // The timed pause ends: the step completes and the Rollout is resumed; the stable pods
    // go, and the update completes.
    w.advance(4);
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutStepCompleted",
            "RolloutResumed",
            "ScalingReplicaSet",
            "RolloutCompleted",
        ])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn a_canary_of_four_scales_its_replica_sets_one_at_a_time_as_argo_does() {
    // Argo sizes the stable ReplicaSet first and the new one in a later pass, from the
    // stable's new size (its replica arithmetic worked through for 4 replicas, maxSurge and
    // maxUnavailable 1): the events below, one by one.
    let mut w = healthy_world(
        4,
        json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 75}, {"pause": {"duration": 1}}]),
    );
    w.set_image("app:v2");
    let v1 = w.rs_named_by_image("app:v1");
    let mut scaling = Vec::new();
    let mut record = |w: &mut World| {
        for _ in 0..20 {
            for e in w.reconcile().events {
                if e.reason == "ScalingReplicaSet" || e.reason == "RolloutCompleted" {
                    scaling.push(e.message.replace(&v1, "v1"));
                }
            }
        }
    };
    record(&mut w);
    w.promote();
    record(&mut w);
    w.advance(2);
    record(&mut w);
    let v2 = w.rs_named_by_image("app:v2");
    let hash = w.status().current_pod_hash.clone().unwrap();
    let scaling: Vec<String> = scaling.iter().map(|m| m.replace(&v2, "v2")).collect();
    assert_eq!(
        scaling,
        [
            "Scaled down ReplicaSet v1 (revision 1) from 4 to 3",
            "Scaled up ReplicaSet v2 (revision 2) from 0 to 1",
            "Scaled down ReplicaSet v1 (revision 1) from 3 to 2",
            "Scaled up ReplicaSet v2 (revision 2) from 1 to 3",
            "Scaled down ReplicaSet v1 (revision 1) from 2 to 1",
            "Scaled down ReplicaSet v1 (revision 1) from 1 to 0",
            "Scaled up ReplicaSet v2 (revision 2) from 3 to 4",
            &format!(
                "Rollout completed update to revision 2 ({hash}): Completed all 4 canary steps"
            ),
        ]
    );
}

#[test]
fn a_plain_canary_announces_its_first_deploy_and_an_update_as_argo_does() {
    let mut w = World::new(rollout(1, json!([])));
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "RolloutCompleted",
        ])
    );
    w.advance(60);
    w.set_image("app:v2");
    let plan = w.reconcile();
    let messages: Vec<String> = plan.events.iter().map(|e| e.message.clone()).collect();
    let hash = w.status().current_pod_hash.clone().unwrap();
    assert_eq!(
        messages,
        [
            "Rollout updated to revision 2".to_string(),
            format!("Created ReplicaSet demo-{hash} (revision 2)"),
            format!("Rollout not completed, started update to revision 2 ({hash})"),
            format!("Scaled up ReplicaSet demo-{hash} (revision 2) from 0 to 1"),
        ]
    );
    // Six events in all, as Argo: the stable pod goes once the new one is up.
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&["ScalingReplicaSet", "RolloutCompleted"])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn a_blue_green_rollout_announces_its_first_deploy_and_an_update_as_argo_does() {
    let mut w = World::bg(bg_rollout(
        1,
        json!({"activeService": "active", "scaleDownDelaySeconds": 30}),
    ));
    // No RolloutNotCompleted: the first status already makes the new pods stable.
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "ScalingReplicaSet",
            "RolloutCompleted",
            "SwitchService",
        ])
    );
    w.advance(60);
    w.set_image("app:v2");
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "SwitchService",
            "RolloutCompleted",
        ])
    );
    let hash = w.status().current_pod_hash.clone().unwrap();
    w.advance(30);
    assert_eq!(settle_typed_events(&mut w), normal(&["ScalingReplicaSet"]));
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(w.status().stable_rs.as_deref(), Some(hash.as_str()));
}

#[test]
fn a_blue_green_preview_service_is_routed_to_a_new_replica_set_as_it_is_created() {
    let mut w = World::bg(bg_rollout(
        1,
        json!({"activeService": "active", "previewService": "preview"}),
    ));
    let plan = w.reconcile();
    let hash = w.status().current_pod_hash.clone().unwrap();
    let events: Vec<String> = plan
        .events
        .iter()
        .map(|e| format!("{}: {}", e.reason, e.message))
        .collect();
    assert_eq!(
        events,
        [
            "RolloutUpdated: Rollout updated to revision 1".to_string(),
            format!("NewReplicaSetCreated: Created ReplicaSet demo-{hash} (revision 1)"),
            format!("SwitchService: Switched selector for service 'preview' from '' to '{hash}'"),
            format!("ScalingReplicaSet: Scaled up ReplicaSet demo-{hash} (revision 1) from 0 to 1"),
            format!(
                "RolloutCompleted: Rollout completed update to revision 1 ({hash}): Initial deploy"
            ),
        ]
    );
    // The ReplicaSet is created before the Service is pointed at it.
    let position = |f: fn(&Action) -> bool| plan.actions.iter().position(f).unwrap();
    assert!(
        position(|a| matches!(a, Action::CreateReplicaSet { .. }))
            < position(|a| matches!(a, Action::SwitchService { .. })),
        "{:#?}",
        plan.actions
    );
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&["SwitchService"]),
        "then the active Service"
    );
    w.advance(60);
    w.set_image("app:v2");
    assert_eq!(
        settle_typed_events(&mut w),
        normal(&[
            "RolloutUpdated",
            "NewReplicaSetCreated",
            "SwitchService",
            "RolloutNotCompleted",
            "ScalingReplicaSet",
            "SwitchService",
            "RolloutCompleted",
        ])
    );
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
}

#[test]
fn an_update_superseded_mid_way_is_not_announced_as_not_completed_again() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.set_image("app:v3");
    // The reset status lifts the pause, which Argo reports with it, before any scaling.
    let reasons: Vec<&str> = w.reconcile().events.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons[..3],
        ["RolloutUpdated", "NewReplicaSetCreated", "RolloutResumed"],
        "{reasons:?}"
    );
    let reasons = w.settle_events();
    assert!(!reasons.contains(&"RolloutNotCompleted"), "{reasons:?}");
    assert!(!reasons.contains(&"RolloutResumed"), "{reasons:?}");
}

#[test]
fn going_back_to_the_stable_template_mid_update_skips_the_steps_with_argos_events() {
    let mut w = healthy_world(4, json!([{"setWeight": 25}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.set_image("app:v1");
    let events = settle_typed_events(&mut w);
    // Argo: the revision, the reset status (steps skipped, the pause lifted; the stable pods
    // are the current ones, so the update is not "not completed"), then the pods.
    assert_eq!(
        events,
        normal(&[
            "RolloutUpdated",
            "SkipSteps",
            "RolloutResumed",
            "ScalingReplicaSet",
            "ScalingReplicaSet",
        ])
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn a_new_step_list_on_a_healthy_canary_is_announced_as_skipped_steps() {
    let mut w = healthy_world(2, json!([{"setWeight": 25}, {"pause": {}}]));
    w.ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .steps = Some(serde_json::from_value(json!([{"setWeight": 50}, {"pause": {}}])).unwrap());
    let plan = w.reconcile();
    let events: Vec<(&str, &str)> = plan
        .events
        .iter()
        .map(|e| (e.reason, e.message.as_str()))
        .collect();
    assert_eq!(events, [("SkipSteps", "Rollback to stable ReplicaSets")]);
    assert!(settle_typed_events(&mut w).is_empty());
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

/// The events of going back to the first revision's template from a completed second one,
/// the template given by `restore` from the world of the first revision.
fn undo_events(
    restore: impl FnOnce(&mut World) -> k8s_openapi::api::core::v1::PodTemplateSpec,
) -> Vec<(crate::EventType, &'static str)> {
    let mut w = World::new(rollout(2, json!([])));
    settle_typed_events(&mut w);
    let first = restore(&mut w);
    w.advance(60);
    w.set_image("app:v2");
    settle_typed_events(&mut w);
    w.advance(60);
    w.ro.spec.template = Some(first);
    settle_typed_events(&mut w)
}

/// What Argo says going back to a scaled-down revision: its ReplicaSet, reused as revision 3,
/// is recorded on the Rollout (`RolloutUpdated`) as a new one would be.
const UNDO_EVENTS: [&str; 7] = [
    "RolloutUpdated",
    "RolloutNotCompleted",
    "ScalingReplicaSet",
    "ScalingReplicaSet",
    "ScalingReplicaSet",
    "ScalingReplicaSet",
    "RolloutCompleted",
];

#[test]
fn an_undo_to_a_scaled_down_revision_announces_it_as_argo_does() {
    // A live scenario found it (seed 1).
    let events = undo_events(|w| w.ro.spec.template.clone().expect("a template"));
    assert_eq!(events, normal(&UNDO_EVENTS));
}

#[test]
fn an_undo_copying_a_replica_set_template_announces_it_as_argo_does() {
    let events = undo_events(World::template_as_undo_copies_it);
    assert_eq!(events, normal(&UNDO_EVENTS));
}

#[test]
fn an_undo_writes_the_revision_with_the_scaling_and_the_rollouts_revision_last() {
    // Annotating the restored ReplicaSet and then scaling it from the same observed copy
    // would always conflict; and a plan stopped there must not have recorded the revision
    // on the Rollout without announcing it.
    let mut w = World::new(rollout(2, json!([])));
    settle_typed_events(&mut w);
    w.advance(60);
    w.set_image("app:v2");
    settle_typed_events(&mut w);
    w.advance(60);
    w.set_image("app:v1");
    let plan = w.reconcile();
    let kinds: Vec<&str> = plan
        .actions
        .iter()
        .map(|a| match a {
            Action::ScaleReplicaSet { annotations, .. } => {
                assert_eq!(
                    annotations.get(crate::labels::REVISION),
                    Some(&Some("3".to_string())),
                    "{annotations:?}"
                );
                "scale"
            }
            Action::AnnotateRollout { .. } => "annotate rollout",
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["scale", "annotate rollout"]);
}
