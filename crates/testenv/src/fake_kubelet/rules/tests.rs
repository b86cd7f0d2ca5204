use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::json;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

fn facts(value: serde_json::Value) -> PodFacts {
    let (facts, warnings) = PodFacts::from_pod(&pod(value));
    assert!(warnings.is_empty(), "{warnings:?}");
    facts
}

fn simple(image: &str, command: &[&str]) -> PodFacts {
    facts(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": image, "command": command}]}
    }))
}

fn job_pod(command: &[&str]) -> PodFacts {
    let mut p = pod(json!({
        "metadata": {"name": "j"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "job", "image": "busybox", "command": command}]}
    }));
    p.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: "j".into(),
        uid: "1".into(),
        ..Default::default()
    }]);
    PodFacts::from_pod(&p).0
}

#[test]
fn durations_parse_as_seconds_or_go_syntax() {
    assert_eq!(parse_duration("5"), Ok(secs(5.0)));
    assert_eq!(parse_duration("1.5"), Ok(secs(1.5)));
    assert_eq!(parse_duration("500ms"), Ok(secs(0.5)));
    assert_eq!(parse_duration("1m30s"), Ok(secs(90.0)));
    assert_eq!(parse_duration(" 2h "), Ok(secs(7200.0)));
    assert!(parse_duration("").is_err());
    assert!(parse_duration("10 parsecs").is_err());
    assert!(parse_duration("5x").is_err());
    assert!(parse_duration("-1").is_err());
}

#[test]
fn healthy_pod_turns_ready_after_default_delay() {
    let facts = simple("nginx:1.25", &[]);
    let timings = Timings::default();
    let early = evaluate(&facts, &timings, secs(0.2));
    assert_eq!(early.phase, Phase::Running);
    assert!(!early.ready());
    assert!(early.containers[0].started);
    assert_eq!(early.next_change, Some(secs(1.0)));
    let late = evaluate(&facts, &timings, secs(1.0));
    assert!(late.ready());
    assert_eq!(late.next_change, None);
}

#[test]
fn ready_delay_annotation_overrides_default() {
    let facts = facts(json!({
        "metadata": {"name": "p", "annotations": {"sluice.dev/ready-delay": "3s"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}
    }));
    assert_eq!(facts.ready_delay, Some(secs(3.0)));
    let timings = Timings::default();
    assert!(!evaluate(&facts, &timings, secs(2.9)).ready());
    assert!(evaluate(&facts, &timings, secs(3.0)).ready());
}

#[test]
fn invalid_ready_delay_is_reported_and_ignored() {
    let (facts, warnings) = PodFacts::from_pod(&pod(json!({
        "metadata": {"name": "p", "annotations": {"sluice.dev/ready-delay": "soon"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}
    })));
    assert_eq!(facts.ready_delay, None);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("soon"), "{warnings:?}");
}

#[test]
fn never_ready_annotation_keeps_pod_running_unready() {
    let facts = facts(json!({
        "metadata": {"name": "p", "annotations": {"sluice.dev/never-ready": "true"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}
    }));
    let eval = evaluate(&facts, &Timings::default(), secs(3600.0));
    assert_eq!(eval.phase, Phase::Running);
    assert!(eval.containers[0].started);
    assert!(!eval.ready());
    assert_eq!(eval.next_change, None);
}

#[test]
fn missing_image_never_starts() {
    let facts = simple("registry.example/app:does-not-exist", &[]);
    let timings = Timings::default();
    let early = evaluate(&facts, &timings, secs(0.5));
    assert_eq!(early.phase, Phase::Pending);
    assert!(matches!(
        &early.containers[0].state,
        RunState::Waiting {
            reason: "ErrImagePull",
            ..
        }
    ));
    assert_eq!(early.next_change, Some(secs(2.0)));
    let late = evaluate(&facts, &timings, secs(600.0));
    assert_eq!(late.phase, Phase::Pending);
    assert!(matches!(
        &late.containers[0].state,
        RunState::Waiting {
            reason: "ImagePullBackOff",
            ..
        }
    ));
    assert!(!late.ready());
    assert!(!late.containers[0].started);
    assert_eq!(late.next_change, None);
}

#[test]
fn bad_command_crash_loops_with_rising_restart_count() {
    let facts = simple("app:v2", &["/bad-command", "--serve"]);
    let timings = Timings::default();
    let counts: Vec<i32> = [0.5, 1.0, 3.0, 7.0, 15.0, 31.0, 51.0, 71.0, 3600.0]
        .iter()
        .map(|&t| {
            let eval = evaluate(&facts, &timings, secs(t));
            assert_eq!(eval.phase, Phase::Running);
            assert!(!eval.ready());
            assert!(matches!(
                &eval.containers[0].state,
                RunState::Waiting {
                    reason: "CrashLoopBackOff",
                    ..
                }
            ));
            assert_eq!(
                eval.containers[0]
                    .last_termination
                    .as_ref()
                    .unwrap()
                    .exit_code,
                1
            );
            eval.containers[0].restart_count
        })
        .collect();
    // Restarts at 1, 3, 7, 15, 31, then every 20 s: 51, 71, ...
    assert_eq!(counts, vec![0, 1, 2, 3, 4, 5, 6, 7, 183]);
    let eval = evaluate(&facts, &timings, secs(16.0));
    assert_eq!(eval.next_change, Some(secs(31.0)));
}

#[test]
fn args_stand_in_for_missing_command() {
    let facts = facts(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "app", "image": "app", "args": ["/bad-command"]}]}
    }));
    assert_eq!(
        facts.containers[0].entrypoint.as_deref(),
        Some("/bad-command")
    );
    let eval = evaluate(&facts, &Timings::default(), secs(5.0));
    assert!(eval.containers[0].restart_count > 0);
}

#[test]
fn bad_image_wins_over_bad_command() {
    let facts = simple("does-not-exist", &["/bad-command"]);
    let eval = evaluate(&facts, &Timings::default(), secs(60.0));
    assert_eq!(eval.phase, Phase::Pending);
    assert_eq!(eval.containers[0].restart_count, 0);
}

#[test]
fn job_with_sleep_succeeds_after_sleeping() {
    let facts = job_pod(&["sh", "-c", "echo hi; sleep 3 && echo done"]);
    assert!(facts.run_to_completion);
    assert_eq!(facts.containers[0].sleep, Some(secs(3.0)));
    let timings = Timings::default();
    let running = evaluate(&facts, &timings, secs(2.0));
    assert_eq!(running.phase, Phase::Running);
    assert!(running.ready());
    assert_eq!(running.next_change, Some(secs(3.0)));
    let done = evaluate(&facts, &timings, secs(3.0));
    assert_eq!(done.phase, Phase::Succeeded);
    assert!(!done.ready());
    assert_eq!(done.next_change, None);
    match &done.containers[0].state {
        RunState::Terminated(t) => {
            assert_eq!(
                (t.exit_code, t.reason, t.finished),
                (0, "Completed", secs(3.0))
            )
        }
        other => panic!("unexpected state {other:?}"),
    }
}

#[test]
fn job_with_bad_command_fails() {
    let facts = job_pod(&["/bad-command"]);
    let timings = Timings::default();
    assert_eq!(evaluate(&facts, &timings, secs(0.1)).phase, Phase::Running);
    let done = evaluate(&facts, &timings, secs(1.0));
    assert_eq!(done.phase, Phase::Failed);
    assert!(matches!(&done.containers[0].state, RunState::Terminated(t) if t.exit_code == 1));
}

#[test]
fn plain_job_succeeds_after_default_run_time() {
    let facts = job_pod(&["echo", "hello"]);
    let timings = Timings {
        run_duration: secs(2.0),
        ..Timings::default()
    };
    assert_eq!(evaluate(&facts, &timings, secs(1.9)).phase, Phase::Running);
    assert_eq!(
        evaluate(&facts, &timings, secs(2.0)).phase,
        Phase::Succeeded
    );
}

#[test]
fn restart_policy_never_runs_to_completion_without_owner() {
    let facts = facts(json!({
        "metadata": {"name": "p"},
        "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox", "args": ["sleep", "2"]}]}
    }));
    assert!(facts.run_to_completion);
    assert_eq!(
        evaluate(&facts, &Timings::default(), secs(2.0)).phase,
        Phase::Succeeded
    );
}

#[test]
fn pod_fails_when_any_container_fails_and_waits_for_all() {
    let facts = facts(json!({
        "metadata": {"name": "p"},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "bad", "image": "busybox", "command": ["/bad-command"]},
            {"name": "slow", "image": "busybox", "command": ["sleep", "5"]}
        ]}
    }));
    let timings = Timings::default();
    let midway = evaluate(&facts, &timings, secs(2.0));
    assert_eq!(midway.phase, Phase::Running);
    assert!(!midway.ready());
    assert_eq!(midway.next_change, Some(secs(5.0)));
    assert_eq!(evaluate(&facts, &timings, secs(5.0)).phase, Phase::Failed);
}

#[test]
fn sleep_without_a_number_is_not_a_duration() {
    assert_eq!(find_sleep(&["sleep", "infinity"]), None);
    assert_eq!(
        find_sleep(&["sh", "-c", "sleep 1.5; true"]),
        Some(secs(1.5))
    );
    assert_eq!(find_sleep(&["sleep", "10s"]), Some(secs(10.0)));
}
