use serde_json::{Value, json};

use super::*;
use crate::experiment::fixtures::{experiment, t, template};
use crate::plan::EventType;

fn spec(analyses: Value) -> ExperimentSpec {
    serde_json::from_value(json!({
        "templates": [template("a", 1), template("b", 1)],
        "analyses": analyses
    }))
    .unwrap()
}

fn status(
    templates: &[(&str, Option<&str>, &str)],
    runs: &[(&str, &str, &str)],
) -> ExperimentStatus {
    let templates: Vec<Value> = templates
        .iter()
        .map(|(name, code, message)| json!({"name": name, "status": code, "message": message}))
        .collect();
    let runs: Vec<Value> = runs
        .iter()
        .map(|(name, phase, message)| {
            json!({"name": name, "analysisRun": "r", "phase": phase, "message": message})
        })
        .collect();
    serde_json::from_value(json!({"templateStatuses": templates, "analysisRuns": runs})).unwrap()
}

fn p(s: &str) -> AnalysisPhase {
    AnalysisPhase::from(s)
}

#[test]
fn worst_template_decides_and_maps_to_a_phase() {
    let s = spec(json!([]));
    let cases = [
        (("Successful", "Successful"), "Successful", ""),
        (("Successful", "Running"), "Running", "mb"),
        (("Running", "Progressing"), "Pending", "mb"),
        (("Progressing", "Error"), "Error", "mb"),
        (("Error", "Failed"), "Failed", "mb"),
        (("Failed", "Error"), "Failed", "ma"),
    ];
    for ((a, b), want, message) in cases {
        let st = status(&[("a", Some(a), "ma"), ("b", Some(b), "mb")], &[]);
        let (phase, msg) = assess_templates(&s, &st);
        assert_eq!(phase, p(want), "{a} {b}");
        if want != "Successful" {
            assert_eq!(msg.as_deref(), Some(message), "{a} {b}");
        }
    }
    // No status yet counts as Progressing.
    let st = status(&[("a", Some("Running"), "")], &[]);
    assert_eq!(assess_templates(&s, &st).0, AnalysisPhase::Pending);
}

#[test]
fn worst_run_decides() {
    let s = spec(json!([{"name": "x", "templateName": "t"}, {"name": "y", "templateName": "t"}]));
    let cases = [
        (("Successful", "Successful"), "Successful"),
        (("Successful", "Running"), "Running"),
        (("Running", "Pending"), "Running"),
        (("Pending", "Inconclusive"), "Inconclusive"),
        (("Inconclusive", "Error"), "Error"),
        (("Error", "Failed"), "Failed"),
        (("", "Successful"), "Successful"),
        (("", ""), "Successful"),
    ];
    for ((x, y), want) in cases {
        let st = status(&[], &[("x", x, "mx"), ("y", y, "my")]);
        assert_eq!(assess_analyses(&s, &st).0, p(want), "{x} {y}");
    }
    let st = status(&[], &[("x", "Failed", "bad"), ("y", "Running", "")]);
    assert_eq!(assess_analyses(&s, &st).1.as_deref(), Some("bad"));
}

#[test]
fn required_runs_done_is_said() {
    let s = spec(json!([
        {"name": "x", "templateName": "t", "requiredForCompletion": true},
        {"name": "y", "templateName": "t"}]));
    let st = status(&[], &[("x", "Successful", ""), ("y", "Successful", "")]);
    assert_eq!(
        assess_analyses(&s, &st),
        (
            AnalysisPhase::Successful,
            Some(REQUIRED_RUNS_COMPLETED.to_owned())
        )
    );
    // Not while another run is worse.
    let st = status(&[], &[("x", "Successful", ""), ("y", "Running", "")]);
    assert_eq!(assess_analyses(&s, &st), (AnalysisPhase::Running, None));
}

#[test]
fn combination_rules() {
    let plain = spec(json!([{"name": "x", "templateName": "t"}]));
    let required = spec(json!([{"name": "x", "templateName": "t", "requiredForCompletion": true}]));
    let st = |x: &str| status(&[], &[("x", x, "")]);
    let tp = |s: &str| (p(s), Some(format!("t:{s}")));
    let ap = |s: &str| (p(s), Some(format!("a:{s}")));
    // (spec, run phase of x, templates, analyses, wanted phase, from which side)
    let cases = [
        // Rule 5: templates finished.
        (
            &plain,
            "Successful",
            "Successful",
            "Successful",
            "Successful",
            "a",
        ),
        (
            &plain,
            "Running",
            "Successful",
            "Running",
            "Successful",
            "t",
        ),
        (
            &required,
            "Running",
            "Successful",
            "Running",
            "Running",
            "a",
        ),
        (&plain, "Failed", "Successful", "Failed", "Failed", "a"),
        (&plain, "Successful", "Failed", "Successful", "Failed", "t"),
        (&plain, "Failed", "Error", "Failed", "Error", "t"),
        // Rule 6: templates not finished.
        (&plain, "Failed", "Running", "Failed", "Failed", "a"),
        (
            &plain,
            "Inconclusive",
            "Pending",
            "Inconclusive",
            "Inconclusive",
            "a",
        ),
        (
            &plain,
            "Successful",
            "Running",
            "Successful",
            "Running",
            "t",
        ),
        (
            &required,
            "Successful",
            "Running",
            "Successful",
            "Successful",
            "a",
        ),
        (&required, "Running", "Running", "Running", "Running", "t"),
        (&plain, "Running", "Pending", "Running", "Pending", "t"),
    ];
    for (s, x, templates, analyses, want, side) in cases {
        let (phase, message) = combine(s, &st(x), tp(templates), ap(analyses));
        assert_eq!(phase, p(want), "{templates} {analyses}");
        assert!(
            message.unwrap().starts_with(&format!("{side}:")),
            "{templates} {analyses}"
        );
    }
}

fn e(status: Value) -> Experiment {
    experiment(
        json!({"duration": "60s", "templates": [template("a", 1)]}),
        status,
    )
}

#[test]
fn first_pass_only_sets_pending() {
    let ex = e(json!({}));
    let mut st = status(&[("a", Some("Running"), "")], &[]);
    let event = calculate_status(&ex, &mut st, t(10)).unwrap();
    assert_eq!(st.phase, Some(AnalysisPhase::Pending));
    assert_eq!(st.available_at, None);
    assert_eq!(event.reason, "ExperimentPending");
    assert_eq!(event.message, "Experiment transitioned from  -> Pending");
}

#[test]
fn available_at_is_set_the_first_time_templates_run() {
    let ex = e(json!({"phase": "Pending"}));
    let mut st = status(&[("a", Some("Running"), "")], &[]);
    let event = calculate_status(&ex, &mut st, t(10)).unwrap();
    assert_eq!(st.available_at, Some(Time(t(10))));
    assert_eq!(st.phase, Some(AnalysisPhase::Running));
    assert_eq!(
        (event.reason, event.message.as_str()),
        (
            "ExperimentRunning",
            "Experiment transitioned from Pending -> Running"
        )
    );
    // Kept afterwards.
    let ex = e(json!({"phase": "Running", "availableAt": "1970-01-01T00:00:10Z"}));
    let mut st = ex.status.clone().unwrap();
    st.template_statuses = status(&[("a", Some("Running"), "")], &[]).template_statuses;
    assert!(calculate_status(&ex, &mut st, t(20)).is_none());
    assert_eq!(st.available_at, Some(Time(t(10))));
}

#[test]
fn finished_phase_is_not_recomputed() {
    let ex = e(json!({"phase": "Failed", "message": "m"}));
    let mut st = ex.status.clone().unwrap();
    st.template_statuses = status(&[("a", Some("Successful"), "")], &[]).template_statuses;
    assert!(calculate_status(&ex, &mut st, t(10)).is_none());
    assert_eq!(st.phase, Some(AnalysisPhase::Failed));
    assert_eq!(st.message.as_deref(), Some("m"));
}

#[test]
fn bad_phases_are_warnings() {
    let ex = e(json!({"phase": "Running"}));
    let mut st = status(&[("a", Some("Failed"), "x")], &[]);
    let event = calculate_status(&ex, &mut st, t(10)).unwrap();
    assert_eq!(event.type_, EventType::Warning);
    assert_eq!(event.reason, "ExperimentFailed");
    assert_eq!(st.message.as_deref(), Some("x"));
}

fn progressing(st: &ExperimentStatus) -> (&str, &str, &str) {
    let c = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(ExperimentConditionType::Progressing))
        .unwrap();
    (
        c.status.as_ref().unwrap().as_str(),
        c.reason.as_deref().unwrap(),
        c.message.as_deref().unwrap(),
    )
}

#[test]
fn progressing_condition_rules() {
    // Counts changed.
    let ex = e(json!({"phase": "Pending", "templateStatuses": [
        {"name": "a", "replicas": 0, "updatedReplicas": 0, "readyReplicas": 0,
         "availableReplicas": 0, "status": "Progressing"}]}));
    let mut st: ExperimentStatus = serde_json::from_value(json!({"templateStatuses": [
        {"name": "a", "replicas": 1, "updatedReplicas": 1, "readyReplicas": 0,
         "availableReplicas": 0, "status": "Progressing"}]}))
    .unwrap();
    calculate_status(&ex, &mut st, t(10));
    assert_eq!(
        progressing(&st),
        (
            "True",
            REPLICA_SET_UPDATED,
            "Experiment \"ex\" is progressing."
        )
    );
    // Same counts, available and within the duration.
    let ex = e(
        json!({"phase": "Running", "availableAt": "1970-01-01T00:00:10Z",
        "templateStatuses": [{"name": "a", "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1, "status": "Running"}]}),
    );
    let mut st = ex.status.clone().unwrap();
    calculate_status(&ex, &mut st, t(20));
    assert_eq!(
        progressing(&st),
        (
            "True",
            NEW_REPLICA_SET_AVAILABLE,
            "Experiment \"ex\" is running."
        )
    );
    let c = st.conditions.as_ref().unwrap()[0].clone();
    // Successful.
    let mut ex2 = ex.clone();
    ex2.status.as_mut().unwrap().conditions = Some(vec![c]);
    let mut st = ex2.status.clone().unwrap();
    st.template_statuses.as_mut().unwrap()[0].status = Some(TemplateStatusCode::Successful);
    calculate_status(&ex2, &mut st, t(80));
    assert_eq!(st.phase, Some(AnalysisPhase::Successful));
    assert_eq!(
        progressing(&st),
        (
            "False",
            EXPERIMENT_COMPLETED,
            "Experiment \"ex\" has successfully ran and completed."
        )
    );
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(c.last_transition_time, Some(Time(t(80))));
}

#[test]
fn conditions_keep_their_times_when_nothing_changes() {
    let mut conditions = Vec::new();
    let progressing = ExperimentConditionType::Progressing;
    set_condition(
        &mut conditions,
        progressing.clone(),
        ConditionStatus::True,
        REPLICA_SET_UPDATED,
        "m".into(),
        t(1),
    );
    set_condition(
        &mut conditions,
        progressing.clone(),
        ConditionStatus::True,
        REPLICA_SET_UPDATED,
        "other".into(),
        t(2),
    );
    assert_eq!(conditions[0].last_update_time, Some(Time(t(1))));
    assert_eq!(conditions[0].message.as_deref(), Some("m"));
    set_condition(
        &mut conditions,
        progressing,
        ConditionStatus::True,
        NEW_REPLICA_SET_AVAILABLE,
        "r".into(),
        t(3),
    );
    assert_eq!(conditions[0].last_update_time, Some(Time(t(3))));
    assert_eq!(conditions[0].last_transition_time, Some(Time(t(1))));
}

#[test]
fn invalid_spec_is_replaced_only_when_the_problem_changes() {
    let mut st = ExperimentStatus::default();
    set_invalid_spec(&mut st, "one".into(), t(1));
    set_invalid_spec(&mut st, "one".into(), t(2));
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(c.last_update_time, Some(Time(t(1))));
    assert_eq!(c.reason.as_deref(), Some(INVALID_SPEC));
    set_invalid_spec(&mut st, "two".into(), t(3));
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(c.message.as_deref(), Some("two"));
    assert_eq!(c.last_update_time, Some(Time(t(3))));
}
