//! Lowering spec.replicas in the middle of a canary update whose new pods crash keeps the
//! ReplicaSets within maxSurge and maxUnavailable (Argo's basic-canary arithmetic run with the
//! new replica count).

use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_down_a_crashing_canary_update_keeps_surge_and_availability() {
    let (_env, ns, _controller) = setup("scale-mid-update").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "sc",
        4,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "sc", RolloutPhase::Healthy, TIMEOUT).await;
    let bad = "registry.invalid/does-not-exist:v2";
    set_image(&api, "sc", bad).await;
    // 4 replicas, maxSurge 25% = 1, maxUnavailable 25% = 1: stable 3, canary 2 never ready.
    harness::wait_for("crashing canary at its size", TIMEOUT, || async {
        let got = replicas_by_image(&ns, "sc").await;
        if got.get("app:v1") == Some(&(3, 3)) && got.get(bad).map(|c| c.0) == Some(2) {
            Ok(())
        } else {
            anyhow::bail!("{got:?}")
        }
    })
    .await
    .unwrap();

    api.patch(
        "sc",
        &Default::default(),
        &kube::api::Patch::Merge(json!({"spec": {"replicas": 2}})),
    )
    .await
    .unwrap();
    // 2 replicas, maxSurge 25% = 1 (rounded up), maxUnavailable 25% = 0 (rounded down): at
    // most 3 pods, at least 2 available: stable 2, canary 1.
    harness::wait_for("within the new limits", TIMEOUT, || async {
        let got = replicas_by_image(&ns, "sc").await;
        if got.get("app:v1") == Some(&(2, 2)) && got.get(bad).map(|c| c.0) == Some(1) {
            Ok(())
        } else {
            anyhow::bail!("{got:?}")
        }
    })
    .await
    .unwrap();
    // The counts of an update in progress are written within the status write interval.
    let status = harness::wait_for("the Rollout's counts", TIMEOUT, || async {
        let status = api.get("sc").await?.status.unwrap_or_default();
        if status.available_replicas == Some(2) {
            Ok(status)
        } else {
            anyhow::bail!("{status:?}")
        }
    })
    .await
    .unwrap();
    assert_eq!(status.current_step_index, Some(0));
}
