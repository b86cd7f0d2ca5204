//! `rollbackWindow`, as Argo's own rollback-window end-to-end test states it: with a window of
//! two revisions, going back to a ReplicaSet with fewer than two others created after it
//! skips the steps and the analysis (no new AnalysisRun, `RolloutCompleted ... Rollback within
//! window`); going back further analyses again.

use kube::api::ListParams;
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;

async fn step_runs(ns: &TestNamespace) -> usize {
    ns.api::<AnalysisRun>()
        .list(&ListParams::default().labels("rollout-type=Step"))
        .await
        .unwrap()
        .items
        .len()
}

/// Updates to `image` and waits until it is Healthy with `runs` step runs in all.
async fn update(ns: &TestNamespace, image: &str, runs: usize) {
    let api = rollouts(ns);
    set_image(&api, "window", image).await;
    wait_for(
        &format!("{image} healthy after {runs} runs"),
        TIMEOUT,
        || async {
            let ro = api.get("window").await?;
            let hash = ro.status.as_ref().and_then(|s| s.stable_rs.clone());
            let current = ro.status.as_ref().and_then(|s| s.current_pod_hash.clone());
            anyhow::ensure!(
                observed_phase(&ro) == Some(RolloutPhase::Healthy) && hash == current,
                "phase {:?}",
                observed_phase(&ro)
            );
            let n = step_runs(ns).await;
            anyhow::ensure!(n == runs, "{n} step runs");
            Ok(())
        },
    )
    .await
    .unwrap();
    // Creation times have a resolution of one second: keep revisions apart.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_within_the_window_skips_analysis_and_beyond_it_analyses_again() {
    let (_env, ns, _controller) = setup("rollback-window").await;
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "health"},
            "spec": {"metrics": [{
                "name": "web",
                "successCondition": "result.status == 'ok'",
                "provider": {"web": {"url": metric.url("/health")}}
            }]}
        })
        .to_string(),
    )
    .await
    .unwrap();
    ns.apply_yaml(&canary_rollout(
        "window",
        2,
        "app:one",
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({"rollbackWindow": {"revisions": 2}, "revisionHistoryLimit": 10}),
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "window", RolloutPhase::Healthy, TIMEOUT).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;

    update(&ns, "app:two", 1).await;
    update(&ns, "app:three", 2).await;
    update(&ns, "app:four", 3).await;
    // Back to two: only three was created between it and the stable four.
    update(&ns, "app:two", 3).await;
    let events = rollout_events(&ns, "window").await;
    let last_completed = events
        .iter()
        .rfind(|(reason, _)| reason == "RolloutCompleted")
        .map(|(_, m)| m.clone())
        .unwrap_or_default();
    assert!(
        last_completed.ends_with("): Rollback within window"),
        "{last_completed}"
    );
    assert!(
        last_completed.starts_with("Rollout completed update to revision 5 ("),
        "{last_completed}"
    );

    // Five, then back to one: two, three and four lie between them: beyond the window.
    update(&ns, "app:five", 4).await;
    update(&ns, "app:one", 5).await;
}
