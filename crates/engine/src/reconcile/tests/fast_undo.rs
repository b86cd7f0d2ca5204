//! `undo --fast`: the annotation naming the template an undo went back to makes that update
//! skip the steps, pauses and analyses, and goes once the update is over or superseded.

use serde_json::json;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;

use super::analysis_retry::settle_with_events;
use super::{World, analysis_world, rollout};
use crate::ReplicaSetExt;
use crate::reconcile::fast_undo::FAST_UNDO;

/// A canary with a 50% step and a step analysis, updated to v2 and then v3 through it.
fn at_v3() -> World {
    let ro = rollout(
        2,
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
    );
    let mut w = analysis_world(ro);
    for image in ["app:v2", "app:v3"] {
        w.advance(60);
        w.set_image(image);
        w.settle();
        w.verdict("Step", AnalysisPhase::Successful, "");
        w.settle();
        assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    }
    w
}

fn hash_of(w: &World, image: &str) -> String {
    let rs = w.rss.iter().find(|r| World::image_of(r) == image).unwrap();
    rs.pod_hash().unwrap().to_string()
}

fn annotate(w: &mut World, hash: &str) {
    w.ro.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(FAST_UNDO.to_string(), hash.to_string());
}

fn annotation(w: &World) -> Option<&String> {
    w.ro.metadata.annotations.as_ref()?.get(FAST_UNDO)
}

#[test]
fn a_fast_undo_skips_steps_and_analysis_and_then_goes() {
    let mut w = at_v3();
    let runs = w.runs.len();
    let v2 = hash_of(&w, "app:v2");
    w.advance(60);
    annotate(&mut w, &v2);
    w.set_image("app:v2");
    let events = settle_with_events(&mut w);
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), runs, "no new analysis");
    assert_eq!(w.status().stable_rs.as_deref(), Some(v2.as_str()));
    assert!(!events.iter().any(|e| e.reason == "RolloutPaused"));
    assert!(
        events
            .iter()
            .any(|e| e.reason == "SkipSteps" && e.message.starts_with("Fast undo")),
        "{events:#?}"
    );
    let completed = events
        .iter()
        .rfind(|e| e.reason == "RolloutCompleted")
        .unwrap();
    assert!(completed.message.ends_with("): Fast undo"), "{completed:?}");
    assert_eq!(annotation(&w), None, "removed once the undo is stable");

    // The next update back to v3 walks its steps and analysis again.
    w.advance(60);
    w.set_image("app:v3");
    w.settle();
    assert_eq!(w.runs.len(), runs + 1, "analysed");
    assert_eq!(w.phase(), RolloutPhase::Progressing);
}

#[test]
fn the_same_undo_without_the_annotation_walks_the_steps() {
    let mut w = at_v3();
    let runs = w.runs.len();
    w.advance(60);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.runs.len(), runs + 1, "a new step analysis");
    assert_eq!(w.phase(), RolloutPhase::Progressing);
}

#[test]
fn an_annotation_for_another_template_is_removed_and_changes_nothing() {
    let mut w = at_v3();
    let runs = w.runs.len();
    let v2 = hash_of(&w, "app:v2");
    annotate(&mut w, &v2);
    w.advance(60);
    w.set_image("app:v4");
    w.settle();
    assert_eq!(annotation(&w), None, "superseded");
    assert_eq!(w.runs.len(), runs + 1, "v4 is analysed");
    assert_eq!(w.phase(), RolloutPhase::Progressing);
}
