//! A retried update measures afresh: the runs of the aborted attempt are history, and each
//! analysis the retried update reaches gets a new run (named with a `.<n>` suffix when the
//! name is taken). The abort carries Argo's wording: which analysis, and its run's message.

use serde_json::json;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;

use super::{World, analysis_world, bg_analysis_world, rollout, with_background_analysis};
use crate::plan::Event;

const FAILED: &str = "Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)";

/// Reconciles until nothing changes, returning every event on the way.
pub(super) fn settle_with_events(w: &mut World) -> Vec<Event> {
    let mut events = Vec::new();
    for _ in 0..50 {
        let before = (w.ro.clone(), w.rss.clone(), w.pods.clone());
        events.extend(w.reconcile().events);
        if before.0 == w.ro && before.1 == w.rss && before.2 == w.pods {
            return events;
        }
    }
    panic!("did not settle: {:#?}", w.ro.status);
}

fn retry(w: &mut World) {
    w.ro.status.as_mut().unwrap().abort = Some(false);
}

fn names(w: &World, kind: &str) -> Vec<String> {
    w.runs_of(kind)
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect()
}

fn phase_of(w: &World, name: &str) -> Option<AnalysisPhase> {
    w.runs
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
        .and_then(|r| r.status.as_ref())
        .and_then(|s| s.phase.clone())
}

#[test]
fn a_failed_step_analysis_aborts_with_argos_message_and_a_retry_measures_again() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}},
        {"setWeight": 50}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    let hash = w.status().current_pod_hash.clone().unwrap();
    let first = format!("demo-{hash}-2-1");
    assert_eq!(names(&w, "Step"), vec![first.clone()]);

    w.verdict("Step", AnalysisPhase::Failed, FAILED);
    let events = settle_with_events(&mut w);
    let expected = format!(
        "Rollout aborted update to revision 2: Step-based analysis phase error/failed: {FAILED}"
    );
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().message.as_deref(),
        Some(format!("RolloutAborted: {expected}").as_str())
    );
    let aborted: Vec<&str> = events
        .iter()
        .filter(|e| e.reason == "RolloutAborted")
        .map(|e| e.message.as_str())
        .collect();
    assert_eq!(aborted, vec![expected.as_str()], "the event says why");

    retry(&mut w);
    w.settle();
    assert_ne!(w.phase(), RolloutPhase::Degraded, "{:#?}", w.status());
    assert_ne!(w.status().abort, Some(true));
    assert_eq!(
        w.status().current_step_index,
        Some(1),
        "back at the analysis"
    );
    let second = format!("{first}.1");
    assert_eq!(
        names(&w, "Step"),
        vec![first.clone(), second.clone()],
        "a new run for the retried step"
    );
    assert_eq!(phase_of(&w, &first), Some(AnalysisPhase::Failed));
    assert!(
        w.runs[0]
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(super::super::analysis::SUPERSEDED_BY_RETRY)),
        "the aborted attempt's run is marked as history"
    );
    assert_eq!(
        w.status()
            .canary
            .as_ref()
            .and_then(|c| c.current_step_analysis_run_status.as_ref())
            .and_then(|r| r.name.clone()),
        Some(second)
    );

    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn a_retry_after_a_failed_background_analysis_starts_a_new_run() {
    let ro = with_background_analysis(rollout(4, json!([{"setWeight": 25}, {"pause": {}}])), 0);
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    let first = names(&w, "Background");
    assert_eq!(first.len(), 1);
    w.verdict(
        "Background",
        AnalysisPhase::Error,
        "Metric \"m\" assessed Error",
    );
    w.settle();
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "RolloutAborted: Rollout aborted update to revision 2: Background analysis phase error/failed: Metric \"m\" assessed Error"
        )
    );

    retry(&mut w);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused, "{:#?}", w.status());
    assert_eq!(
        names(&w, "Background"),
        vec![first[0].clone(), format!("{}.1", first[0])]
    );
    // The new run measures; the retried update holds no stale verdict.
    w.advance(30);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.runs_of("Background").len(), 2);
}

#[test]
fn a_retry_reaching_a_later_analysis_step_measures_it_again() {
    // The analysis is not the step a retry returns to: its old run is found again only once
    // the steps reach it, and must not be taken for the current one.
    let steps = json!([
        {"setWeight": 25},
        {"pause": {}},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 1);
    w.verdict("Step", AnalysisPhase::Failed, FAILED);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);

    retry(&mut w);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused, "at the pause step again");
    assert_eq!(w.runs_of("Step").len(), 1);
    w.promote();
    w.settle();
    assert_ne!(w.phase(), RolloutPhase::Degraded, "{:#?}", w.status());
    assert_eq!(w.runs_of("Step").len(), 2, "measured again");
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn a_retry_after_a_failed_pre_promotion_analysis_starts_a_new_run() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    w.verdict("PrePromotion", AnalysisPhase::Failed, FAILED);
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            format!(
                "RolloutAborted: Rollout aborted update to revision 2: Blue/green pre-promotion analysis phase error/failed: {FAILED}"
            )
            .as_str()
        )
    );

    retry(&mut w);
    w.settle_bg();
    assert_ne!(w.phase(), RolloutPhase::Degraded, "{:#?}", w.status());
    let runs = names(&w, "PrePromotion");
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[1], format!("{}.1", runs[0]));
    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

/// An analysis naming no templates runs nothing, as in Argo: a background one is no gate, and
/// a step one holds its step (no run can pass it) until a person promotes.
#[test]
fn an_analysis_without_templates_starts_no_run_and_its_step_waits_for_a_promotion() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": []}},
        {"setWeight": 50}
    ]);
    let mut ro = rollout(4, steps);
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .analysis = Some(serde_json::from_value(json!({"templates": []})).unwrap());
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Progressing, "{:#?}", w.status());
    assert_eq!(w.status().current_step_index, Some(1));
    w.advance(600);
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1), "the step waits");
    assert!(w.runs.is_empty(), "no run: {:?}", w.runs);
    // `promote` of an update that is not paused skips the current step, as Argo's CLI does.
    w.ro.status.as_mut().unwrap().current_step_index = Some(2);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert!(w.runs.is_empty());
}

/// As Argo: a canary without steps has no step index, so a background analysis starts
/// whatever its `startingStep` (live scenario seed 162).
#[test]
fn a_canary_without_steps_starts_its_background_analysis_whatever_its_starting_step() {
    let mut w = analysis_world(with_background_analysis(rollout(2, json!([])), 1));
    w.slow_scale_down = true;
    w.bad_images.push("app:v2".into());
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, None);
    assert_eq!(w.runs_of("Background").len(), 1, "{:?}", w.runs);
}
