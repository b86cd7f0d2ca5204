//! Analysis steps and background analysis gating the partition.

use super::*;

/// Steps with an analysis between two weights.
fn analysis_steps() -> Value {
    json!([{"setWeight": 25}, {"analysis": {"templates": [{"templateName": "t"}]}}, {"setWeight": 50}])
}

/// The runs the plan creates, as the API server returns them (created at `now`), in `phase`.
fn created_runs(
    plan: &Plan,
    now: Timestamp,
    phase: AnalysisPhase,
    message: &str,
) -> Vec<AnalysisRun> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateAnalysisRun { run } => Some(run.as_ref().clone()),
            _ => None,
        })
        .map(|mut run| {
            run.metadata.creation_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            with_phase(run, phase.clone(), message)
        })
        .collect()
}

fn with_phase(mut run: AnalysisRun, phase: AnalysisPhase, message: &str) -> AnalysisRun {
    let status = run.status.get_or_insert_with(Default::default);
    status.phase = Some(phase);
    status.message = (!message.is_empty()).then(|| message.to_string());
    run
}

fn step_run(plan: &Plan) -> Option<(String, Option<AnalysisPhase>)> {
    let record = plan
        .status
        .canary
        .as_ref()?
        .current_step_analysis_run_status
        .as_ref()?;
    Some((record.name.clone()?, record.status.clone()))
}

/// A Rollout with `steps` (and `background`) that adopted revision `a`, updated to `b`, and
/// whose first step (setWeight 25) is done: at step 1.
fn at_second_step(steps: Value, background: Option<Value>) -> (Rollout, Plan) {
    let mut ro = rollout(steps, None);
    if let Some(background) = background {
        canary_mut(&mut ro).analysis = Some(serde_json::from_value(background).unwrap());
    }
    let ro = next(&ro, &decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0)));
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(11));
    (ro, plan)
}

#[test]
fn an_analysis_step_measures_the_update_revision_and_its_success_moves_on() {
    let (ro, plan) = at_second_step(analysis_steps(), None);
    assert_eq!(plan.status.current_step_index, Some(1));
    let runs = created_runs(&plan, at(11), AnalysisPhase::Running, "");
    assert_eq!(runs.len(), 1, "{:?}", plan.actions);
    let run = &runs[0];
    // Named and labelled as Argo names a step's run: the revision's hash and number.
    assert_eq!(run.metadata.name.as_deref(), Some("db-b-2-1"));
    let labels = run.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("rollouts-pod-template-hash").map(String::as_str),
        Some("b")
    );
    assert_eq!(labels.get("step-index").map(String::as_str), Some("1"));
    assert_eq!(
        run.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("rollout.argoproj.io/revision"))
            .map(String::as_str),
        Some("2")
    );
    assert_eq!(
        step_run(&plan),
        Some(("db-b-2-1".into(), Some(AnalysisPhase::Pending)))
    );
    assert!(
        matches!(&plan.waits[0], crate::Wait::AnalysisRunning { run } if run == "db-b-2-1"),
        "{:?}",
        plan.waits
    );
    assert!(
        written(&plan).is_none(),
        "the partition stays while it measures"
    );
    let ro = next(&ro, &plan);

    // Measuring: the step waits on the run, no new one.
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(20));
    assert_eq!(plan.status.current_step_index, Some(1));
    assert!(created_runs(&plan, at(20), AnalysisPhase::Running, "").is_empty());
    assert!(matches!(&plan.waits[0], crate::Wait::AnalysisRunning { run } if run == "db-b-2-1"));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Progressing));
    let ro = next(&ro, &plan);

    // Successful: the step completes, the next weight sets partition 2.
    let done = vec![with_phase(runs[0].clone(), AnalysisPhase::Successful, "")];
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &done, at(30));
    assert_eq!(plan.status.current_step_index, Some(2));
    assert_eq!(written_partition(&plan), Some(2));
    assert!(
        plan.events
            .iter()
            .any(|e| e.message == "Rollout step 2/3 completed (analysis)"),
        "{:?}",
        plan.events
    );
    // Past the analysis step, its record goes.
    let ro = next(&ro, &plan);
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &done, at(31));
    assert_eq!(step_run(&plan), None);
}

/// The analysis step's run, created at step 1, ends in `phase` with `message`: the Rollout
/// that created it, the run, and the plan of the reconcile that reads it (at 20 s).
fn step_run_ends(phase: AnalysisPhase, message: &str) -> (Rollout, Vec<AnalysisRun>, Plan) {
    let (ro, plan) = at_second_step(analysis_steps(), None);
    let runs = created_runs(&plan, at(11), phase, message);
    let ro = next(&ro, &plan);
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(20));
    (ro, runs, plan)
}

#[test]
fn a_failed_analysis_aborts_and_rolls_the_updated_ordinals_back() {
    let (ro, runs, plan) = step_run_ends(
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)",
    );
    assert_eq!(plan.status.abort, Some(true));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    let message = "RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase error/failed: Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)";
    assert_eq!(plan.status.message.as_deref(), Some(message));
    assert!(
        reasons(&plan).contains(&"AnalysisRunFailed"),
        "{:?}",
        plan.events
    );
    assert!(reasons(&plan).contains(&"RolloutAborted"));
    // The abort is recorded first: the template is not touched before the status says why
    // (a lost status write would leave the stable template looking like a rollback).
    assert!(written(&plan).is_none(), "{:?}", plan.actions);
    let ro = next(&ro, &plan);
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(20));
    let object = written(&plan).expect("the stable template written back");
    assert_eq!(object["spec"]["template"], template("a"));
    assert_eq!(
        object["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        3
    );
    assert_eq!(plan.status.message.as_deref(), Some(message));
    assert!(!reasons(&plan).contains(&"RolloutAborted"), "said once");
    let ro = next(&ro, &plan);

    // Still aborted while the ordinals roll back, with the verdict in the message.
    let mut rolling_back = sts(Some(3), "a", "a", 3, 3);
    rolling_back["spec"]["template"] = template("a");
    let plan = decide_with_runs(&ro, Some(rolling_back), &runs, at(21));
    assert_eq!(plan.status.message.as_deref(), Some(message));
    assert!(!reasons(&plan).contains(&"RolloutAborted"), "said once");
}

#[test]
fn an_inconclusive_analysis_holds_the_update_until_resumed_then_measures_again() {
    let (ro, runs, plan) = step_run_ends(
        AnalysisPhase::Inconclusive,
        "Metric \"m\" assessed Inconclusive",
    );
    assert_eq!(plan.status.phase, Some(RolloutPhase::Paused));
    let pauses: Vec<_> = plan
        .status
        .pause_conditions
        .iter()
        .flatten()
        .map(|p| p.reason.clone())
        .collect();
    assert_eq!(pauses, vec![Some(PauseReason::InconclusiveAnalysisRun)]);
    assert!(written(&plan).is_none());
    let ro = next(&ro, &plan);

    // Held: no step, no run, however long.
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(600));
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert!(
        matches!(&plan.waits[0], crate::Wait::AnalysisInconclusive { run } if run == "db-b-2-1"),
        "{:?}",
        plan.waits
    );
    assert_eq!(plan.status.current_step_index, Some(1));

    // Resumed (kubectl sluice promote clears the pause conditions): a new run measures again,
    // and the controller's pause ends.
    let mut resumed = ro.clone();
    resumed.status.as_mut().unwrap().pause_conditions = None;
    let plan = decide_with_runs(&resumed, Some(sts(Some(3), "b", "a", 1, 4)), &runs, at(601));
    let again = created_runs(&plan, at(601), AnalysisPhase::Successful, "");
    assert_eq!(again.len(), 1, "{:?}", plan.actions);
    assert_eq!(again[0].metadata.name.as_deref(), Some("db-b-2-1.1"));
    assert_eq!(plan.status.controller_pause, None);
    assert_eq!(plan.status.current_step_index, Some(1));
    let ro = next(&resumed, &plan);

    // The new run passes: the update goes on.
    let both = [runs[0].clone(), again[0].clone()];
    let plan = decide_with_runs(&ro, Some(sts(Some(3), "b", "a", 1, 4)), &both, at(610));
    assert_eq!(plan.status.current_step_index, Some(2));
    assert_eq!(written_partition(&plan), Some(2));
}

#[test]
fn background_analysis_runs_from_its_starting_step_and_its_failure_aborts() {
    let steps = json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}]);
    let background = json!({"templates": [{"templateName": "b"}], "startingStep": 1});
    let mut ro = rollout(steps.clone(), None);
    canary_mut(&mut ro).analysis = Some(serde_json::from_value(background.clone()).unwrap());
    let ro = next(&ro, &decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0)));
    // At step 0, before the starting step: no run.
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    assert!(created_runs(&plan, at(10), AnalysisPhase::Running, "").is_empty());
    let ro = next(&ro, &plan);

    // Step 0 done, at the pause (step 1): the pause holds the run back, as in Argo.
    let (ro, plan) = {
        let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(11));
        assert_eq!(plan.status.current_step_index, Some(1));
        assert!(created_runs(&plan, at(11), AnalysisPhase::Running, "").is_empty());
        let mut promoted = next(&ro, &plan);
        promoted.status.as_mut().unwrap().pause_conditions = None;
        let plan = decide(&promoted, Some(sts(Some(3), "b", "a", 1, 4)), at(12));
        (promoted, plan)
    };
    let runs = created_runs(&plan, at(12), AnalysisPhase::Running, "");
    assert_eq!(runs.len(), 1, "{:?}", plan.actions);
    assert_eq!(runs[0].metadata.name.as_deref(), Some("db-b-2"));
    let ro = next(&ro, &plan);
    assert_eq!(
        ro.status
            .as_ref()
            .unwrap()
            .canary
            .as_ref()
            .unwrap()
            .current_background_analysis_run_status
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("db-b-2")
    );

    // Running beside the steps: they go on.
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &runs, at(20));
    assert!(created_runs(&plan, at(20), AnalysisPhase::Running, "").is_empty());
    let ro = next(&ro, &plan);

    // Failed: the update is aborted, then (the abort recorded) the stable template written
    // back.
    let failed = vec![with_phase(
        runs[0].clone(),
        AnalysisPhase::Failed,
        "Metric \"m\" assessed Failed",
    )];
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &failed, at(30));
    assert_eq!(plan.status.abort, Some(true));
    assert!(written(&plan).is_none());
    let ro = next(&ro, &plan);
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &failed, at(31));
    assert_eq!(written(&plan).unwrap()["spec"]["template"], template("a"));
    assert!(
        plan.status
            .message
            .as_deref()
            .is_some_and(|m| m
                .ends_with("Background analysis phase error/failed: Metric \"m\" assessed Failed")),
        "{:?}",
        plan.status.message
    );
}

#[test]
fn a_completed_update_terminates_its_running_background_analysis() {
    let steps = json!([{"setWeight": 50}]);
    let background = json!({"templates": [{"templateName": "b"}]});
    let mut ro = rollout(steps, None);
    canary_mut(&mut ro).analysis = Some(serde_json::from_value(background).unwrap());
    let ro = next(&ro, &decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0)));
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    let runs = created_runs(&plan, at(10), AnalysisPhase::Running, "");
    assert_eq!(runs.len(), 1, "{:?}", plan.actions);
    let ro = next(&ro, &plan);
    // Half the pods on b: past the last step, every pod.
    let plan = decide_with_runs(&ro, Some(sts(Some(2), "b", "a", 2, 4)), &runs, at(20));
    assert_eq!(written_partition(&plan), Some(0));
    let ro = next(&ro, &plan);
    // Every pod on b: b is stable; the run is still read in that reconcile.
    let plan = decide_with_runs(&ro, Some(sts(Some(0), "b", "b", 4, 4)), &runs, at(21));
    assert_eq!(plan.status.stable_rs.as_deref(), Some("b"));
    let ro = next(&ro, &plan);
    // Nothing waits on the run any more: it is terminated.
    let plan = decide_with_runs(&ro, Some(sts(Some(4), "b", "b", 4, 4)), &runs, at(22));
    assert!(
        plan.actions
            .iter()
            .any(|a| matches!(a, Action::TerminateAnalysisRun { name } if name == "db-b-2")),
        "{:?}",
        plan.actions
    );
}
