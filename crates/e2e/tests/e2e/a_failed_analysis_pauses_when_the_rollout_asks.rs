//! `rollouts.sluice.dev/on-analysis-failure: pause` (Argo #2866, which Argo never shipped): a
//! failed step analysis pauses the update where it is, instead of aborting it. The canary keeps
//! its pods; a promote measures again with a new run (the metric now good: the update goes
//! on); a second failure pauses again, and an abort then goes back as usual. Argo has no such
//! field and ignores the annotation (docs/analysis.md).

use serde_json::json;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::analysis::{step_runs, web_health_template};
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;

/// The phases of the step runs, oldest first.
async fn step_run_phases(ns: &TestNamespace) -> Vec<Option<AnalysisPhase>> {
    step_runs(ns)
        .await
        .iter()
        .map(|r| r.status.as_ref().and_then(|s| s.phase.clone()))
        .collect()
}

async fn pause_reasons(api: &kube::Api<sluice_api::Rollout>) -> Vec<String> {
    let ro = api.get("web").await.unwrap();
    ro.status
        .and_then(|s| s.pause_conditions)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.reason.map(|r| r.as_str().to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_analysis_pauses_and_a_person_decides() {
    let (_env, ns, _controller) = setup("pause-on-failure").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    ns.apply_yaml(&web_health_template(&metric.url("/health")))
        .await
        .unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&canary_rollout(
        "web",
        4,
        "app:v1",
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({"progressDeadlineSeconds": 600}),
    ))
    .unwrap();
    manifest["metadata"]["annotations"] =
        json!({"rollouts.sluice.dev/on-analysis-failure": "pause"});
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;

    // A bad metric: the step run fails, and the update pauses at half its pods.
    metric.respond_json(200, &json!({"status": "bad"}));
    set_image(&api, "web", "app:v2").await;
    let ro = wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    let status = ro.status.clone().unwrap();
    assert_eq!(status.message.as_deref(), Some("FailedAnalysisRun"));
    assert_ne!(status.abort, Some(true), "not aborted");
    assert_eq!(pause_reasons(&api).await, ["FailedAnalysisRun"]);
    assert_eq!(step_run_phases(&ns).await, [Some(AnalysisPhase::Failed)]);
    wait_replicas(&ns, "web", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;

    // The metric is good again and a person promotes: a new run measures, and passes.
    metric.respond_json(200, &json!({"status": "ok"}));
    promote(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "web", &[("app:v1", 0), ("app:v2", 4)], TIMEOUT).await;
    assert_eq!(
        step_run_phases(&ns).await,
        [Some(AnalysisPhase::Failed), Some(AnalysisPhase::Successful)]
    );

    // The next update fails too; this time the person aborts: back to the stable pods.
    metric.respond_json(200, &json!({"status": "bad"}));
    set_image(&api, "web", "app:v3").await;
    wait_for("the second pause", TIMEOUT, || async {
        let reasons = pause_reasons(&api).await;
        anyhow::ensure!(reasons == ["FailedAnalysisRun"], "{reasons:?}");
        Ok(())
    })
    .await
    .unwrap();
    abort(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Degraded, TIMEOUT).await;
    wait_replicas(&ns, "web", &[("app:v2", 4), ("app:v3", 0)], TIMEOUT).await;
}
