//! NGINX and SMI traffic routing on the real control plane, with the Rollouts of Argo's own
//! end-to-end suite: the canary Ingress (a clone of the stable one, pointing at the canary
//! Service) and the TrafficSplit carry Argo's weights at every step; after promotion both are
//! back at 0 for the canary and the canary Ingress stays (owned by the Rollout, as in Argo).

use serde_json::Value;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};

const WEIGHT: &str = "nginx.ingress.kubernetes.io/canary-weight";

fn canary_weight(ingress: &Value) -> Option<i64> {
    ingress["metadata"]["annotations"][WEIGHT]
        .as_str()?
        .parse()
        .ok()
}

/// `(canary, stable)` weights of a TrafficSplit's backends.
fn split_weights(ts: &Value, canary: &str, stable: &str) -> Option<(i64, i64)> {
    let backends = ts["spec"]["backends"].as_array()?;
    let weight = |svc: &str| {
        backends.iter().find(|b| b["service"] == svc).and_then(|b| {
            b["weight"]
                .as_i64()
                .or_else(|| b["weight"].as_str()?.parse().ok())
        })
    };
    Some((weight(canary)?, weight(stable)?))
}

/// A controller speaking the TrafficSplit version Argo's e2e CRD serves.
async fn setup_v1alpha4(prefix: &str) -> (TestEnv, TestNamespace, RunningController) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    install_router_crds(&env).await;
    let ns = TestNamespace::create(&env, prefix)
        .await
        .expect("namespace");
    let mut args = controller_args(ns.name());
    args.traffic_split_api_version = "v1alpha4".into();
    let controller = start_controller_with_args(env.client(), args);
    (env, ns, controller)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_canary_ingress_follows_the_steps_and_stays_at_zero_after_promotion() {
    let (env, ns, _controller) = setup("nginx").await;
    install_router_crds(&env).await;
    let manifest = corpus_file("test/e2e/functional/nginx-template.yaml")
        .replace("REPLACEME", "shop")
        // Argo's template has no steps; its tests add them.
        .replace(
            "      stableService: shop-stable\n",
            "      stableService: shop-stable\n      steps:\n      - setWeight: 25\n      - pause: {}\n",
        );
    ns.apply_yaml(&manifest).await.unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "shop", RolloutPhase::Healthy, TIMEOUT).await;
    let canary_name = "shop-shop-ingress-canary";
    // After the first deploy the canary Ingress exists with weight 0.
    let created = wait_for("the canary Ingress", TIMEOUT, || async {
        Ok(json_of(&ingresses(&ns).get(canary_name).await?))
    })
    .await
    .unwrap();
    assert_eq!(canary_weight(&created), Some(0));
    let recorder = Recorder::start(ingresses(&ns), canary_name, canary_weight);

    set_image(&api, "shop", "nginx:1.20-alpine").await;
    wait_phase(&api, "shop", RolloutPhase::Paused, TIMEOUT).await;
    let canary = json_of(&ingresses(&ns).get(canary_name).await.unwrap());
    assert_eq!(canary_weight(&canary), Some(25));
    let annotations = &canary["metadata"]["annotations"];
    assert_eq!(annotations["nginx.ingress.kubernetes.io/canary"], "true");
    assert_eq!(annotations["kubernetes.io/ingress.class"], "nginx");
    assert_eq!(
        canary["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"],
        "shop-canary"
    );
    assert_eq!(canary["metadata"]["ownerReferences"][0]["kind"], "Rollout");
    assert_eq!(canary["metadata"]["ownerReferences"][0]["controller"], true);
    // 25% of 4 pods: one canary pod, the stable at full size.
    wait_replicas(
        &ns,
        "shop",
        &[("nginx:1.19-alpine", 4), ("nginx:1.20-alpine", 1)],
        TIMEOUT,
    )
    .await;

    promote(&api, "shop").await;
    wait_phase(&api, "shop", RolloutPhase::Healthy, TIMEOUT).await;
    wait_for("the canary weight back at 0", TIMEOUT, || async {
        let w = canary_weight(&json_of(&ingresses(&ns).get(canary_name).await?));
        anyhow::ensure!(w == Some(0), "{w:?}");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(recorder.values().await, vec![0, 25, 100, 0]);
    let stable = service_hash(&ns, "shop-stable").await;
    assert_eq!(service_hash(&ns, "shop-canary").await, stable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smi_and_nginx_together_split_traffic_by_the_timed_steps() {
    let (_env, ns, _controller) = setup_v1alpha4("smi-nginx").await;
    ns.apply_yaml(&corpus_file(
        "test/e2e/smi_ingress/rollout-smi-ingress-canary.yaml",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "rollout-smi-ingress-canary";
    let (canary_svc, stable_svc) = (
        "rollout-smi-ingress-canary-canary",
        "rollout-smi-ingress-canary-stable",
    );
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let split = "rollout-smi-ingress-canary-trafficsplit";
    let ts = wait_for("the TrafficSplit", TIMEOUT, || async {
        Ok(json_of(&traffic_splits(&ns).get(split).await?))
    })
    .await
    .unwrap();
    assert_eq!(
        ts["spec"]["service"], stable_svc,
        "the root Service defaults to stable"
    );
    assert_eq!(split_weights(&ts, canary_svc, stable_svc), Some((0, 100)));
    let recorder = Recorder::start(traffic_splits(&ns), split, move |ts| {
        split_weights(ts, canary_svc, stable_svc)
    });
    let ingress_recorder = Recorder::start(
        ingresses(&ns),
        "rollout-smi-ingress-canary-rollout-smi-ingress-canary-stable-canary",
        canary_weight,
    );

    // setWeight 5, pause 15 s, setWeight 50, pause 15 s, then promotion.
    let before = api.get(name).await.unwrap().status.unwrap().stable_rs;
    set_image(&api, name, "nginx:1.20-alpine").await;
    wait_for(
        "the update to complete",
        std::time::Duration::from_secs(150),
        || async {
            let ro = api.get(name).await?;
            let status = ro.status.unwrap_or_default();
            anyhow::ensure!(
                observed_phase_is_healthy(&status)
                    && status.stable_rs == status.current_pod_hash
                    && status.stable_rs != before,
                "not yet"
            );
            Ok(())
        },
    )
    .await
    .unwrap();
    wait_for("the canary weight back at 0", TIMEOUT, || async {
        let ts = json_of(&traffic_splits(&ns).get(split).await?);
        anyhow::ensure!(split_weights(&ts, canary_svc, stable_svc) == Some((0, 100)));
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (5, 95), (50, 50), (100, 0), (0, 100)]
    );
    assert_eq!(ingress_recorder.values().await, vec![0, 5, 50, 100, 0]);
}

fn observed_phase_is_healthy(status: &sluice_api::RolloutStatus) -> bool {
    status.phase == Some(RolloutPhase::Healthy)
}
