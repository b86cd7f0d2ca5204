//! `promote --full` on an aborted canary clears the abort and promotes, as Argo's
//! TestCanaryPromoteFull: abort at a pause step, then promote --full -> Healthy.

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_full_on_an_aborted_canary_goes_healthy() {
    let (_env, ns, _controller) = setup("promote-full-abort").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "pf",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}, {"setWeight": 100}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "pf", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "pf", "app:v2").await;
    wait_phase(&api, "pf", RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(&ns, "pf", &[("app:v1", 1), ("app:v2", 1)], TIMEOUT).await;

    abort(&api, "pf").await;
    let ro = wait_phase(&api, "pf", RolloutPhase::Degraded, TIMEOUT).await;
    assert_eq!(ro.status.unwrap().abort, Some(true));
    wait_replicas(&ns, "pf", &[("app:v1", 2)], TIMEOUT).await;

    promote_full(&api, "pf").await;
    let ro = wait_phase(&api, "pf", RolloutPhase::Healthy, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.abort, None);
    assert_eq!(status.aborted_at, None);
    assert_eq!(status.promote_full, None);
    assert_eq!(status.current_step_index, Some(4));
    assert_eq!(status.stable_rs, status.current_pod_hash);
    assert_eq!(status.message, None);
    wait_replicas(&ns, "pf", &[("app:v2", 2)], TIMEOUT).await;
    // No analysis is involved: none was started.
    let runs: Api<AnalysisRun> = ns.api();
    assert!(
        runs.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let events: Api<Event> = ns.api();
    let reasons: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("pf"))
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.iter().any(|r| r == "RolloutAborted"), "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r == "RolloutCompleted"),
        "{reasons:?}"
    );
}
