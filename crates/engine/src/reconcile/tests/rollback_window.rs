//! `rollbackWindow`: going back to one of the last `revisions` ReplicaSets skips steps, pauses
//! and analyses (the scenario of Argo's own rollback-window end-to-end test); going back
//! further walks the steps and analyses like any update.

use serde_json::json;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;

use super::analysis_retry::settle_with_events;
use super::{World, analysis_world, bg_analysis_world, rollout};

/// A canary with a window of two revisions, a 50% step and a step analysis.
fn windowed() -> World {
    let mut ro = rollout(
        2,
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
    );
    ro.spec.rollback_window = Some(serde_json::from_value(json!({"revisions": 2})).unwrap());
    analysis_world(ro)
}

/// Updates to `image` and lets its step analysis succeed; each revision a minute apart.
fn update_through_analysis(w: &mut World, image: &str) {
    w.advance(60);
    w.set_image(image);
    w.settle();
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn rollback_within_the_window_skips_steps_and_analysis() {
    let mut w = windowed();
    for image in ["app:v2", "app:v3", "app:v4"] {
        update_through_analysis(&mut w, image);
    }
    assert_eq!(w.runs.len(), 3);

    // Back to v2: only v3 was created between v2 and the stable v4.
    w.advance(60);
    w.set_image("app:v2");
    let events = settle_with_events(&mut w);
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), 3, "no new analysis");
    assert!(!events.iter().any(|e| e.reason == "RolloutPaused"));
    assert_eq!(
        w.replicas_by_image(),
        vec![
            ("app:v1".into(), 0),
            ("app:v2".into(), 2),
            ("app:v3".into(), 0),
            ("app:v4".into(), 0)
        ]
    );
    let completed = events
        .iter()
        .rfind(|e| e.reason == "RolloutCompleted")
        .unwrap();
    assert!(
        completed.message.ends_with("): Rollback within window"),
        "{completed:?}"
    );
}

#[test]
fn rollback_beyond_the_window_walks_the_steps_again() {
    let mut w = windowed();
    for image in ["app:v2", "app:v3", "app:v4", "app:v5"] {
        update_through_analysis(&mut w, image);
    }
    assert_eq!(w.runs.len(), 4);

    // Back to v2: v3 and v4 lie between it and the stable v5, not fewer than 2.
    w.advance(60);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.runs.len(), 5, "a new step analysis");
    assert_eq!(w.phase(), RolloutPhase::Progressing);
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn blue_green_rollback_within_the_window_skips_analysis_and_pause() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.ro.spec.rollback_window = Some(serde_json::from_value(json!({"revisions": 1})).unwrap());
    for image in ["app:v2", "app:v3"] {
        w.advance(60);
        w.set_image(image);
        w.settle_bg();
        w.verdict("PrePromotion", AnalysisPhase::Successful, "");
        w.settle_bg();
        w.promote();
        w.settle_bg();
        // Past the old pods' scale-down delay, so only the window can fast-track.
        w.advance(60);
        w.settle_bg();
        assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    }
    let runs = w.runs.len();
    w.advance(60);
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(w.runs.len(), runs, "no new pre-promotion analysis");
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
}
