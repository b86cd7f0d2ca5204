//! `retry` after a failed analysis measures again, as Argo does: each retry gets a new
//! AnalysisRun (named `<run>.<n>`), the old Failed run stays as history, and only the new
//! run's verdict decides. The abort reads as Argo's: `Rollout aborted update to revision N:
//! Step-based analysis phase error/failed: <run message>`, in the Progressing condition, the
//! phase message and the `RolloutAborted` event.

use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::{RolloutConditionType, RolloutPhase};
use sluice_e2e::analysis::{step_runs, web_health_template};
use sluice_e2e::*;
use sluice_testenv::harness::wait_for;
use sluice_testenv::http_stub::HttpStub;

fn phase_of(run: &AnalysisRun) -> Option<AnalysisPhase> {
    run.status.as_ref().and_then(|s| s.phase.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_a_failed_step_analysis_measures_again_with_a_new_run() {
    let (_env, ns, _controller) = setup("retry-analysis").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    ns.apply_yaml(&web_health_template(&metric.url("/health")))
        .await
        .unwrap();
    ns.apply_yaml(&canary_rollout(
        "retry",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({"progressDeadlineSeconds": 600}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "retry", RolloutPhase::Healthy, TIMEOUT).await;

    // A bad metric: the step analysis fails and the update is aborted.
    metric.respond_json(200, &json!({"status": "bad"}));
    set_image(&api, "retry", "app:v2").await;
    let ro = wait_phase(&api, "retry", RolloutPhase::Degraded, TIMEOUT).await;
    wait_replicas(&ns, "retry", &[("app:v1", 2), ("app:v2", 0)], TIMEOUT).await;
    let runs = step_runs(&ns).await;
    assert_eq!(runs.len(), 1);
    let first = runs[0].metadata.name.clone().unwrap();
    let hash = ro
        .status
        .as_ref()
        .and_then(|s| s.current_pod_hash.clone())
        .unwrap();
    assert_eq!(first, format!("retry-{hash}-2-1"));
    assert_eq!(phase_of(&runs[0]), Some(AnalysisPhase::Failed));
    let run_message = runs[0]
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap();
    assert_eq!(
        run_message,
        "Metric \"web\" assessed Failed due to failed (1) > failureLimit (0)"
    );
    let aborted = format!(
        "Rollout aborted update to revision 2: Step-based analysis phase error/failed: {run_message}"
    );
    let status = ro.status.clone().unwrap();
    assert_eq!(
        status.message.as_deref(),
        Some(format!("RolloutAborted: {aborted}").as_str())
    );
    let progressing = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(RolloutConditionType::Progressing))
        .cloned()
        .unwrap();
    assert_eq!(progressing.reason.as_deref(), Some("RolloutAborted"));
    assert_eq!(progressing.message.as_deref(), Some(aborted.as_str()));
    let events = wait_for("the RolloutAborted event", TIMEOUT, || async {
        let events: Vec<String> = rollout_events(&ns, "retry")
            .await
            .into_iter()
            .filter(|(reason, _)| reason == "RolloutAborted")
            .map(|(_, message)| message)
            .collect();
        anyhow::ensure!(!events.is_empty(), "none yet");
        Ok(events)
    })
    .await
    .unwrap();
    assert!(events.iter().all(|m| *m == aborted), "{events:?}");

    // Retry with the metric still bad: a new run measures, fails, and aborts again.
    retry(&api, "retry").await;
    let second = format!("{first}.1");
    let runs = wait_for("a second step run to fail", TIMEOUT, || async {
        let runs = step_runs(&ns).await;
        anyhow::ensure!(
            runs.len() == 2 && phase_of(&runs[1]) == Some(AnalysisPhase::Failed),
            "{:?}",
            runs.iter()
                .map(|r| (r.metadata.name.clone(), phase_of(r)))
                .collect::<Vec<_>>()
        );
        Ok(runs)
    })
    .await
    .unwrap();
    assert_eq!(runs[1].metadata.name.as_deref(), Some(second.as_str()));
    assert_eq!(phase_of(&runs[0]), Some(AnalysisPhase::Failed), "kept");
    let ro = wait_phase(&api, "retry", RolloutPhase::Degraded, TIMEOUT).await;
    assert_eq!(
        ro.status.as_ref().and_then(|s| s.message.as_deref()),
        Some(format!("RolloutAborted: {aborted}").as_str())
    );
    wait_replicas(&ns, "retry", &[("app:v1", 2), ("app:v2", 0)], TIMEOUT).await;

    // The metric recovers; a retry measures once more and the update completes.
    metric.respond_json(200, &json!({"status": "ok"}));
    retry(&api, "retry").await;
    let ro = wait_phase(&api, "retry", RolloutPhase::Healthy, TIMEOUT).await;
    let status = ro.status.clone().unwrap();
    assert_eq!(status.stable_rs, status.current_pod_hash);
    wait_replicas(&ns, "retry", &[("app:v1", 0), ("app:v2", 2)], TIMEOUT).await;
    let runs = step_runs(&ns).await;
    let summary: Vec<(Option<String>, Option<AnalysisPhase>)> = runs
        .iter()
        .map(|r| (r.metadata.name.clone(), phase_of(r)))
        .collect();
    assert_eq!(
        summary,
        vec![
            (Some(first.clone()), Some(AnalysisPhase::Failed)),
            (Some(second), Some(AnalysisPhase::Failed)),
            (Some(format!("{first}.2")), Some(AnalysisPhase::Successful)),
        ]
    );
}
