//! Resuming an update paused on an Inconclusive step analysis (Argo CD's Resume: the pause
//! conditions cleared) measures the step again with a new AnalysisRun, as Argo does: still
//! Inconclusive, the update pauses again; Failed, it is aborted with Argo's message.

use serde_json::json;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;

/// The step runs as (name, phase), oldest first.
async fn step_runs(ns: &TestNamespace) -> Vec<(String, Option<AnalysisPhase>)> {
    let runs = sluice_e2e::analysis::step_runs(ns).await;
    runs.into_iter()
        .map(|r| {
            (
                r.metadata.name.unwrap_or_default(),
                r.status.and_then(|s| s.phase),
            )
        })
        .collect()
}

fn pause_reasons(ro: &sluice_api::Rollout) -> Vec<String> {
    ro.status
        .as_ref()
        .and_then(|s| s.pause_conditions.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.reason.as_ref().map(|r| r.as_str().to_string()))
        .collect()
}

/// Waits until the Rollout is paused on an Inconclusive run with `runs` step runs.
async fn wait_paused_inconclusive(ns: &TestNamespace, runs: usize) -> sluice_api::Rollout {
    let api = rollouts(ns);
    wait_for("a pause on an Inconclusive run", TIMEOUT, || async {
        let ro = api.get("resume").await?;
        let step_runs = step_runs(ns).await;
        anyhow::ensure!(
            pause_reasons(&ro) == ["InconclusiveAnalysisRun"] && step_runs.len() == runs,
            "{:?} {step_runs:?}",
            pause_reasons(&ro)
        );
        Ok(ro)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_an_inconclusive_step_analysis_measures_again() {
    let (_env, ns, _controller) = setup("resume-inconclusive").await;
    let api = rollouts(&ns);
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    ns.apply_yaml(&sluice_e2e::analysis::web_health_template(
        &metric.url("/health"),
    ))
    .await
    .unwrap();
    ns.apply_yaml(&canary_rollout(
        "resume",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({"progressDeadlineSeconds": 600}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "resume", RolloutPhase::Healthy, TIMEOUT).await;

    // Neither condition holds: the run is Inconclusive and the update pauses on it.
    metric.respond_json(200, &json!({"status": "unsure"}));
    set_image(&api, "resume", "app:v2").await;
    let ro = wait_paused_inconclusive(&ns, 1).await;
    let status = ro.status.clone().unwrap();
    assert_eq!(status.phase, Some(RolloutPhase::Paused));
    assert_eq!(status.message.as_deref(), Some("InconclusiveAnalysisRun"));
    assert_eq!(status.current_step_index, Some(1));
    let hash = status.current_pod_hash.clone().unwrap();
    let first = format!("resume-{hash}-2-1");
    assert_eq!(
        step_runs(&ns).await,
        vec![(first.clone(), Some(AnalysisPhase::Inconclusive))]
    );
    wait_replicas(&ns, "resume", &[("app:v1", 1), ("app:v2", 1)], TIMEOUT).await;

    // Resumed with the metric unchanged: a new run, Inconclusive again, paused again.
    promote(&api, "resume").await;
    let ro = wait_paused_inconclusive(&ns, 2).await;
    assert_eq!(
        ro.status.as_ref().and_then(|s| s.current_step_index),
        Some(1)
    );
    let second = format!("{first}.1");
    let runs = wait_for("the second run to finish", TIMEOUT, || async {
        let runs = step_runs(&ns).await;
        anyhow::ensure!(runs.get(1).is_some_and(|r| r.1.is_some()), "{runs:?}");
        Ok(runs)
    })
    .await
    .unwrap();
    assert_eq!(
        runs,
        vec![
            (first.clone(), Some(AnalysisPhase::Inconclusive)),
            (second.clone(), Some(AnalysisPhase::Inconclusive)),
        ]
    );

    // Resumed with a failing metric: the third run fails and the update is aborted.
    metric.respond_json(200, &json!({"status": "bad"}));
    promote(&api, "resume").await;
    let ro = wait_phase(&api, "resume", RolloutPhase::Degraded, TIMEOUT).await;
    assert_eq!(
        step_runs(&ns).await,
        vec![
            (first.clone(), Some(AnalysisPhase::Inconclusive)),
            (second, Some(AnalysisPhase::Inconclusive)),
            (format!("{first}.2"), Some(AnalysisPhase::Failed)),
        ]
    );
    assert_eq!(
        ro.status.as_ref().and_then(|s| s.message.as_deref()),
        Some(
            "RolloutAborted: Rollout aborted update to revision 2: Step-based analysis phase error/failed: Metric \"web\" assessed Failed due to failed (1) > failureLimit (0)"
        )
    );
    wait_replicas(&ns, "resume", &[("app:v1", 2), ("app:v2", 0)], TIMEOUT).await;
}
