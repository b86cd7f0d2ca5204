use jiff::SignedDuration;
use serde_json::{Value, json};
use sluice_api::analysis::RunSummary;

use super::*;

/// Terminating, scheduling, retrying and retiring a run; the metric rules stay here.
mod lifecycle;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

fn web() -> Value {
    json!({"web": {"url": "http://metrics/{{args.service}}"}})
}

/// A run from a spec; metrics without a provider get a web one.
fn run_spec(mut spec: Value) -> AnalysisRun {
    for m in spec["metrics"].as_array_mut().into_iter().flatten() {
        if m.get("provider").is_none() {
            m["provider"] = web();
        }
    }
    serde_json::from_value(json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": spec}))
        .unwrap()
}

/// A run with one metric named `m` and the given fields.
fn single(fields: Value) -> AnalysisRun {
    let mut metric = fields;
    metric["name"] = json!("m");
    run_spec(json!({"metrics": [metric]}))
}

/// What a provider hands back. Finished measurements carry no finishedAt: `assess` stamps it.
fn measurement(phase: &str, at: Timestamp) -> Measurement {
    Measurement {
        phase: Some(AnalysisPhase::from(phase)),
        started_at: Some(Time(at)),
        message: (phase == "Error").then(|| "connection refused".to_owned()),
        ..Default::default()
    }
}

fn in_flight_at(at: Timestamp, resume_at: Option<Timestamp>) -> Measurement {
    Measurement {
        phase: Some(AnalysisPhase::Running),
        started_at: Some(Time(at)),
        resume_at: resume_at.map(Time),
        metadata: Some([("job-name".to_owned(), "j".to_owned())].into()),
        ..Default::default()
    }
}

fn task(metric: &str, kind: TaskKind) -> MetricTask {
    MetricTask {
        metric: metric.to_owned(),
        kind,
    }
}

fn after(at: Timestamp, d: Duration) -> Timestamp {
    at.checked_add(d).unwrap()
}

fn apply(run: &mut AnalysisRun, a: &RunAssessment) {
    run.status = Some(a.status.clone());
}

fn result<'a>(a: &'a RunAssessment, name: &str) -> &'a MetricResult {
    a.status.metric_result(name).unwrap()
}

/// Measures the only metric `m` once per outcome, each as soon as it is due (following
/// `requeue_after`), until the run completes. Returns the last assessment and how many
/// outcomes were used.
fn drive(run: &mut AnalysisRun, outcomes: &[&str]) -> (RunAssessment, usize) {
    let mut now = t(0);
    let mut last: Option<RunAssessment> = None;
    for (i, outcome) in outcomes.iter().enumerate() {
        let mut tasks = next_tasks(run, now);
        if tasks.is_empty() {
            let wait = last
                .as_ref()
                .and_then(|a| a.requeue_after)
                .expect("nothing due and no requeue");
            now = after(now, wait);
            tasks = next_tasks(run, now);
        }
        assert_eq!(tasks, [task("m", TaskKind::Start)], "before outcome {i}");
        let a = assess(
            run,
            vec![("m".into(), TaskKind::Start, measurement(outcome, now))],
            now,
        );
        apply(run, &a);
        let completed = a.completed;
        last = Some(a);
        if completed {
            return (last.unwrap(), i + 1);
        }
    }
    (last.unwrap(), outcomes.len())
}

struct Case {
    name: &'static str,
    metric: Value,
    outcomes: &'static [&'static str],
    /// Outcomes used when the run completes (all of them when it does not).
    used: usize,
    metric_phase: &'static str,
    run_phase: &'static str,
    message: Option<&'static str>,
}

#[test]
fn metric_rules() {
    let cases = [
        Case {
            name: "no count and no interval: one measurement",
            metric: json!({}),
            outcomes: &["Successful", "Successful"],
            used: 1,
            metric_phase: "Successful",
            run_phase: "Successful",
            message: None,
        },
        Case {
            name: "failureLimit defaults to 0: the first failure fails",
            metric: json!({"interval": "1m", "count": 3}),
            outcomes: &["Failed", "Successful"],
            used: 1,
            metric_phase: "Failed",
            run_phase: "Failed",
            message: Some(r#"Metric "m" assessed Failed due to failed (1) > failureLimit (0)"#),
        },
        Case {
            name: "failureLimit 2 tolerates two failures",
            metric: json!({"interval": "1m", "count": 5, "failureLimit": 2}),
            outcomes: &["Failed", "Failed", "Successful", "Failed", "Successful"],
            used: 4,
            metric_phase: "Failed",
            run_phase: "Failed",
            message: Some(r#"Metric "m" assessed Failed due to failed (3) > failureLimit (2)"#),
        },
        Case {
            name: "count reached with failures within the limit: Successful",
            metric: json!({"interval": "1m", "count": 3, "failureLimit": 1}),
            outcomes: &["Failed", "Successful", "Successful"],
            used: 3,
            metric_phase: "Successful",
            run_phase: "Successful",
            message: None,
        },
        Case {
            name: "consecutiveSuccessLimit reached before count: Successful",
            metric: json!({"interval": "1m", "count": 5, "failureLimit": 3, "consecutiveSuccessLimit": 2}),
            outcomes: &["Failed", "Successful", "Successful", "Failed"],
            used: 3,
            metric_phase: "Successful",
            run_phase: "Successful",
            message: None,
        },
        Case {
            name: "count reached, both limits apply, neither hit: Inconclusive",
            // count >= failureLimit + consecutiveSuccessLimit, as Argo requires.
            metric: json!({"interval": "1m", "count": 4, "failureLimit": 2, "consecutiveSuccessLimit": 2}),
            outcomes: &["Successful", "Failed", "Failed", "Successful"],
            used: 4,
            metric_phase: "Inconclusive",
            run_phase: "Inconclusive",
            message: Some(
                r#"Metric "m" assessed Inconclusive due to consecutiveSuccess (1) < consecutiveSuccessLimit (2) after count (4) reached"#,
            ),
        },
        Case {
            name: "count reached, only consecutiveSuccessLimit applies, not hit: Failed",
            metric: json!({"interval": "1m", "count": 5, "failureLimit": -1, "consecutiveSuccessLimit": 2}),
            outcomes: &["Failed", "Failed", "Successful", "Failed", "Successful"],
            used: 5,
            metric_phase: "Failed",
            run_phase: "Failed",
            message: Some(
                r#"Metric "m" assessed Failed due to consecutiveSuccess (1) < consecutiveSuccessLimit (2) after count (5) reached"#,
            ),
        },
        Case {
            name: "only consecutiveSuccessLimit applies: failures wait for successes",
            metric: json!({"interval": "1m", "count": 10, "failureLimit": -1, "consecutiveSuccessLimit": 2}),
            outcomes: &["Failed", "Failed", "Failed", "Successful", "Successful"],
            used: 5,
            metric_phase: "Successful",
            run_phase: "Successful",
            message: None,
        },
        Case {
            name: "inconclusiveLimit defaults to 0: the first inconclusive ends it",
            metric: json!({"interval": "1m", "count": 3}),
            outcomes: &["Inconclusive", "Successful"],
            used: 1,
            metric_phase: "Inconclusive",
            run_phase: "Inconclusive",
            message: Some(
                r#"Metric "m" assessed Inconclusive due to inconclusive (1) > inconclusiveLimit (0)"#,
            ),
        },
        Case {
            name: "inconclusiveLimit 1",
            metric: json!({"interval": "1m", "count": 5, "inconclusiveLimit": 1}),
            outcomes: &["Inconclusive", "Successful", "Inconclusive", "Successful"],
            used: 3,
            metric_phase: "Inconclusive",
            run_phase: "Inconclusive",
            message: Some(
                r#"Metric "m" assessed Inconclusive due to inconclusive (2) > inconclusiveLimit (1)"#,
            ),
        },
        Case {
            name: "consecutiveErrorLimit defaults to 4: the fifth error in a row",
            metric: json!({}),
            outcomes: &["Error", "Error", "Error", "Error", "Error", "Successful"],
            used: 5,
            metric_phase: "Error",
            run_phase: "Error",
            message: Some(
                r#"Metric "m" assessed Error due to consecutiveErrors (5) > consecutiveErrorLimit (4): "Error Message: connection refused""#,
            ),
        },
        Case {
            name: "errors do not count toward count; a result resets the error streak",
            metric: json!({"consecutiveErrorLimit": 1}),
            outcomes: &["Error", "Successful"],
            used: 2,
            metric_phase: "Successful",
            run_phase: "Successful",
            message: None,
        },
        Case {
            name: "consecutiveErrorLimit 1: two errors in a row",
            metric: json!({"interval": "1m", "consecutiveErrorLimit": 1}),
            outcomes: &["Error", "Successful", "Error", "Error"],
            used: 4,
            metric_phase: "Error",
            run_phase: "Error",
            message: Some(
                r#"Metric "m" assessed Error due to consecutiveErrors (2) > consecutiveErrorLimit (1): "Error Message: connection refused""#,
            ),
        },
        Case {
            name: "an interval without count runs until terminated",
            metric: json!({"interval": "10s"}),
            outcomes: &["Successful", "Successful", "Successful", "Successful"],
            used: 4,
            metric_phase: "Running",
            run_phase: "Running",
            message: None,
        },
        Case {
            name: "count given as a string",
            metric: json!({"interval": "5s", "count": "2"}),
            outcomes: &["Successful", "Successful", "Successful"],
            used: 2,
            metric_phase: "Successful",
            run_phase: "Successful",
            message: None,
        },
    ];
    for case in cases {
        let mut run = single(case.metric.clone());
        let (a, used) = drive(&mut run, case.outcomes);
        let r = result(&a, "m");
        assert_eq!(used, case.used, "{}: outcomes used", case.name);
        assert_eq!(
            r.phase.as_ref().unwrap().as_str(),
            case.metric_phase,
            "{}: metric phase",
            case.name
        );
        assert_eq!(
            a.status.phase.as_ref().unwrap().as_str(),
            case.run_phase,
            "{}: run phase",
            case.name
        );
        assert_eq!(
            a.status.message.as_deref(),
            case.message,
            "{}: message",
            case.name
        );
        assert_eq!(
            a.completed,
            case.run_phase != "Running",
            "{}: completed",
            case.name
        );
    }
}

#[test]
fn counters_follow_each_outcome() {
    let mut run =
        single(json!({"interval": "1m", "count": 10, "failureLimit": 5, "inconclusiveLimit": 5}));
    let (a, _) = drive(
        &mut run,
        &[
            "Successful",
            "Error",
            "Inconclusive",
            "Successful",
            "Successful",
            "Failed",
            "Error",
            "Error",
        ],
    );
    let r = result(&a, "m");
    assert_eq!(r.count, Some(5));
    assert_eq!(r.successful, Some(3));
    assert_eq!(r.failed, Some(1));
    assert_eq!(r.inconclusive, Some(1));
    assert_eq!(r.error, Some(3));
    assert_eq!(r.consecutive_error, Some(2));
    // Zero counters are left out, as Go's omitempty does.
    assert_eq!(r.consecutive_success, None);
    assert_eq!(r.measurements.as_ref().unwrap().len(), 8);
    assert_eq!(r.phase, Some(AnalysisPhase::Running));
}

#[test]
fn last_exceeded_limit_decides() {
    let mut run = single(
        json!({"interval": "1m", "count": 10, "failureLimit": 1, "inconclusiveLimit": 1, "consecutiveErrorLimit": 1}),
    );
    run.status = Some(AnalysisRunStatus {
        phase: Some(AnalysisPhase::Running),
        started_at: Some(Time(t(0))),
        metric_results: Some(vec![MetricResult {
            name: Some("m".into()),
            phase: Some(AnalysisPhase::Running),
            measurements: Some(vec![in_flight_at(t(0), None)]),
            count: Some(4),
            failed: Some(2),
            inconclusive: Some(2),
            consecutive_error: Some(1),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let a = assess(
        &run,
        vec![("m".into(), TaskKind::Resume, measurement("Error", t(5)))],
        t(5),
    );
    assert_eq!(a.status.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        a.status.message.as_deref(),
        Some(
            r#"Metric "m" assessed Error due to consecutiveErrors (2) > consecutiveErrorLimit (1): "Error Message: connection refused""#
        )
    );
}

#[test]
fn dry_run_metric_never_fails_the_run() {
    let mut run = run_spec(json!({
        "metrics": [{"name": "gate", "interval": "1m", "count": 2}, {"name": "probe", "interval": "1m", "count": 2}],
        "dryRun": [{"metricName": "probe"}]
    }));
    let now = t(0);
    assert_eq!(
        next_tasks(&run, now),
        [
            task("gate", TaskKind::Start),
            task("probe", TaskKind::Start)
        ]
    );
    let a = assess(
        &run,
        vec![
            (
                "gate".into(),
                TaskKind::Start,
                measurement("Successful", now),
            ),
            ("probe".into(), TaskKind::Start, measurement("Failed", now)),
        ],
        now,
    );
    apply(&mut run, &a);
    let probe = result(&a, "probe");
    assert_eq!(probe.phase, Some(AnalysisPhase::Failed));
    assert_eq!(probe.dry_run, Some(true));
    assert_eq!(
        probe.message.as_deref(),
        Some("Metric assessed Failed due to failed (1) > failureLimit (0)")
    );
    // A failed dry-run metric does not terminate the run: the gate keeps measuring.
    assert_eq!(a.status.phase, Some(AnalysisPhase::Running));
    assert!(!is_terminating(&run));
    assert_eq!(a.requeue_after, Some(Duration::from_secs(60)));

    let later = t(60);
    assert_eq!(next_tasks(&run, later), [task("gate", TaskKind::Start)]);
    let a = assess(
        &run,
        vec![(
            "gate".into(),
            TaskKind::Start,
            measurement("Successful", later),
        )],
        later,
    );
    assert!(a.completed);
    assert_eq!(a.status.phase, Some(AnalysisPhase::Successful));
    assert_eq!(a.status.message, None);
    assert_eq!(
        a.status.run_summary,
        Some(RunSummary {
            count: Some(1),
            successful: Some(1),
            ..Default::default()
        })
    );
    assert_eq!(
        a.status.dry_run_summary,
        Some(RunSummary {
            count: Some(1),
            failed: Some(1),
            ..Default::default()
        })
    );
}

#[test]
fn all_metrics_in_dry_run_end_successful() {
    let mut run = single(json!({}));
    run.spec.dry_run = Some(vec![sluice_api::common::DryRun {
        metric_name: Some("*".into()),
    }]);
    let (a, _) = drive(&mut run, &["Failed"]);
    assert!(a.completed);
    assert_eq!(a.status.phase, Some(AnalysisPhase::Successful));
    assert_eq!(result(&a, "m").phase, Some(AnalysisPhase::Failed));
}
