//! Blue-green status counts, as in Argo: readyReplicas, availableReplicas, HPAReplicas and the
//! selector are the active ReplicaSet's (what serves traffic and what an HPA scales), not the
//! sum over the preview and the old ReplicaSets; replicas and updatedReplicas count all pods
//! and the new ones.

use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::wait_for;

/// (replicas, updatedReplicas, readyReplicas, availableReplicas, HPAReplicas)
fn counts(ro: &Rollout) -> (i32, i32, i32, i32, i32) {
    let s = ro.status.clone().unwrap_or_default();
    (
        s.replicas.unwrap_or(0),
        s.updated_replicas.unwrap_or(0),
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
        s.hpa_replicas.unwrap_or(0),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_available_and_hpa_counts_are_the_active_replica_sets() {
    let (_env, ns, _controller) = setup("bg-counts").await;
    let api = rollouts(&ns);
    apply_blue_green(
        &ns,
        "cnt",
        2,
        "app:v1",
        json!({"autoPromotionEnabled": false, "scaleDownDelaySeconds": 600}),
    )
    .await;
    let ro = wait_phase(&api, "cnt", RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(counts(&ro), (2, 2, 2, 2, 2));
    let v1 = ro.status.unwrap().current_pod_hash.unwrap();

    // Preview up beside the active pods: 4 pods, 2 of them updated; 2 serve.
    set_image(&api, "cnt", "app:v2").await;
    wait_phase(&api, "cnt", RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(&ns, "cnt", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
    let ro = wait_for("the counts of the preview phase", TIMEOUT, || async {
        let ro = api.get("cnt").await?;
        if counts(&ro).0 == 4 {
            Ok(ro)
        } else {
            anyhow::bail!("{:?}", counts(&ro))
        }
    })
    .await
    .unwrap();
    assert_eq!(counts(&ro), (4, 2, 2, 2, 2));
    let selector = ro.status.unwrap().selector.unwrap();
    assert!(
        selector.contains(&format!("rollouts-pod-template-hash={v1}")),
        "{selector}"
    );

    // Switched (Argo's TestBlueGreenUpdate: 6 current, 3 updated, 3 ready, 3 available for 3
    // replicas while the old pods wait out their delay).
    promote(&api, "cnt").await;
    let ro = wait_phase(&api, "cnt", RolloutPhase::Healthy, TIMEOUT).await;
    let v2 = ro
        .status
        .as_ref()
        .unwrap()
        .current_pod_hash
        .clone()
        .unwrap();
    assert_eq!(counts(&ro), (4, 2, 2, 2, 2));
    let selector = ro.status.unwrap().selector.unwrap();
    assert!(
        selector.contains(&format!("rollouts-pod-template-hash={v2}")),
        "{selector}"
    );
}
