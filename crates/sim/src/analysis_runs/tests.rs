use jiff::SignedDuration;
use sluice_controller::loops::driver::STALE_RETRY;

use super::*;
use crate::api_model::Endpoint;
use crate::net::serve;

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn at(ms: u64) -> Timestamp {
    t0() + SignedDuration::from_millis(ms as i64)
}

/// A run of one metric measured every 5 s: good from 0.95, failed below 0.8.
fn create_run(api: &mut ApiServer, extra: Value) {
    let mut metric = json!({
        "name": "m", "interval": "5s",
        "successCondition": "result[0] >= 0.95",
        "failureCondition": "result[0] < 0.8",
        "consecutiveErrorLimit": 1,
        "provider": {"prometheus": {"address": "http://p:9090", "query": "q"}}
    });
    crate::api_model::merge_patch(&mut metric, &extra);
    let run = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {"metrics": [metric]}
    });
    api.create(Kind::AnalysisRun, run, t0()).unwrap();
}

fn script(readings: Vec<Reading>) -> MeasureScript {
    MeasureScript {
        readings,
        ..MeasureScript::default()
    }
}

fn rate(v: f64) -> Reading {
    Reading::Value(json!([v]))
}

/// Runs the controller for "r" until nothing is due before `until_ms`, serving every request
/// at once. Returns the phase changes, in order.
fn run_until(
    api: &mut ApiServer,
    ctrl: &mut RunController,
    script: &MeasureScript,
    mut now_ms: u64,
    until_ms: u64,
) -> Vec<(String, String)> {
    let mut changes = Vec::new();
    // Already queued for `now_ms` (or sooner) when the trigger books nothing.
    let mut next = ctrl.trigger("r", now_ms).or(Some(now_ms));
    while let Some(due) = next.filter(|d| *d <= until_ms) {
        now_ms = due;
        if !ctrl.start(api, "r", now_ms, at(now_ms), script) {
            break;
        }
        loop {
            match ctrl.poll("r", now_ms) {
                Polled::Send(request) => {
                    let response = serve(api, request, at(now_ms));
                    ctrl.deliver("r", response);
                }
                Polled::Waiting => unreachable!("every request is served at once"),
                Polled::Done {
                    phase_change,
                    next_ms,
                    ..
                } => {
                    changes.extend(phase_change);
                    next = next_ms;
                    break;
                }
            }
        }
    }
    changes
}

fn get(api: &ApiServer, pointer: &str) -> Value {
    api.get(Kind::AnalysisRun, "r")
        .and_then(|r| r.pointer(pointer))
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn a_value_meeting_neither_condition_after_good_ones_makes_the_run_inconclusive() {
    let mut api = ApiServer::new();
    create_run(&mut api, json!({}));
    let mut ctrl = RunController::new();
    let script = script(vec![rate(0.99), rate(0.97), rate(0.9)]);
    let changes = run_until(&mut api, &mut ctrl, &script, 0, 60_000);
    let msg = "Metric \"m\" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0)";
    assert_eq!(
        changes,
        [
            ("Running".to_string(), String::new()),
            ("Inconclusive".to_string(), msg.to_string())
        ]
    );
    assert_eq!(get(&api, "/status/message"), json!(msg));
    assert_eq!(get(&api, "/status/metricResults/0/count"), json!(3));
    assert_eq!(get(&api, "/status/metricResults/0/successful"), json!(2));
    assert_eq!(
        get(&api, "/status/metricResults/0/measurements/2/value"),
        json!("[0.9]")
    );
    // Finished: never measured again.
    assert!(run_until(&mut api, &mut ctrl, &script, 60_000, 600_000).is_empty());
    assert_eq!(get(&api, "/status/metricResults/0/count"), json!(3));
}

#[test]
fn failed_and_error_verdicts_come_from_readings_and_limits() {
    let mut api = ApiServer::new();
    create_run(&mut api, json!({}));
    let changes = run_until(
        &mut api,
        &mut RunController::new(),
        &script(vec![rate(0.5)]),
        0,
        60_000,
    );
    assert_eq!(
        changes.last().unwrap().1,
        "Metric \"m\" assessed Failed due to failed (1) > failureLimit (0)"
    );

    let mut api = ApiServer::new();
    create_run(&mut api, json!({}));
    let unreachable = Reading::Error("no such host".into());
    let changes = run_until(
        &mut api,
        &mut RunController::new(),
        &script(vec![rate(0.99), unreachable]),
        0,
        60_000,
    );
    assert_eq!(changes.last().unwrap().0, "Error");
    assert_eq!(
        changes.last().unwrap().1,
        "Metric \"m\" assessed Error due to consecutiveErrors (2) > consecutiveErrorLimit (1): \"Error Message: no such host\""
    );
    assert_eq!(
        get(&api, "/status/metricResults/0/measurements/1/message"),
        json!("no such host")
    );
}

#[test]
fn a_run_with_a_count_ends_successful_and_one_without_is_terminated() {
    let mut api = ApiServer::new();
    create_run(&mut api, json!({"count": 3}));
    let changes = run_until(
        &mut api,
        &mut RunController::new(),
        &MeasureScript::default(),
        0,
        60_000,
    );
    assert_eq!(changes.last().unwrap().0, "Successful");
    assert_eq!(get(&api, "/status/metricResults/0/count"), json!(3));

    let mut api = ApiServer::new();
    create_run(&mut api, json!({}));
    let mut ctrl = RunController::new();
    let script = MeasureScript::default();
    run_until(&mut api, &mut ctrl, &script, 0, 12_000);
    assert_eq!(get(&api, "/status/phase"), json!("Running"));
    api.patch(
        Kind::AnalysisRun,
        "r",
        &json!({"spec": {"terminate": true}}),
        Endpoint::Main,
    )
    .unwrap();
    let changes = run_until(&mut api, &mut ctrl, &script, 13_000, 60_000);
    assert_eq!(
        changes,
        [("Successful".to_string(), "Run Terminated".to_string())]
    );
}

#[test]
fn a_status_write_on_a_run_changed_meanwhile_meets_a_conflict_and_is_retried() {
    let mut api = ApiServer::new();
    create_run(&mut api, json!({}));
    let mut ctrl = RunController::new();
    let script = MeasureScript::default();
    assert_eq!(ctrl.trigger("r", 0), Some(0));
    assert!(ctrl.start(&api, "r", 0, at(0), &script));
    let Polled::Send(request) = ctrl.poll("r", 0) else {
        panic!("expected the status write");
    };
    // The Rollout terminates the run while the write is on its way.
    api.patch(
        Kind::AnalysisRun,
        "r",
        &json!({"spec": {"terminate": true}}),
        Endpoint::Main,
    )
    .unwrap();
    let response = serve(&mut api, request, at(100));
    assert!(matches!(response, Err(WriteError::Conflict)));
    ctrl.deliver("r", response);
    let Polled::Done { error, next_ms, .. } = ctrl.poll("r", 200) else {
        panic!("expected the reconcile to end");
    };
    assert!(matches!(error, Some(WriteError::Conflict)));
    assert_eq!(next_ms, Some(200 + STALE_RETRY.as_millis() as u64));
    assert_eq!(get(&api, "/status"), Value::Null, "nothing written over");
    let changes = run_until(&mut api, &mut ctrl, &script, 700, 60_000);
    assert_eq!(
        changes,
        [("Successful".to_string(), "Run Terminated".to_string())]
    );
    assert_eq!(get(&api, "/status/metricResults"), Value::Null);
}

#[test]
fn the_requeue_policy_books_the_next_measurement() {
    let mut api = ApiServer::new();
    create_run(&mut api, json!({}));
    let mut ctrl = RunController::new();
    ctrl.trigger("r", 0);
    assert!(ctrl.start(&api, "r", 0, at(0), &MeasureScript::default()));
    let Polled::Send(request) = ctrl.poll("r", 0) else {
        panic!("expected the status write");
    };
    ctrl.deliver("r", serve(&mut api, request, at(0)));
    let Polled::Done { next_ms, .. } = ctrl.poll("r", 0) else {
        panic!("expected the reconcile to end");
    };
    assert_eq!(next_ms, Some(5_000));
    // A wake-up that is not due yet starts nothing; an earlier trigger moves it forward.
    assert!(!ctrl.start(&api, "r", 4_999, at(4_999), &MeasureScript::default()));
    assert_eq!(ctrl.trigger("r", 6_000), None);
    assert_eq!(ctrl.trigger("r", 1_000), Some(1_000));
    // Noticed while a reconcile is in flight: it runs again as soon as that one is done.
    assert!(ctrl.start(&api, "r", 1_000, at(1_000), &MeasureScript::default()));
    assert_eq!(ctrl.trigger("r", 1_100), None);
    let Polled::Done { next_ms, .. } = ctrl.poll("r", 1_200) else {
        panic!("nothing due: no write");
    };
    assert_eq!(next_ms, Some(1_200));
}
