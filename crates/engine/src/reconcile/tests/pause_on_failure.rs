//! `rollouts.sluice.dev/on-analysis-failure: pause`: a failed analysis pauses the update
//! instead of aborting it; a person then promotes (which measures again) or aborts.

use super::*;
use crate::update_analysis::ON_ANALYSIS_FAILURE;

/// `ro` with `rollouts.sluice.dev/on-analysis-failure: <value>`.
fn on_failure(mut ro: Rollout, value: &str) -> Rollout {
    ro.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ON_ANALYSIS_FAILURE.to_string(), value.to_string());
    ro
}

fn pausing_world(steps: serde_json::Value) -> World {
    analysis_world(on_failure(rollout(4, steps), "pause"))
}

#[test]
fn a_failed_step_analysis_pauses_holds_the_pods_and_a_promote_measures_again() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}},
        {"setWeight": 50}
    ]);
    let mut w = pausing_world(steps);
    w.set_image("app:v2");
    w.settle();
    let before = w.replicas_by_image();
    w.verdict(
        "Step",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    let plan = w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused, "{:#?}", w.status());
    assert_eq!(w.status().abort, None, "not aborted");
    assert_eq!(w.pause_reasons(), vec!["FailedAnalysisRun".to_string()]);
    assert_eq!(w.status().message.as_deref(), Some("FailedAnalysisRun"));
    assert_eq!(w.replicas_by_image(), before, "the pods stay as they are");
    assert!(
        plan.waits.iter().any(|wait| matches!(
            wait,
            crate::waits::Wait::AnalysisFailedPaused { run } if !run.is_empty()
        )),
        "{:?}",
        plan.waits
    );
    // Time does not move it on.
    w.advance(600);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.replicas_by_image(), before);

    // A promote measures again; this time the run passes and the steps go on.
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 2, "measured again");
    assert_eq!(w.status().current_step_index, Some(1));
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn a_failed_background_analysis_pauses_and_an_abort_still_goes_back() {
    let mut ro = rollout(4, json!([{"setWeight": 25}, {"pause": {}}]));
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .analysis =
        Some(serde_json::from_value(json!({"templates": [{"templateName": "health"}]})).unwrap());
    let mut w = analysis_world(on_failure(ro, "pause"));
    w.set_image("app:v2");
    w.settle();
    w.verdict("Background", AnalysisPhase::Error, "consecutiveErrors");
    w.settle();
    assert_eq!(w.status().abort, None);
    assert!(
        w.pause_reasons().contains(&"FailedAnalysisRun".to_string()),
        "{:?}",
        w.pause_reasons()
    );
    w.ro.status.as_mut().unwrap().abort = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
}

#[test]
fn without_the_annotation_a_failed_analysis_aborts_as_in_argo() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut w = analysis_world(on_failure(rollout(4, steps), "abort"));
    w.set_image("app:v2");
    w.settle();
    w.verdict(
        "Step",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(w.status().abort, Some(true));
}
