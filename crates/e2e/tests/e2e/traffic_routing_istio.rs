//! Istio traffic routing on the real control plane with Istio's CRDs, using the Rollouts of
//! Argo's own Istio end-to-end suite unchanged: the VirtualService weights at every step are
//! Argo's (0, the step's weight, 100 at the end of the steps, back to 0 once promoted, with
//! both Services then selecting the new pods); an abort sends everything back to stable before
//! the canary loses a pod; subset split labels the DestinationRule's subsets with the pods'
//! hashes.

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::ListParams;
use serde_json::Value;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_testenv::harness::{TestNamespace, wait_for};

async fn vs(ns: &TestNamespace, name: &str) -> Value {
    json_of(&virtual_services(ns).get(name).await.unwrap())
}

async fn rollout_hashes(ns: &TestNamespace, rollout: &str) -> (Option<String>, Option<String>) {
    let ro = rollouts(ns).get(rollout).await.unwrap();
    let status = ro.status.unwrap_or_default();
    (status.stable_rs, status.current_pod_hash)
}

/// Spec replicas of the ReplicaSet with `hash`.
async fn replicas_of(ns: &TestNamespace, hash: &str) -> i32 {
    ns.api::<ReplicaSet>()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .find(|rs| rs.pod_hash() == Some(hash))
        .map_or(0, |rs| rs.spec_replicas())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istio_host_split_weights_follow_the_steps_and_an_abort_returns_traffic_first() {
    let (env, ns, _controller) = setup("istio-host").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&corpus_file("test/e2e/istio/istio-host-split.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    let name = "istio-host-split";
    let (canary_svc, stable_svc) = ("istio-host-split-canary", "istio-host-split-stable");
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let recorder = Recorder::start(virtual_services(&ns), "istio-host-split-vsvc", move |v| {
        vs_weights(v, canary_svc, stable_svc)
    });
    assert_eq!(
        vs_weights(
            &vs(&ns, "istio-host-split-vsvc").await,
            canary_svc,
            stable_svc
        ),
        Some((0, 100))
    );

    // setWeight 10, then an indefinite pause.
    set_image(&api, name, "nginx:1.20-alpine").await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    let (stable, current) = rollout_hashes(&ns, name).await;
    let (stable, current) = (stable.unwrap(), current.unwrap());
    assert_eq!(
        vs_weights(
            &vs(&ns, "istio-host-split-vsvc").await,
            canary_svc,
            stable_svc
        ),
        Some((10, 90))
    );
    assert_eq!(
        service_hash(&ns, canary_svc).await.as_deref(),
        Some(current.as_str())
    );
    assert_eq!(
        service_hash(&ns, stable_svc).await.as_deref(),
        Some(stable.as_str())
    );
    let weights = api
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap()
        .canary
        .unwrap()
        .weights
        .unwrap();
    assert_eq!(weights.canary.as_ref().unwrap().weight, Some(10));
    assert_eq!(weights.stable.as_ref().unwrap().weight, Some(90));
    assert_eq!(
        weights
            .canary
            .as_ref()
            .unwrap()
            .pod_template_hash
            .as_deref(),
        Some(current.as_str())
    );

    // Promote: 100 to the canary at the end of the steps, then back to 0 with both Services
    // on the new pods.
    promote(&api, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    wait_for("the stable Service on the new pods", TIMEOUT, || async {
        anyhow::ensure!(service_hash(&ns, stable_svc).await.as_deref() == Some(current.as_str()));
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(
        vs_weights(
            &vs(&ns, "istio-host-split-vsvc").await,
            canary_svc,
            stable_svc
        ),
        Some((0, 100))
    );
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (10, 90), (100, 0), (0, 100)],
        "VirtualService weights over the update"
    );

    // An update aborted at 10%: the weight is back at 0 while the canary still has its pods.
    set_image(&api, name, "nginx:1.21-alpine").await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    let (_, aborted_hash) = rollout_hashes(&ns, name).await;
    let aborted_hash = aborted_hash.unwrap();
    abort(&api, name).await;
    wait_vs_weights(
        &ns,
        "istio-host-split-vsvc",
        (canary_svc, stable_svc),
        (0, 100),
    )
    .await;
    assert_eq!(
        replicas_of(&ns, &aborted_hash).await,
        1,
        "canary kept while traffic leaves it"
    );
    assert_eq!(
        service_hash(&ns, canary_svc).await.as_deref(),
        Some(current.as_str())
    );
    wait_phase(&api, name, RolloutPhase::Degraded, TIMEOUT).await;
    // abortScaleDownDelaySeconds (30 s by default with a router), then the canary goes.
    wait_for("the aborted canary scaled down", TIMEOUT, || async {
        anyhow::ensure!(replicas_of(&ns, &aborted_hash).await == 0);
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istio_subset_split_labels_the_subsets_with_the_pod_hashes() {
    let (env, ns, _controller) = setup("istio-subset").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&corpus_file("test/e2e/istio/istio-subset-split.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    let name = "istio-subset-split";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, name, "nginx:1.20-alpine").await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    let (stable, current) = rollout_hashes(&ns, name).await;
    let dr = json_of(
        &router_api(
            &ns,
            "networking.istio.io",
            "v1alpha3",
            "DestinationRule",
            "destinationrules",
        )
        .get("istio-subset-split-destrule")
        .await
        .unwrap(),
    );
    let subset = |n: &str| {
        dr["spec"]["subsets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .and_then(|s| s["labels"]["rollouts-pod-template-hash"].as_str())
            .map(str::to_string)
    };
    assert_eq!(subset("canary"), current);
    assert_eq!(subset("stable"), stable);
    let route = vs(&ns, "istio-subset-split-vsvc").await;
    let weight_of = |subset: &str| {
        route["spec"]["http"][0]["route"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["destination"]["subset"] == subset)
            .and_then(|d| d["weight"].as_i64())
    };
    assert_eq!(
        (weight_of("canary"), weight_of("stable")),
        (Some(10), Some(90))
    );
    promote(&api, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
}
