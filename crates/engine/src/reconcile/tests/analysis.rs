//! Analyses of an update: background and step analyses of a canary, blue-green pre- and
//! post-promotion analyses, inconclusive runs and the history of finished runs.

use super::*;

#[test]
fn inconclusive_background_analysis_holds_the_update_through_a_timed_pause_until_resumed() {
    let ro = with_background_analysis(
        rollout(
            4,
            json!([{"setWeight": 25}, {"pause": {"duration": "30s"}}, {"setWeight": 50}]),
        ),
        0,
    );
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.runs_of("Background").len(), 1);
    let run = w.runs_of("Background")[0].clone();
    let hash = w.status().current_pod_hash.clone().unwrap();
    let first = format!("demo-{hash}-2");
    assert_eq!(run.metadata.name.as_deref(), Some(first.as_str()));
    assert_eq!(w.status().current_step_index, Some(1), "at the timed pause");

    w.verdict(
        "Background",
        AnalysisPhase::Inconclusive,
        "Metric \"m\" assessed Inconclusive",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.pause_reasons(),
        vec![
            "CanaryPauseStep".to_string(),
            "InconclusiveAnalysisRun".to_string()
        ]
    );
    assert_eq!(
        w.status()
            .canary
            .as_ref()
            .and_then(|c| c.current_background_analysis_run_status.as_ref())
            .and_then(|r| r.status.clone()),
        Some(AnalysisPhase::Inconclusive)
    );
    // The timed step runs out as in Argo; the Inconclusive pause still holds the update: no
    // scaling to the next weight, no new run.
    for _ in 0..10 {
        w.advance(30);
        w.settle();
        assert_eq!(w.phase(), RolloutPhase::Paused);
        assert_eq!(
            w.status().current_step_index,
            Some(2),
            "the timed step completed"
        );
        assert_eq!(
            w.pause_reasons(),
            vec!["InconclusiveAnalysisRun".to_string()]
        );
        assert_eq!(
            w.status().message.as_deref(),
            Some("InconclusiveAnalysisRun")
        );
        assert_eq!(
            w.replicas_by_image(),
            vec![("app:v1".into(), 3), ("app:v2".into(), 1)],
            "held at the old weight"
        );
        assert_eq!(w.runs.len(), 1, "no run is re-created while Inconclusive");
        assert_ne!(w.runs[0].spec.terminate, Some(true), "nor terminated");
    }

    // A resume measures again with a new run; the update goes on meanwhile.
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.runs_of("Background")
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect::<Vec<_>>(),
        vec![first.clone(), format!("{first}.1")]
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 4)]
    );
}

#[test]
fn failed_background_analysis_aborts_with_the_run_message() {
    let ro = with_background_analysis(rollout(4, json!([{"setWeight": 25}, {"pause": {}}])), 0);
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    w.verdict(
        "Background",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(w.status().abort, Some(true));
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "RolloutAborted: Rollout aborted update to revision 2: Background analysis phase error/failed: Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)"
        )
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
    // The reason stays on later passes.
    w.advance(5);
    w.settle();
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .contains("failureLimit")
    );
}

#[test]
fn promote_full_after_a_failed_background_analysis_promotes() {
    // A live scenario found it (seeds 232, 290): Argo skips analysis on a full promotion, so
    // the failed run that aborted the update does not abort it again.
    let ro = with_background_analysis(rollout(2, json!([{"setWeight": 50}, {"pause": {}}])), 0);
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    w.verdict("Background", AnalysisPhase::Failed, "failed");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 2)]
    );
}

#[test]
fn a_user_pause_does_not_hold_a_step_analysis() {
    // A live scenario found it (seed 274): under Argo, the analysis of the current step runs
    // while a user pauses the Rollout, and its failure aborts the update.
    let ro = rollout(
        2,
        json!([{"analysis": {"templates": [{"templateName": "health"}]}}, {"pause": {}}]),
    );
    let mut w = analysis_world(ro);
    w.ro.spec.paused = Some(true);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 1, "{:#?}", w.status());
    w.verdict("Step", AnalysisPhase::Failed, "failed");
    w.settle();
    assert_eq!(w.status().abort, Some(true));
}

#[test]
fn promote_full_after_a_failed_pre_promotion_analysis_promotes_without_new_runs() {
    // A live scenario found it (seeds 173, 204): a full promotion reads no analysis verdict,
    // and must then start no run either (one was started on every pass).
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    w.verdict("PrePromotion", AnalysisPhase::Failed, "failed");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    let runs = w.runs.len();
    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle_bg();
    assert_eq!(w.runs.len(), runs, "no run started by the full promotion");
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
}

#[test]
fn background_analysis_waits_for_its_starting_step_and_stops_when_the_update_completes() {
    let ro = with_background_analysis(
        rollout(
            4,
            json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}]),
        ),
        2,
    );
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    assert!(w.runs.is_empty(), "step 1 is before startingStep 2");
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Background").len(), 1);
    assert_eq!(
        w.phase(),
        RolloutPhase::Healthy,
        "background analysis does not block"
    );
    assert_eq!(
        w.runs[0].spec.terminate,
        Some(true),
        "terminated once complete"
    );
}

#[test]
fn the_progress_deadline_does_not_run_at_experiment_and_analysis_steps() {
    let steps = json!([
        {"setWeight": 25},
        {"experiment": {"templates": [{"name": "canary", "specRef": "canary"}]}},
        {"analysis": {"templates": [{"templateName": "health"}]}},
        {"setWeight": 50}
    ]);
    let mut ro = rollout(4, steps);
    ro.spec.progress_deadline_seconds = Some(30);
    let mut w = analysis_world(ro);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1));
    assert_eq!(w.experiments.len(), 1);
    // The Experiment takes longer than the deadline: the update still progresses.
    w.advance(31);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Progressing, "{:#?}", w.status());
    w.experiments[0].status = Some(serde_json::from_value(json!({"phase": "Successful"})).unwrap());
    w.settle();
    assert_eq!(w.status().current_step_index, Some(2));
    // So does the analysis.
    w.advance(31);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Progressing, "{:#?}", w.status());
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn analysis_step_waits_for_success_and_a_failure_aborts() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}},
        {"setWeight": 50}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1));
    let runs = w.runs_of("Step");
    assert_eq!(runs.len(), 1);
    let labels = runs[0].metadata.labels.clone().unwrap();
    assert_eq!(labels["step-index"], "1");
    w.advance(60);
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1), "still measuring");
    assert_eq!(w.runs.len(), 1);
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());

    w.set_image("app:v3");
    w.settle();
    assert_eq!(
        w.runs_of("Step").len(),
        2,
        "a new revision gets its own run"
    );
    w.verdict(
        "Step",
        AnalysisPhase::Error,
        "Metric \"m\" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4)",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .contains("consecutiveErrorLimit")
    );
}

/// An update of four replicas paused at its analysis step, whose run was Inconclusive.
fn paused_on_an_inconclusive_step() -> World {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    w.verdict("Step", AnalysisPhase::Inconclusive, "");
    w.settle();
    w
}

#[test]
fn a_resume_after_an_inconclusive_step_analysis_measures_again() {
    let mut w = paused_on_an_inconclusive_step();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.status().message.as_deref(),
        Some("InconclusiveAnalysisRun")
    );
    w.advance(600);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.runs.len(), 1);

    // Resumed: a new run for the step; still Inconclusive, it pauses again.
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 2, "measured again");
    assert_eq!(w.status().current_step_index, Some(1));
    assert_eq!(w.status().controller_pause, None, "the resume was acted on");
    w.verdict("Step", AnalysisPhase::Inconclusive, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.pause_reasons(),
        vec!["InconclusiveAnalysisRun".to_string()]
    );

    // Resumed again: this time the run fails and the update is aborted.
    w.promote();
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 3);
    w.verdict(
        "Step",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase error/failed: Metric \"m\" assessed Failed"
        )
    );
}

/// The reconcile after a resume may not see the run it created yet (the cache lags): the
/// Inconclusive run before it is done with, and must not pause the update again.
#[test]
fn a_resume_is_not_undone_by_a_cache_without_the_new_run() {
    let mut w = paused_on_an_inconclusive_step();
    assert_eq!(
        w.pause_reasons(),
        vec!["InconclusiveAnalysisRun".to_string()]
    );

    w.promote();
    w.reconcile();
    assert_eq!(w.runs_of("Step").len(), 2, "measured again");
    let created = w.runs.pop().expect("the new run");
    let plan = w.reconcile();
    assert!(
        w.pause_reasons().is_empty(),
        "paused again on the resumed run: {:?}",
        w.status().pause_conditions
    );
    // It asks for the recorded run again (the API server answers 409), never for another.
    for action in &plan.actions {
        if let Action::CreateAnalysisRun { run } = action {
            assert_eq!(run.metadata.name, created.metadata.name);
        }
    }
    w.runs.retain(|r| r.metadata.name != created.metadata.name);
    w.runs.push(created);
    w.settle();
    assert_eq!(w.runs_of("Step").len(), 2, "no third run");
    assert!(w.pause_reasons().is_empty());
    assert_eq!(w.phase(), RolloutPhase::Progressing);
}

#[test]
fn a_resume_after_an_inconclusive_step_analysis_passes_on_success() {
    let steps = json!([
        {"setWeight": 25},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut w = analysis_world(rollout(4, steps));
    w.set_image("app:v2");
    w.settle();
    w.verdict("Step", AnalysisPhase::Inconclusive, "");
    w.settle();
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Progressing, "{:#?}", w.status());
    w.verdict("Step", AnalysisPhase::Successful, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), 2);
}

#[test]
fn a_missing_template_is_an_invalid_spec_that_changes_nothing() {
    let ro = with_background_analysis(rollout(2, json!([{"setWeight": 50}])), 0);
    let mut w = analysis_world(ro);
    w.templates.clear();
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    // Argo's controller reports it as a field error at the analysis's templates.
    assert_eq!(
        w.status().message.as_deref(),
        Some(
            "InvalidSpec: The Rollout \"demo\" is invalid: spec.strategy.canary.analysis.templates: Invalid value: \"health\": AnalysisTemplate 'health' not found"
        )
    );
    assert!(w.runs.is_empty());
}

#[test]
fn blue_green_pre_promotion_analysis_holds_the_switch_until_it_passes() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    let runs = w.runs_of("PrePromotion");
    assert_eq!(runs.len(), 1, "started once the preview is up");
    let hash = w.status().current_pod_hash.clone().unwrap();
    assert_eq!(
        runs[0].metadata.name.as_deref(),
        Some(format!("demo-{hash}-2-pre").as_str())
    );
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
    w.advance(600);
    w.settle_bg();
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v1"),
        "still waiting"
    );
    // What it waits for, as `explain` says it.
    let plan = w.reconcile();
    assert!(
        plan.waits.contains(&crate::Wait::AnalysisRunning {
            run: format!("demo-{hash}-2-pre")
        }),
        "{:?}",
        plan.waits
    );

    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), 1);
}

#[test]
fn blue_green_failed_pre_promotion_analysis_aborts_without_switching() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    w.verdict(
        "PrePromotion",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    assert_eq!(w.image_behind("preview").as_deref(), Some("app:v2"));
}

#[test]
fn blue_green_inconclusive_pre_promotion_pauses_and_a_resume_measures_again() {
    let mut w = bg_analysis_world("prePromotionAnalysis");
    w.set_image("app:v2");
    w.settle_bg();
    w.verdict("PrePromotion", AnalysisPhase::Inconclusive, "");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert!(
        w.pause_reasons()
            .contains(&"InconclusiveAnalysisRun".to_string())
    );
    w.advance(600);
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v1"));
    w.promote();
    w.settle_bg();
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v1"),
        "measuring again"
    );
    assert_eq!(w.runs_of("PrePromotion").len(), 2);
    w.verdict("PrePromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v2"));
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
}

#[test]
fn blue_green_post_promotion_analysis_keeps_the_old_pods_and_switches_back_on_failure() {
    let mut w = bg_analysis_world("postPromotionAnalysis");
    let v1 = w.status().current_pod_hash.clone();
    w.set_image("app:v2");
    w.settle_bg();
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v2"),
        "switched"
    );
    assert_eq!(w.runs_of("PostPromotion").len(), 1);
    assert_eq!(
        w.status().stable_rs,
        v1,
        "not stable before the analysis passes"
    );
    // Long past scaleDownDelaySeconds: the previous pods stay while the analysis runs.
    w.advance(60);
    w.settle_bg();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 2)]
    );

    w.verdict(
        "PostPromotion",
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    );
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.image_behind("active").as_deref(),
        Some("app:v1"),
        "switched back"
    );
    assert_eq!(w.status().stable_rs, v1);

    // A good revision after that: post analysis passes, the new pods become stable.
    w.set_image("app:v3");
    w.settle_bg();
    w.verdict("PostPromotion", AnalysisPhase::Successful, "");
    w.settle_bg();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.image_behind("active").as_deref(), Some("app:v3"));
    assert_eq!(w.status().stable_rs, w.status().current_pod_hash);
}

#[test]
fn no_set_weight_step_completes_while_paused_on_an_inconclusive_run() {
    let ro = with_background_analysis(
        rollout(
            4,
            json!([{"setWeight": 25}, {"setWeight": 50}, {"setWeight": 75}]),
        ),
        0,
    );
    let mut w = analysis_world(ro);
    // The canary pods are slow: the verdict lands before the first step is reached.
    w.bad_images.push("app:v2".into());
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.status().current_step_index, Some(0));
    w.verdict("Background", AnalysisPhase::Inconclusive, "");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    // The pods come up: still held on step 0, nothing promoted.
    w.bad_images.clear();
    w.settle_pods();
    for _ in 0..5 {
        w.advance(60);
        w.settle();
        assert_eq!(w.status().current_step_index, Some(0), "{:#?}", w.status());
        assert_ne!(w.status().stable_rs, w.status().current_pod_hash);
        assert_eq!(w.phase(), RolloutPhase::Paused);
    }
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.runs.len(), 2, "the resume measured again");
}

#[test]
fn finished_runs_are_kept_to_the_history_limits() {
    let steps = json!([
        {"setWeight": 50},
        {"analysis": {"templates": [{"templateName": "health"}]}}
    ]);
    let mut ro = rollout(2, steps);
    ro.spec.analysis = Some(
        serde_json::from_value(
            json!({"successfulRunHistoryLimit": 2, "unsuccessfulRunHistoryLimit": 1}),
        )
        .unwrap(),
    );
    let mut w = analysis_world(ro);
    for (i, phase) in [
        AnalysisPhase::Successful,
        AnalysisPhase::Failed,
        AnalysisPhase::Successful,
        AnalysisPhase::Failed,
        AnalysisPhase::Successful,
        AnalysisPhase::Successful,
    ]
    .into_iter()
    .enumerate()
    {
        w.advance(10);
        w.set_image(&format!("app:v{}", i + 2));
        w.settle();
        w.verdict("Step", phase, "");
        w.settle();
    }
    let kept: Vec<(String, AnalysisPhase)> = w
        .runs
        .iter()
        .map(|r| {
            (
                r.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"].clone(),
                r.status.as_ref().unwrap().phase.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kept,
        vec![
            ("5".to_string(), AnalysisPhase::Failed),
            ("6".to_string(), AnalysisPhase::Successful),
            ("7".to_string(), AnalysisPhase::Successful),
        ],
        "newest two successful and newest unsuccessful"
    );
}
