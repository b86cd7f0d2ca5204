use serde_json::json;

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn rollout() -> Rollout {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "managedFields": [
            {"manager": "kubectl-sluice", "operation": "Update", "time": "2026-01-01T10:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:paused": {}}}}
        ]},
        "spec": {"strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}, {"pause": {"duration": "1h"}}]}}}
    }))
    .unwrap()
}

fn status(phase: &str, message: &str) -> RolloutStatus {
    serde_json::from_value(json!({"phase": phase, "message": message})).unwrap()
}

fn text(waits: &[Wait], pods: &[Pod], runs: &[AnalysisRun], status: &RolloutStatus) -> String {
    explain_text(&Facts {
        rollout: &rollout(),
        status,
        waits,
        pods,
        runs,
        now: at("2026-01-01T12:00:00Z"),
        command: "kubectl sluice",
        namespace: "shop",
    })
}

#[test]
fn pauses_say_until_when_and_who() {
    let waits = [
        Wait::PausedByUser,
        Wait::PauseStep {
            step: 1,
            until: None,
        },
        Wait::PauseStep {
            step: 2,
            until: Some(at("2026-01-01T12:30:00Z")),
        },
    ];
    assert_eq!(
        text(&waits, &[], &[], &status("Paused", "CanaryPauseStep")),
        "\
Rollout \"web\" is Paused: CanaryPauseStep
It waits for:
  - a resume: spec.paused is true (set by kubectl-sluice at 2026-01-01T10:00:00Z)
    To move on: kubectl sluice resume web -n shop
  - a promotion: step 2/3 is a pause without a duration
    To move on: kubectl sluice promote web -n shop
  - the pause of step 3/3 to end at 2026-01-01T12:30:00Z (in 30m)
    To go on now: kubectl sluice promote web -n shop
"
    );
}

#[test]
fn pods_not_ready_since_when() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-abc12-x1", "labels": {"rollouts-pod-template-hash": "abc12"},
                     "creationTimestamp": "2026-01-01T11:00:00Z"},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T11:58:00Z"}]}
    }))
    .unwrap();
    let waits = [
        Wait::PodsNotAvailable {
            replica_set: "web-abc12".into(),
            wanted: 2,
            available: 1,
        },
        Wait::ProgressDeadline {
            since: at("2026-01-01T11:58:00Z"),
            at: at("2026-01-01T12:08:00Z"),
        },
    ];
    assert_eq!(
        text(&waits, &[pod], &[], &status("Progressing", "more replicas need to be updated")),
        "\
Rollout \"web\" is Progressing: more replicas need to be updated
It waits for:
  - the pods of ReplicaSet \"web-abc12\" to be available: 1 of 2
      pod web-abc12-x1 is not ready (Running) since 2026-01-01T11:58:00Z (2m ago)
    To see why: kubectl describe pods -n shop -l rollouts-pod-template-hash=abc12
  - progress: none since 2026-01-01T11:58:00Z (2m ago); the progress deadline fires at 2026-01-01T12:08:00Z (in 8m)
"
    );
}

#[test]
fn analysis_shows_its_metrics() {
    let run: AnalysisRun = serde_json::from_value(json!({
        "metadata": {"name": "web-abc12-2"},
        "spec": {"metrics": []},
        "status": {"phase": "Inconclusive", "metricResults": [
            {"name": "errors", "phase": "Inconclusive", "measurements": [{"phase": "Inconclusive", "value": "7"}]}
        ]}
    }))
    .unwrap();
    let waits = [Wait::AnalysisInconclusive {
        run: "web-abc12-2".into(),
    }];
    assert_eq!(
        text(&waits, &[], &[run], &status("Paused", "InconclusiveAnalysisRun")),
        "\
Rollout \"web\" is Paused: InconclusiveAnalysisRun
It waits for:
  - a decision: AnalysisRun \"web-abc12-2\" was Inconclusive (errors: Inconclusive, last value \"7\")
    To go on: kubectl sluice promote web -n shop; to go back: kubectl sluice abort web -n shop
"
    );
}

#[test]
fn every_other_wait_has_words_and_a_way_on() {
    let waits = [
        Wait::InvalidSpec {
            message: "The Rollout \"web\" is invalid: spec.strategy.canary.stableService: Invalid value: \"s\": services \"s\" not found".into(),
        },
        Wait::Aborted {
            message: "RolloutAborted: Metric \"errors\" assessed Failed".into(),
        },
        Wait::AnalysisRunning { run: "r".into() },
        Wait::ExperimentRunning { name: "web-exp".into() },
        Wait::AwaitingPromotion { until: None },
        Wait::AwaitingPromotion {
            until: Some(at("2026-01-01T12:00:30Z")),
        },
        Wait::WeightNotVerified { weight: 20 },
        Wait::StepPlugin {
            step: 1,
            name: "step/e2e-test".into(),
            phase: Some("Running".into()),
            message: Some("waiting for the canary".into()),
            next: Some(at("2026-01-01T12:00:30Z")),
        },
        Wait::ProgressDeadlineExceeded {
            message: "ReplicaSet \"web-abc12\" has timed out progressing.".into(),
        },
    ];
    let out = text(&waits, &[], &[], &status("Degraded", "x"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2 + 2 * waits.len(), "{out}");
    for expected in [
        "  - a valid spec: The Rollout \"web\" is invalid: spec.strategy.canary.stableService: Invalid value: \"s\": services \"s\" not found",
        "    To try again: kubectl sluice retry rollout web -n shop; or roll out a fixed version.",
        "  - AnalysisRun \"r\" to finish measuring",
        "    To see it: kubectl sluice get experiment web-exp -n shop; to end it now: kubectl sluice terminate experiment web-exp -n shop",
        "  - a promotion: the preview is up and autoPromotionEnabled is false",
        "  - the automatic promotion at 2026-01-01T12:00:30Z (in 30s, autoPromotionSeconds)",
        "  - the traffic router to carry 20% to the canary: the weight is written but not yet read back from the router's objects",
        "    To give up on this version: kubectl sluice abort web -n shop",
        "  - step plugin \"step/e2e-test\" of step 2 to finish: it answered Running (waiting for the canary); asked again in 30s",
        "    To skip it: kubectl sluice promote web -n shop; to give up: kubectl sluice abort web -n shop",
    ] {
        assert!(lines.contains(&expected), "{expected}\n{out}");
    }
}

#[test]
fn nothing_to_wait_for() {
    assert_eq!(
        text(&[], &[], &[], &status("Healthy", "")),
        "Rollout \"web\" is Healthy\nIt waits for nothing: the update is complete.\n"
    );
}
