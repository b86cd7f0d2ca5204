//! Blue-green decisions Argo makes beyond the plain update: the fast rollback to a ReplicaSet
//! within its scale-down delay, previewReplicaCount with auto-promotion, the status counts of
//! the active ReplicaSet, and the preview Service after an abort.

use super::*;

impl World {
    /// Like `settle_bg`, and returns the events of every reconcile as `reason: message`.
    fn settle_bg_events(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        for _ in 0..50 {
            let before = (self.ro.clone(), self.rss.clone(), self.services.clone());
            let plan = self.reconcile();
            self.assert_active_fully_available();
            events.extend(
                plan.events
                    .iter()
                    .map(|e| format!("{}: {}", e.reason, e.message)),
            );
            if before.0 == self.ro && before.1 == self.rss && before.2 == self.services {
                return events;
            }
        }
        panic!("did not settle: {:#?}", self.ro.status);
    }

    fn rs_with_image(&self, image: &str) -> &ReplicaSet {
        self.rss
            .iter()
            .find(|r| World::image_of(r) == image)
            .unwrap_or_else(|| panic!("no ReplicaSet for {image}"))
    }

    fn hash_of(&self, image: &str) -> String {
        self.rs_with_image(image).pod_hash().unwrap().to_string()
    }
}

/// A Healthy v1 whose update to v2 needs a pre-promotion analysis and a manual promote,
/// promoted: v2 is active and stable, v1 waits out its 30 s scale-down delay at full size.
fn promoted_v2_with_v1_in_its_delay() -> World {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview",
               "autoPromotionEnabled": false, "scaleDownDelaySeconds": 30,
               "prePromotionAnalysis": {"templates": [{"templateName": "health"}]}}),
    ));
    w.add_template("health");
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.pause_reasons(), vec!["BlueGreenPause".to_string()]);
    w.promote();
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert!(
        w.rs_with_image("app:v1")
            .annotation(SCALE_DOWN_DEADLINE)
            .is_some()
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 3)]
    );
    w
}

#[test]
fn rollback_within_the_scale_down_delay_switches_at_once_without_pause_or_analysis() {
    let mut w = promoted_v2_with_v1_in_its_delay();
    let (v1, v2) = (w.hash_of("app:v1"), w.hash_of("app:v2"));
    w.advance(10);
    w.set_image("app:v1");
    // The first reconcile of the rollback already switches: the pods are up.
    let plan = w.reconcile();
    assert!(
        plan.events.iter().any(|e| e.reason == "SwitchService"
            && e.message
                == format!("Switched selector for service 'active' from '{v2}' to '{v1}'")),
        "{:#?}",
        plan.events
    );
    let events = w.settle_bg_events();
    assert!(
        !events.iter().any(|e| e.starts_with("RolloutPaused")),
        "{events:#?}"
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert!(w.pause_reasons().is_empty());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v1"));
    assert_eq!(w.status().stable_rs.as_deref(), Some(v1.as_str()));
    assert_eq!(
        w.runs_of("PrePromotion").len(),
        1,
        "no new pre-promotion run"
    );
    // v1 is no longer going away; v2 now waits out the delay in its turn.
    assert_eq!(
        w.rs_with_image("app:v1").annotation(SCALE_DOWN_DEADLINE),
        None
    );
    assert!(
        w.rs_with_image("app:v2")
            .annotation(SCALE_DOWN_DEADLINE)
            .is_some()
    );
    w.advance(30);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 0)]
    );
}

/// Like [`promoted_v2_with_v1_in_its_delay`], with a post-promotion analysis too: v2 became
/// stable once it passed, and v1 waits out its scale-down delay.
/// A blue-green Rollout of `replicas` with `strategy` (whose analyses use the template
/// `health`), Healthy on app:v1 and then updated to app:v2, settled.
fn analysed_v2(replicas: i32, strategy: serde_json::Value) -> World {
    let mut w = World::bg(bg_rollout(replicas, strategy));
    w.add_template("health");
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    w
}

fn post_analysed_v2_with_v1_in_its_delay() -> World {
    let mut w = analysed_v2(
        3,
        json!({"activeService": "active", "previewService": "preview",
               "autoPromotionEnabled": false, "scaleDownDelaySeconds": 30,
               "prePromotionAnalysis": {"templates": [{"templateName": "health"}]},
               "postPromotionAnalysis": {"templates": [{"templateName": "health"}]}}),
    );
    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    w.promote();
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.runs_of("PostPromotion").len(), 1);
    w.verdict("PostPromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.status().stable_rs.as_deref(),
        Some(w.hash_of("app:v2").as_str())
    );
    assert!(
        w.rs_with_image("app:v1")
            .annotation(SCALE_DOWN_DEADLINE)
            .is_some()
    );
    w
}

#[test]
fn rollback_within_the_scale_down_delay_skips_post_promotion_analysis_too() {
    let mut w = post_analysed_v2_with_v1_in_its_delay();
    let v1 = w.hash_of("app:v1");
    w.advance(10);
    w.set_image("app:v1");
    // Switched and stable in the same reconcile: Healthy at once.
    let plan = w.reconcile();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.status().stable_rs.as_deref(), Some(v1.as_str()));
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    let completed: Vec<&str> = plan
        .events
        .iter()
        .filter(|e| e.reason == "RolloutCompleted")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(
        completed,
        [format!(
            "Rollout completed update to revision 3 ({v1}): Fast rollback"
        )]
    );
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(
        w.runs_of("PrePromotion").len(),
        1,
        "no new pre-promotion run"
    );
    assert_eq!(
        w.runs_of("PostPromotion").len(),
        1,
        "no new post-promotion run"
    );
    assert_eq!(
        w.rs_with_image("app:v1").annotation(SCALE_DOWN_DEADLINE),
        None
    );
}

#[test]
fn a_fast_rollback_whose_promotion_was_lost_is_not_analysed_after_its_switch() {
    let mut w = post_analysed_v2_with_v1_in_its_delay();
    let v1 = w.hash_of("app:v1");
    w.advance(10);
    w.set_image("app:v1");
    // The switch lands, the status write that records the promotion does not.
    let ro_before = w.ro.clone();
    w.reconcile();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    w.ro = ro_before;
    let events = w.settle_bg_events();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.status().stable_rs.as_deref(), Some(v1.as_str()));
    assert_eq!(w.runs_of("PostPromotion").len(), 1, "{events:#?}");
    assert!(
        events.iter().any(|e| e
            == &format!(
                "RolloutCompleted: Rollout completed update to revision 3 ({v1}): Fast rollback"
            )),
        "{events:#?}"
    );
}

#[test]
fn a_post_promotion_analysis_that_passes_completes_the_update_with_argos_event() {
    let mut w = analysed_v2(
        2,
        json!({"activeService": "active",
               "postPromotionAnalysis": {"templates": [{"templateName": "health"}]}}),
    );
    let v2 = w.hash_of("app:v2");
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_ne!(w.status().stable_rs.as_deref(), Some(v2.as_str()));
    w.verdict("PostPromotion", AnalysisPhase::Successful, "");
    let events = w.settle_bg_events();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("RolloutCompleted"))
            .collect::<Vec<_>>(),
        [&format!(
            "RolloutCompleted: Rollout completed update to revision 2 ({v2}): Completed blue-green update"
        )]
    );
    assert_eq!(w.status().stable_rs.as_deref(), Some(v2.as_str()));
}

#[test]
fn rollback_after_the_scale_down_delay_is_an_ordinary_update() {
    let mut w = promoted_v2_with_v1_in_its_delay();
    w.advance(30);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 3)]
    );
    w.set_image("app:v1");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.runs_of("PrePromotion").len(), 2, "analysed again");
}

#[test]
fn fast_rollback_survives_a_lost_switch() {
    let mut w = promoted_v2_with_v1_in_its_delay();
    w.advance(10);
    w.set_image("app:v1");
    // Only the ReplicaSet writes of the first plan land (the switch got a conflict).
    let ro_before = w.ro.clone();
    let services_before = w.services.clone();
    w.reconcile();
    w.ro = ro_before;
    w.services = services_before;
    assert!(
        w.rs_with_image("app:v1")
            .annotation(SCALE_DOWN_DEADLINE)
            .is_some(),
        "the deadline that licenses the fast track stays until the switch"
    );
    let events = w.settle_bg_events();
    assert!(
        !events.iter().any(|e| e.starts_with("RolloutPaused")),
        "{events:#?}"
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
}

#[test]
fn retry_of_an_aborted_update_is_not_fast_tracked_and_abort_keeps_the_preview() {
    let mut w = World::bg(bg_rollout(
        2,
        json!({"activeService": "active", "previewService": "preview",
               "autoPromotionEnabled": false, "abortScaleDownDelaySeconds": 30}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.pause_reasons(), vec!["BlueGreenPause".to_string()]);
    w.ro.status.as_mut().unwrap().abort = Some(true);
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(
        w.image_behind("preview").as_deref(),
        Some("app:v2"),
        "the aborted version stays reachable behind the preview"
    );
    assert!(
        w.rs_with_image("app:v2")
            .annotation(SCALE_DOWN_DEADLINE)
            .is_some()
    );

    w.advance(5);
    w.ro.status.as_mut().unwrap().abort = Some(false);
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused, "{:#?}", w.status());
    assert_eq!(w.pause_reasons(), vec!["BlueGreenPause".to_string()]);
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(
        w.rs_with_image("app:v2").annotation(SCALE_DOWN_DEADLINE),
        None
    );
}

#[test]
fn preview_replica_count_with_auto_promotion_seconds_analyses_and_pauses_at_preview_size() {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview",
               "previewReplicaCount": 1, "autoPromotionSeconds": 20,
               "prePromotionAnalysis": {"templates": [{"templateName": "health"}]}}),
    ));
    w.add_template("health");
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 1)]
    );
    assert_eq!(
        w.runs_of("PrePromotion").len(),
        1,
        "analysed at preview size"
    );
    assert!(w.pause_reasons().is_empty(), "no pause before the analysis");
    assert_eq!(
        w.status()
            .blue_green
            .as_ref()
            .unwrap()
            .scale_up_preview_check_point,
        None
    );

    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    let events = w.settle_bg_events();
    // As Argo: the run's new phase is told, then the pause.
    assert_eq!(
        events,
        vec![
            "AnalysisRunSuccessful: PrePromotion Analysis Run 'demo-5dbbcbcd95-2-pre' Status \
             New: 'Successful' Previous: 'Pending'",
            "RolloutPaused: Rollout is paused (BlueGreenPause)"
        ]
    );
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.status().message.as_deref(), Some("BlueGreenPause"));
    w.advance(19);
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 1)]
    );

    w.advance(1);
    let events = w.settle_bg_events();
    let v2 = w.rs_with_image("app:v2").name().to_string();
    let up = format!("ScalingReplicaSet: Scaled up ReplicaSet {v2} (revision 2) from 1 to 3");
    let up_at = events.iter().position(|e| *e == up);
    let switch_at = events
        .iter()
        .position(|e| e.starts_with("SwitchService: Switched selector for service 'active'"));
    assert!(
        up_at.is_some() && switch_at.is_some() && up_at < switch_at,
        "{events:#?}"
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert!(w.pause_reasons().is_empty());
    assert_eq!(w.status().controller_pause, None);
    assert_eq!(w.runs_of("PrePromotion").len(), 1);
}

#[test]
fn preview_replica_count_with_auto_promotion_waits_for_pre_promotion_analysis() {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview",
               "previewReplicaCount": 1,
               "prePromotionAnalysis": {"templates": [{"templateName": "health"}]}}),
    ));
    w.add_template("health");
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    w.advance(600);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 1)],
        "held at preview size while the analysis runs"
    );
    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    let events = w.settle_bg_events();
    assert!(
        !events.iter().any(|e| e.starts_with("RolloutPaused")),
        "{events:#?}"
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
}

#[test]
fn blue_green_counts_are_the_active_replica_sets() {
    let mut w = World::bg(bg_rollout(
        3,
        json!({"activeService": "active", "previewService": "preview",
               "autoPromotionEnabled": false}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    let v1 = w.hash_of("app:v1");
    let s = w.status();
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas,
            s.hpa_replicas
        ),
        (Some(6), Some(3), Some(3), Some(3), Some(3)),
        "{s:#?}"
    );
    assert!(s.selector.as_deref().unwrap().contains(&v1), "{s:#?}");

    // Once switched, the new ReplicaSet's counts and selector.
    w.promote();
    w.settle_bg();
    let v2 = w.hash_of("app:v2");
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    let s = w.status();
    assert_eq!(s.available_replicas, Some(3), "{s:#?}");
    assert!(s.selector.as_deref().unwrap().contains(&v2), "{s:#?}");

    // A preview that never becomes available does not change what the active pods serve.
    w.bad_images = vec!["app:v3".into()];
    w.set_image("app:v3");
    w.settle_bg();
    let s = w.status();
    assert_eq!(
        (s.ready_replicas, s.available_replicas, s.hpa_replicas),
        (Some(3), Some(3), Some(3)),
        "{s:#?}"
    );
    assert!(s.selector.as_deref().unwrap().contains(&v2), "{s:#?}");
}

#[test]
fn an_undo_to_a_scaled_down_preview_names_its_new_revision() {
    // A live scenario found it (seed 5): the scale-up of the ReplicaSet an undo reuses said
    // its old revision, the same message as its first scale-up, which the event API folds into
    // that old event; Argo names the revision it is given.
    let mut w = World::bg(bg_rollout(
        2,
        json!({"activeService": "active", "scaleDownDelaySeconds": 2, "autoPromotionEnabled": false}),
    ));
    w.settle_bg();
    w.advance(30);
    w.set_image("app:v2");
    w.settle_bg();
    w.advance(30);
    w.set_image("app:v3");
    w.settle_bg();
    w.advance(30);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![
            ("app:v1".into(), 2),
            ("app:v2".into(), 0),
            ("app:v3".into(), 2)
        ]
    );
    w.advance(30);
    w.set_image("app:v2");
    let v2 = w.rs_named_by_image("app:v2");
    let events = w.settle_bg_events();
    assert!(
        events.contains(&format!(
            "ScalingReplicaSet: Scaled up ReplicaSet {v2} (revision 4) from 0 to 2"
        )),
        "{events:#?}"
    );
}

#[test]
fn a_user_pause_holds_the_promotion_not_the_preview() {
    // A live scenario found it (seed 185): under Argo, a blue-green update made while the
    // Rollout is paused gets its ReplicaSet, scaled up as the preview, and its pre-promotion
    // analysis; only the switch waits for the resume.
    let mut w = World::bg(bg_rollout(2, json!({"activeService": "active"})));
    w.settle_bg();
    w.ro.spec.paused = Some(true);
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 2)]
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    w.ro.spec.paused = Some(false);
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
}

/// The reasons of `events` (`reason: message`), in order, without the scalings.
fn reasons(events: &[String]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| e.split(':').next())
        .filter(|r| *r != "ScalingReplicaSet")
        .collect()
}

#[test]
fn a_passed_pre_promotion_analysis_is_told_after_the_switch_it_allows() {
    // Argo switches the active Service before it reads its runs again: the switch, then the
    // run's new phase (seeds 203, 218, 262 of the live scenarios).
    let mut w = analysed_v2(
        2,
        json!({"activeService": "active", "previewService": "preview",
               "prePromotionAnalysis": {"templates": [{"templateName": "health"}]}}),
    );
    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    let events = w.settle_bg_events();
    assert_eq!(
        reasons(&events)[..3],
        ["SwitchService", "AnalysisRunSuccessful", "RolloutCompleted"],
        "{events:#?}"
    );
}

#[test]
fn an_abort_on_a_failed_post_promotion_analysis_is_told_before_the_switch_back() {
    // Argo aborts in the pass that sees the run fail and switches back in the next one
    // (seed 242 of the live scenarios).
    let mut w = analysed_v2(
        2,
        json!({"activeService": "active",
               "postPromotionAnalysis": {"templates": [{"templateName": "health"}]}}),
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    w.verdict("PostPromotion", AnalysisPhase::Failed, "it failed");
    let events = w.settle_bg_events();
    assert_eq!(
        reasons(&events)[..3],
        ["AnalysisRunFailed", "RolloutAborted", "SwitchService"],
        "{events:#?}"
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
}
