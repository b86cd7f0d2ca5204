//! A run's life beyond one metric's rules: termination, failures that end the others, retries,
//! initial delays and requeues, resumed and stale measurements, retention, invalid specs and
//! the TTL rules.

use super::*;

#[test]
fn terminate_before_any_measurement() {
    let mut run = single(json!({"interval": "1m"}));
    run.spec.terminate = Some(true);
    assert!(next_tasks(&run, t(0)).is_empty());
    let a = assess(&run, vec![], t(0));
    assert!(a.completed);
    assert_eq!(a.status.phase, Some(AnalysisPhase::Successful));
    assert_eq!(a.status.message.as_deref(), Some("Run Terminated"));
    assert_eq!(a.status.started_at, Some(Time(t(0))));
    assert_eq!(a.status.completed_at, Some(Time(t(0))));
    assert_eq!(a.requeue_after, None);
}

#[test]
fn terminate_stops_in_flight_measurement() {
    let mut run = single(json!({"interval": "1m"}));
    let (a, _) = drive(&mut run, &["Successful", "Successful"]);
    assert_eq!(a.status.phase, Some(AnalysisPhase::Running));

    // A measurement in flight, asking to be polled much later.
    let now = t(200);
    let a = assess(
        &run,
        vec![("m".into(), TaskKind::Start, in_flight_at(now, Some(t(900))))],
        now,
    );
    apply(&mut run, &a);
    assert_eq!(a.requeue_after, Some(Duration::from_secs(700)));
    assert!(next_tasks(&run, t(201)).is_empty());

    run.spec.terminate = Some(true);
    assert_eq!(next_tasks(&run, t(201)), [task("m", TaskKind::Terminate)]);
    let a = assess(
        &run,
        vec![(
            "m".into(),
            TaskKind::Terminate,
            measurement("Successful", t(201)),
        )],
        t(201),
    );
    assert!(a.completed);
    let r = result(&a, "m");
    let last = r.measurements.as_ref().unwrap().last().unwrap();
    assert_eq!(last.message.as_deref(), Some("Metric Terminated"));
    assert_eq!(last.finished_at, Some(Time(t(201))));
    assert_eq!(r.measurements.as_ref().unwrap().len(), 3);
    assert_eq!(r.count, Some(3));
    assert_eq!(r.phase, Some(AnalysisPhase::Successful));
    assert_eq!(a.status.phase, Some(AnalysisPhase::Successful));
    assert_eq!(a.status.message.as_deref(), Some("Run Terminated"));
}

#[test]
fn failing_metric_terminates_the_others() {
    let mut run = run_spec(json!({
        "metrics": [{"name": "quick"}, {"name": "slow", "interval": "1m"}]
    }));
    let now = t(0);
    let a = assess(
        &run,
        vec![
            ("quick".into(), TaskKind::Start, measurement("Failed", now)),
            ("slow".into(), TaskKind::Start, in_flight_at(now, None)),
        ],
        now,
    );
    apply(&mut run, &a);
    // The failure is seen in this pass; stopping the rest is the next one, right away.
    assert_eq!(a.status.phase, Some(AnalysisPhase::Running));
    assert_eq!(a.requeue_after, Some(Duration::ZERO));
    assert!(is_terminating(&run));
    assert_eq!(next_tasks(&run, now), [task("slow", TaskKind::Terminate)]);

    let a = assess(
        &run,
        vec![(
            "slow".into(),
            TaskKind::Terminate,
            measurement("Successful", now),
        )],
        now,
    );
    assert!(a.completed);
    assert_eq!(a.status.phase, Some(AnalysisPhase::Failed));
    assert_eq!(
        a.status.message.as_deref(),
        Some(r#"Metric "quick" assessed Failed due to failed (1) > failureLimit (0)"#)
    );
    assert_eq!(result(&a, "slow").phase, Some(AnalysisPhase::Successful));
    assert_eq!(
        a.status.run_summary,
        Some(RunSummary {
            count: Some(2),
            successful: Some(1),
            failed: Some(1),
            ..Default::default()
        })
    );
}

#[test]
fn failing_metric_ends_run_waiting_on_an_interval() {
    let mut run = run_spec(json!({
        "metrics": [{"name": "a", "interval": "1m", "count": 2}, {"name": "b", "interval": "1m"}]
    }));
    let now = t(0);
    let a = assess(
        &run,
        vec![
            ("a".into(), TaskKind::Start, measurement("Successful", now)),
            ("b".into(), TaskKind::Start, measurement("Successful", now)),
        ],
        now,
    );
    apply(&mut run, &a);
    let now = t(60);
    let a = assess(
        &run,
        vec![(
            "a".into(),
            TaskKind::Start,
            measurement("Inconclusive", now),
        )],
        now,
    );
    apply(&mut run, &a);
    assert_eq!(a.status.phase, Some(AnalysisPhase::Running));
    assert_eq!(a.requeue_after, Some(Duration::ZERO));
    assert!(next_tasks(&run, now).is_empty());
    let a = assess(&run, vec![], now);
    assert!(a.completed);
    assert_eq!(a.status.phase, Some(AnalysisPhase::Inconclusive));
    assert_eq!(result(&a, "b").phase, Some(AnalysisPhase::Successful));
}

#[test]
fn error_is_retried_after_ten_seconds() {
    let mut run = single(json!({"interval": "5m", "count": 3}));
    let a = assess(
        &run,
        vec![("m".into(), TaskKind::Start, measurement("Error", t(0)))],
        t(0),
    );
    apply(&mut run, &a);
    assert_eq!(a.requeue_after, Some(Duration::from_secs(10)));
    assert!(next_tasks(&run, t(9)).is_empty());
    assert_eq!(next_tasks(&run, t(10)), [task("m", TaskKind::Start)]);

    // After a real result the interval applies again.
    let a = assess(
        &run,
        vec![(
            "m".into(),
            TaskKind::Start,
            measurement("Successful", t(10)),
        )],
        t(10),
    );
    apply(&mut run, &a);
    assert_eq!(a.requeue_after, Some(Duration::from_secs(300)));
    assert!(next_tasks(&run, t(309)).is_empty());
    assert_eq!(next_tasks(&run, t(310)), [task("m", TaskKind::Start)]);
}

#[test]
fn initial_delay_counts_from_run_start() {
    let mut run = single(json!({"initialDelay": "30s"}));
    assert!(next_tasks(&run, t(0)).is_empty());
    let a = assess(&run, vec![], t(0));
    apply(&mut run, &a);
    assert_eq!(a.status.started_at, Some(Time(t(0))));
    assert_eq!(a.status.phase, Some(AnalysisPhase::Running));
    assert_eq!(a.status.metric_results, None);
    assert_eq!(a.requeue_after, Some(Duration::from_secs(30)));
    assert!(next_tasks(&run, t(29)).is_empty());
    assert_eq!(next_tasks(&run, t(30)), [task("m", TaskKind::Start)]);

    // Re-assessing later keeps the original start.
    let a = assess(&run, vec![], t(12));
    assert_eq!(a.status.started_at, Some(Time(t(0))));
    assert_eq!(a.requeue_after, Some(Duration::from_secs(18)));
}

#[test]
fn earliest_due_metric_sets_the_requeue() {
    let mut run = run_spec(json!({
        "metrics": [
            {"name": "slow", "interval": "5m"},
            {"name": "fast", "interval": "45s"},
            {"name": "late", "initialDelay": "2m"}
        ]
    }));
    assert_eq!(
        next_tasks(&run, t(0)),
        [task("slow", TaskKind::Start), task("fast", TaskKind::Start)]
    );
    let a = assess(
        &run,
        vec![
            (
                "slow".into(),
                TaskKind::Start,
                measurement("Successful", t(0)),
            ),
            (
                "fast".into(),
                TaskKind::Start,
                measurement("Successful", t(3)),
            ),
        ],
        t(3),
    );
    apply(&mut run, &a);
    // `fast` finished at 3 (stamped by assess) and is due 45s later.
    assert_eq!(a.requeue_after, Some(Duration::from_secs(45)));
    assert_eq!(next_tasks(&run, t(48)), [task("fast", TaskKind::Start)]);
    // The run started at its first assessment (3); `late` waits 2m from then.
    assert_eq!(next_tasks(&run, t(122)), [task("fast", TaskKind::Start)]);
    assert_eq!(
        next_tasks(&run, t(123)),
        [task("fast", TaskKind::Start), task("late", TaskKind::Start)]
    );
}

#[test]
fn in_flight_measurements_resume_when_asked() {
    let mut run = single(json!({}));
    let a = assess(
        &run,
        vec![("m".into(), TaskKind::Start, in_flight_at(t(0), Some(t(20))))],
        t(0),
    );
    apply(&mut run, &a);
    assert_eq!(result(&a, "m").phase, Some(AnalysisPhase::Running));
    assert_eq!(a.requeue_after, Some(Duration::from_secs(20)));
    assert!(next_tasks(&run, t(19)).is_empty());
    assert_eq!(next_tasks(&run, t(20)), [task("m", TaskKind::Resume)]);

    // Still running, no resumeAt: poll.
    let a = assess(
        &run,
        vec![("m".into(), TaskKind::Resume, in_flight_at(t(0), None))],
        t(20),
    );
    apply(&mut run, &a);
    assert_eq!(a.requeue_after, Some(IN_FLIGHT_POLL_INTERVAL));
    assert_eq!(next_tasks(&run, t(21)), [task("m", TaskKind::Resume)]);

    let done = Measurement {
        phase: Some(AnalysisPhase::Successful),
        finished_at: Some(Time(t(25))),
        ..in_flight_at(t(0), None)
    };
    let a = assess(&run, vec![("m".into(), TaskKind::Resume, done)], t(30));
    let r = result(&a, "m");
    assert_eq!(r.measurements.as_ref().unwrap().len(), 1);
    assert_eq!(
        r.measurements.as_ref().unwrap()[0].finished_at,
        Some(Time(t(25)))
    );
    assert_eq!(r.count, Some(1));
    assert!(a.completed);
    assert_eq!(a.status.completed_at, Some(Time(t(30))));
}

#[test]
fn stale_results_are_dropped() {
    let mut run = single(json!({"interval": "1m"}));
    let a = assess(
        &run,
        vec![("m".into(), TaskKind::Start, measurement("Successful", t(0)))],
        t(0),
    );
    apply(&mut run, &a);
    let again = assess(
        &run,
        vec![
            ("m".into(), TaskKind::Resume, measurement("Failed", t(1))),
            ("other".into(), TaskKind::Start, measurement("Failed", t(1))),
        ],
        t(1),
    );
    assert_eq!(again.status.metric_results, a.status.metric_results);
    assert_eq!(again.status.phase, Some(AnalysisPhase::Running));
}

#[test]
fn measurements_are_trimmed_to_retention() {
    let outcomes = ["Successful"; 12];
    let mut run = single(json!({"interval": "1s"}));
    let (a, _) = drive(&mut run, &outcomes);
    let r = result(&a, "m");
    assert_eq!(r.measurements.as_ref().unwrap().len(), 10);
    assert_eq!(r.count, Some(12));

    let mut run = single(json!({"interval": "1s"}));
    run.spec.measurement_retention = Some(vec![sluice_api::common::MeasurementRetention {
        metric_name: Some("*".into()),
        limit: Some(2),
    }]);
    let (a, _) = drive(&mut run, &outcomes[..4]);
    let kept = result(&a, "m").measurements.clone().unwrap();
    assert_eq!(kept.len(), 2);
    // The newest two are kept.
    assert_eq!(kept[1].started_at, Some(Time(t(3))));
    assert_eq!(result(&a, "m").count, Some(4));
}

#[test]
fn worst_metric_phase_wins() {
    let cases = [
        (["Successful", "Inconclusive", "Error"], "Error"),
        (["Failed", "Error", "Successful"], "Failed"),
        (["Successful", "Inconclusive", "Successful"], "Inconclusive"),
        (["Successful", "Successful", "Successful"], "Successful"),
    ];
    for (outcomes, want) in cases {
        let run = run_spec(json!({"metrics": [
            {"name": "a", "consecutiveErrorLimit": 0},
            {"name": "b", "consecutiveErrorLimit": 0},
            {"name": "c", "consecutiveErrorLimit": 0}
        ]}));
        let results = ["a", "b", "c"]
            .iter()
            .zip(outcomes)
            .map(|(m, o)| ((*m).to_owned(), TaskKind::Start, measurement(o, t(0))))
            .collect();
        let a = assess(&run, results, t(0));
        assert!(a.completed, "{outcomes:?}");
        assert_eq!(
            a.status.phase.as_ref().unwrap().as_str(),
            want,
            "{outcomes:?}"
        );
        assert_eq!(a.status.run_summary.as_ref().unwrap().count, Some(3));
    }
}

#[test]
fn invalid_specs_end_in_error() {
    let cases = [
        (
            json!({"metrics": []}),
            "Analysis spec invalid: no metrics specified",
        ),
        (
            json!({"metrics": [{"name": "a"}, {"name": "a"}]}),
            "Analysis spec invalid: metrics[1]: duplicate name 'a'",
        ),
        (
            // A count that is no number reads as 0, as Go's IntValue reads it.
            json!({"metrics": [{"name": "a", "count": "{{args.n}}", "failureLimit": "{{args.n}}", "consecutiveSuccessLimit": "0"}], "args": [{"name": "n", "value": "-1"}]}),
            "Analysis spec invalid: metrics[0]: failureLimit and consecutiveSuccessLimit cannot both be disabled",
        ),
        (
            json!({"metrics": [{"name": "a", "count": "{{args.n}}"}]}),
            "Unable to resolve metric arguments: failed to resolve {{args.n}}",
        ),
    ];
    for (spec, want) in cases {
        let run = run_spec(spec);
        assert!(next_tasks(&run, t(0)).is_empty());
        let a = assess(&run, vec![], t(0));
        assert!(a.completed, "{want}");
        assert_eq!(a.status.phase, Some(AnalysisPhase::Error));
        assert_eq!(a.status.message.as_deref(), Some(want));
        assert_eq!(a.requeue_after, None);
    }
    let mut no_provider = single(json!({}));
    no_provider.spec.metrics.as_mut().unwrap()[0].provider = None;
    assert_eq!(
        assess(&no_provider, vec![], t(0)).status.message.as_deref(),
        Some("Analysis spec invalid: metrics[0]: no provider specified")
    );
}

#[test]
fn placeholders_in_schedule_come_from_args() {
    let mut run = run_spec(json!({
        "args": [{"name": "every", "value": "20s"}, {"name": "runs", "value": "2"},
                 {"name": "service", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        "metrics": [{"name": "m", "interval": "{{args.every}}", "count": "{{args.runs}}"}]
    }));
    let (a, used) = drive(&mut run, &["Successful", "Successful", "Successful"]);
    assert_eq!(used, 2);
    assert!(a.completed);
    assert_eq!(
        result(&a, "m").measurements.as_ref().unwrap()[1].started_at,
        Some(Time(t(20)))
    );
}

#[test]
fn completed_run_is_left_alone() {
    let mut run = single(json!({}));
    run.spec.ttl_strategy = Some(sluice_api::analysis::TtlStrategy {
        seconds_after_success: Some(60),
        seconds_after_completion: Some(600),
        ..Default::default()
    });
    let (a, _) = drive(&mut run, &["Successful"]);
    assert_eq!(a.delete_at, Some(t(60)));
    assert!(next_tasks(&run, t(1000)).is_empty());
    let again = assess(
        &run,
        vec![("m".into(), TaskKind::Start, measurement("Failed", t(1000)))],
        t(1000),
    );
    assert_eq!(again.status, a.status);
    assert!(again.completed);
    assert_eq!(again.delete_at, Some(t(60)));
}

#[test]
fn ttl_strategy_picks_the_phase_rule() {
    let cases = [
        ("Successful", Some(60), None, Some(600), Some(60)),
        ("Failed", Some(60), None, Some(600), Some(600)),
        ("Failed", None, Some(30), Some(600), Some(30)),
        ("Inconclusive", Some(60), Some(30), Some(600), Some(600)),
        ("Failed", Some(60), None, None, None),
    ];
    for (outcome, success, failure, completion, want) in cases {
        let mut run = single(json!({}));
        run.spec.ttl_strategy = Some(sluice_api::analysis::TtlStrategy {
            seconds_after_success: success,
            seconds_after_failure: failure,
            seconds_after_completion: completion,
        });
        let (a, _) = drive(&mut run, &[outcome]);
        let want = want.map(|s: i64| t(0).checked_add(SignedDuration::from_secs(s)).unwrap());
        assert_eq!(
            a.delete_at, want,
            "{outcome} {success:?} {failure:?} {completion:?}"
        );
    }
}

#[test]
fn first_assessment_of_a_fresh_run() {
    let run = single(json!({"interval": "1m"}));
    assert_eq!(next_tasks(&run, t(0)), [task("m", TaskKind::Start)]);
    let a = assess(
        &run,
        vec![("m".into(), TaskKind::Start, measurement("Successful", t(0)))],
        t(0),
    );
    assert_eq!(a.status.phase, Some(AnalysisPhase::Running));
    assert_eq!(a.status.message, None);
    assert_eq!(a.status.started_at, Some(Time(t(0))));
    assert_eq!(a.status.completed_at, None);
    assert_eq!(a.delete_at, None);
    let r = result(&a, "m");
    assert_eq!(r.phase, Some(AnalysisPhase::Running));
    assert_eq!(r.dry_run, None);
    assert_eq!(
        serde_json::to_value(&a.status.dry_run_summary).unwrap(),
        json!({})
    );
    assert_eq!(
        serde_json::to_value(&a.status.run_summary).unwrap(),
        json!({"count": 1})
    );
}
