//! A blue-green update: the Services' switch after full availability, manual and automatic
//! promotion, aborted bad revisions and the confirmed scale-downs.

use super::*;

#[test]
fn blue_green_first_deploy_points_active_and_preview_at_it() {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview"}),
    ));
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v1"));
    let bg = w.status().blue_green.clone().unwrap();
    assert_eq!(bg.active_selector, w.status().current_pod_hash);
    assert_eq!(w.status().hpa_replicas, Some(3));
    assert!(
        w.status()
            .selector
            .as_deref()
            .unwrap()
            .contains(POD_TEMPLATE_HASH)
    );
    assert_eq!(w.status().current_step_index, None);
}

#[test]
fn blue_green_update_switches_after_full_availability_and_scales_old_down_after_delay() {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview", "scaleDownDelaySeconds": 30}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
    // The old ReplicaSet waits for its deadline, written as RFC 3339.
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 3)]
    );
    let old = w
        .rss
        .iter()
        .find(|r| World::image_of(r) == "app:v1")
        .unwrap();
    let deadline = old.annotation(SCALE_DOWN_DEADLINE).unwrap().to_string();
    assert!(
        deadline.ends_with('Z') && !deadline.is_empty(),
        "{deadline}"
    );
    w.advance(29);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 3)]
    );
    w.advance(1);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 3)]
    );
    let old = w
        .rss
        .iter()
        .find(|r| World::image_of(r) == "app:v1")
        .unwrap();
    assert_eq!(
        old.annotation(SCALE_DOWN_DEADLINE),
        None,
        "removed with the scale-down"
    );
}

#[test]
fn blue_green_manual_promotion_with_preview_replica_count() {
    let mut w = World::bg(bg_rollout(
        4,
        json!({"activeService": "active", "previewService": "preview",
               "autoPromotionEnabled": false, "previewReplicaCount": 1}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.status().message.as_deref(), Some("BlueGreenPause"));
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 1)]
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
    w.advance(3600);
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.promote();
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
}

#[test]
fn blue_green_auto_promotion_seconds_waits() {
    let mut w = World::bg(bg_rollout(
        2,
        json!({"activeService": "active", "autoPromotionSeconds": 20}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    w.advance(20);
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

/// Argo's open bug: after an aborted bad revision and a good one, a second bad revision hangs
/// in "active service cutover pending". Here every bad revision is aborted at its deadline.
#[test]
fn blue_green_second_bad_revision_is_aborted_too() {
    let mut ro = bg_rollout(
        2,
        json!({"activeService": "active", "previewService": "preview",
               "scaleDownDelaySeconds": 30, "abortScaleDownDelaySeconds": 30}),
    );
    ro.spec.progress_deadline_seconds = Some(20);
    ro.spec.progress_deadline_abort = Some(true);
    let mut w = World::bg(ro);
    w.settle_bg();
    w.bad_images = vec!["app:bad2".into(), "app:bad4".into()];
    for (image, good, stable) in [
        ("app:bad2", false, "app:v1"),
        ("app:v3", true, "app:v3"),
        ("app:bad4", false, "app:v3"),
    ] {
        w.set_image(image);
        w.settle_bg();
        w.advance(21);
        w.settle_bg();
        if good {
            assert_eq!(
                w.phase(),
                RolloutPhase::Healthy,
                "{image}: {:#?}",
                w.status()
            );
        } else {
            assert_eq!(
                w.phase(),
                RolloutPhase::Degraded,
                "{image}: {:#?}",
                w.status()
            );
            assert_eq!(w.status().abort, Some(true));
            assert_eq!(
                w.image_behind("preview").as_deref(),
                Some(image),
                "the aborted version stays behind the preview"
            );
        }
        assert_eq!(w.image_behind("active").as_deref(), Some(stable), "{image}");
        // Let every delayed scale-down happen.
        w.advance(31);
        w.settle_bg();
        let up: Vec<(String, i32)> = w
            .replicas_by_image()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(up, vec![(stable.to_string(), 2)], "{image}");
        assert!(
            w.rss
                .iter()
                .all(|r| r.annotation(SCALE_DOWN_DEADLINE) != Some("")),
            "never an empty deadline"
        );
    }
}

#[test]
fn blue_green_missing_active_service_is_invalid_spec() {
    let mut w = World::new(bg_rollout(2, json!({"activeService": "nope"})));
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    // Looked at again soon, as Argo does: what made it invalid may appear later.
    assert_eq!(plan.requeue_after, Some(super::super::INVALID_SPEC_RECHECK));
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .contains("service \"nope\" not found")
    );
}

#[test]
fn scale_downs_are_preceded_by_confirming_every_counted_replica_set() {
    let mut w = healthy_world(4, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    let mut saw_scale_down = false;
    let mut saw_self_checked = false;
    for round in 0..20 {
        // As on an API server: every ReplicaSet has a resourceVersion its writes are made on.
        for rs in &mut w.rss {
            rs.metadata.resource_version = Some(format!("{round}"));
        }
        let before = w.rss.clone();
        let plan = w.reconcile();
        let first_scale_down = plan
            .actions
            .iter()
            .position(|a| matches!(a, Action::ScaleReplicaSet { from, to, .. } if to < from));
        if let Some(i) = first_scale_down {
            saw_scale_down = true;
            let confirmed: Vec<&String> = plan.actions[..i]
                .iter()
                .filter_map(|a| match a {
                    Action::ConfirmReplicaSet { name, .. } => Some(name),
                    _ => None,
                })
                .collect();
            // The first scale-down's own resourceVersion precondition confirms its target.
            let checked_by_itself = match &plan.actions[i] {
                Action::ScaleReplicaSet {
                    name,
                    resource_version,
                    ..
                } => Some((name.clone(), resource_version.clone())),
                _ => None,
            };
            for rs in before.iter().filter(|r| r.available_replicas() > 0) {
                let by_itself = rs.metadata.resource_version.is_some()
                    && checked_by_itself
                        == Some((rs.name().to_string(), rs.metadata.resource_version.clone()));
                assert!(
                    confirmed.contains(&&rs.name().to_string()) || by_itself,
                    "{} counted but not confirmed: {:?}",
                    rs.name(),
                    plan.actions
                );
                assert!(
                    !(confirmed.contains(&&rs.name().to_string()) && by_itself),
                    "{} confirmed twice: {:?}",
                    rs.name(),
                    plan.actions
                );
                saw_self_checked |= by_itself;
            }
        }
    }
    assert!(saw_scale_down);
    assert!(
        saw_self_checked,
        "a scale-down confirmed its own ReplicaSet"
    );
}

#[test]
fn blue_green_switch_that_landed_alone_is_recorded_as_promotion() {
    let mut w = World::bg(bg_rollout(2, json!({"activeService": "active"})));
    w.settle_bg();
    w.set_image("app:v2");
    // Reconcile until the new ReplicaSet is fully available, just before the switch.
    for _ in 0..10 {
        w.reconcile();
        let new_up = w
            .rss
            .iter()
            .any(|r| World::image_of(r) == "app:v2" && r.available_replicas() == 2);
        if new_up {
            break;
        }
    }
    // The switch write lands, but nothing else of that plan does.
    let new_hash = w.status().current_pod_hash.clone().unwrap();
    let svc = &mut w.services[0];
    svc.spec
        .as_mut()
        .unwrap()
        .selector
        .as_mut()
        .unwrap()
        .insert(POD_TEMPLATE_HASH.into(), new_hash.clone());
    w.settle_bg();
    assert_eq!(w.status().stable_rs.as_deref(), Some(new_hash.as_str()));
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

/// The status writes of an update's first reconciles can be lost to conflicts; a later one
/// then finds the new ReplicaSet already there, a Progressing condition that still says the
/// previous revision is available and, by chance, the same replica counts as the recorded
/// status (a scale-down delay keeps the old pods counted). The deadline must run all the same.
#[test]
fn lost_status_writes_of_an_update_still_run_its_deadline() {
    let mut ro = bg_rollout(
        2,
        json!({"activeService": "active", "previewService": "preview"}),
    );
    ro.spec.progress_deadline_seconds = Some(20);
    ro.spec.progress_deadline_abort = Some(true);
    let mut w = World::bg(ro);
    w.settle_bg();
    w.bad_images = vec!["app:bad2".into()];
    w.set_image("app:bad2");
    let recorded = w.ro.status.clone();
    w.settle_bg();
    assert!(
        w.rss.iter().any(|rs| World::image_of(rs) == "app:bad2"),
        "the new revision's ReplicaSet is there"
    );
    // None of those status writes landed but the counts happen to be the same.
    let counts = w.ro.status.clone().unwrap_or_default();
    let mut status = recorded.unwrap_or_default();
    status.replicas = counts.replicas;
    status.updated_replicas = counts.updated_replicas;
    status.ready_replicas = counts.ready_replicas;
    status.available_replicas = counts.available_replicas;
    w.ro.status = Some(status);
    w.settle_bg();
    w.advance(21);
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded, "{:#?}", w.status());
    assert_eq!(w.status().abort, Some(true));
}

/// As Argo: a user pause (`spec.paused`) halts the update, the preview Service's switch
/// included; the new ReplicaSet is still created, and the preview follows once resumed.
#[test]
fn a_user_pause_keeps_the_preview_on_the_active_pods_until_resumed() {
    let mut w = World::bg(bg_rollout(
        2,
        json!({"activeService": "active", "previewService": "preview", "autoPromotionEnabled": false}),
    ));
    w.settle_bg();
    w.ro.spec.paused = Some(true);
    w.set_image("app:v2");
    w.settle_bg();
    assert!(
        w.rss.iter().any(|rs| World::image_of(rs) == "app:v2"),
        "created"
    );
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    w.ro.spec.paused = None;
    w.settle_bg();
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v1"),
        "awaits promotion"
    );
}
