//! After a blue-green abort, as in Argo, the preview Service stays on the new ReplicaSet (the
//! failed version stays reachable there for debugging) while the active Service stays on the
//! stable pods; the new pods still go after abortScaleDownDelaySeconds.

use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_leaves_the_preview_service_on_the_aborted_version() {
    let (_env, ns, _controller) = setup("bg-abort-preview").await;
    let api = rollouts(&ns);
    apply_blue_green(
        &ns,
        "ab",
        2,
        "app:v1",
        json!({"autoPromotionEnabled": false, "abortScaleDownDelaySeconds": 3}),
    )
    .await;
    let ro = wait_phase(&api, "ab", RolloutPhase::Healthy, TIMEOUT).await;
    let v1 = ro.status.unwrap().current_pod_hash.unwrap();

    set_image(&api, "ab", "app:v2").await;
    let ro = wait_phase(&api, "ab", RolloutPhase::Paused, TIMEOUT).await;
    let v2 = ro.status.unwrap().current_pod_hash.unwrap();
    assert_eq!(service_hash(&ns, "ab-preview").await, Some(v2.clone()));

    abort(&api, "ab").await;
    let ro = wait_phase(&api, "ab", RolloutPhase::Degraded, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(
        status.message.as_deref(),
        Some("RolloutAborted: Rollout aborted update to revision 2")
    );
    assert_eq!(
        status.blue_green.and_then(|b| b.preview_selector),
        Some(v2.clone())
    );
    assert_eq!(service_hash(&ns, "ab-active").await, Some(v1.clone()));
    assert_eq!(service_hash(&ns, "ab-preview").await, Some(v2.clone()));

    // The aborted pods go after the delay; the preview still names their version.
    wait_replicas(&ns, "ab", &[("app:v1", 2)], TIMEOUT).await;
    assert_eq!(service_hash(&ns, "ab-preview").await, Some(v2.clone()));
}
