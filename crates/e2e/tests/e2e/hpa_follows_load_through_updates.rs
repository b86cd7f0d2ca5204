//! kube-controller-manager's own HorizontalPodAutoscaler controller scales Rollouts on CPU
//! metrics, in the middle of a canary and of a blue-green update: the fake kubelet serves the
//! resource metrics API (`metrics.k8s.io`, as metrics-server does) and the test sets the load
//! its pods report through the namespace's `sluice-fake-load` ConfigMap, the whole load shared
//! by the ready pods that take traffic.
//!
//! Argo #2857: under load during a canary, the HPA grows the Rollout and the stable
//! ReplicaSet keeps to its share of it (never the HPA's maximum), and both sides come down
//! with the load.

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestNamespace, wait_for};
use sluice_e2e::*;

const MAX: i32 = 8;

/// Every pod asks for 100m of CPU; the HPA aims at 50% of it, so it wants one pod per 50m of
/// load.
fn hpa(target: &str) -> String {
    json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": target},
        "spec": {
            "scaleTargetRef": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": target},
            "minReplicas": 1,
            "maxReplicas": MAX,
            "metrics": [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}
            }}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}
        }
    })
    .to_string()
}

/// The load the namespace's pods report: `cpu` in all, shared by the ready pods `selector`
/// picks.
async fn set_load(ns: &TestNamespace, cpu: &str, selector: &str) {
    ns.apply_yaml(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sluice-fake-load"},
                "data": {"cpu": cpu, "selector": selector}})
        .to_string(),
    )
    .await
    .unwrap();
}

fn with_cpu_request(manifest: &str) -> String {
    let mut rollout: Value = serde_json::from_str(manifest).unwrap();
    rollout["spec"]["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "100m"}});
    rollout.to_string()
}

/// Waits until the HPA has computed a utilization from the metrics API and holds `replicas`.
async fn wait_hpa(ns: &TestNamespace, name: &str, replicas: i32) {
    let hpas: kube::Api<HorizontalPodAutoscaler> = ns.api();
    wait_for("the HPA to read metrics", TIMEOUT * 2, || async {
        let status = hpas.get(name).await?.status.unwrap_or_default();
        let measured = status.current_metrics.is_some_and(|m| !m.is_empty());
        if measured && status.desired_replicas == replicas {
            Ok(())
        } else {
            anyhow::bail!("desired {} (measured: {measured})", status.desired_replicas)
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_scales_a_canary_on_load_and_the_stable_keeps_its_share() {
    let (_env, ns, _controller) = setup("hpa-load-canary").await;
    let api = rollouts(&ns);
    let steps = json!([{"setWeight": 50}, {"pause": {}}]);
    ns.apply_yaml(&with_cpu_request(&canary_rollout(
        "lc",
        2,
        "app:v1",
        steps,
        json!({}),
    )))
    .await
    .unwrap();
    wait_phase(&api, "lc", RolloutPhase::Healthy, TIMEOUT).await;
    set_load(&ns, "100m", "").await;
    ns.apply_yaml(&hpa("lc")).await.unwrap();
    wait_hpa(&ns, "lc", 2).await;

    set_image(&api, "lc", "app:v2").await;
    wait_replicas(&ns, "lc", &[("app:v1", 1), ("app:v2", 1)], TIMEOUT).await;
    wait_phase(&api, "lc", RolloutPhase::Paused, TIMEOUT).await;

    // Three times the load: the HPA wants 6, half of them the stable's.
    set_load(&ns, "300m", "").await;
    let within_share = |got: &BTreeMap<String, (i32, i32)>| {
        assert!(
            spec_of(got, "app:v1") <= MAX / 2,
            "the stable beyond its share: {got:?}"
        );
        assert!(
            spec_of(got, "app:v1") + spec_of(got, "app:v2") <= MAX + 1,
            "{got:?}"
        );
    };
    follow_replicas(&ns, "lc", TIMEOUT * 2, within_share, |got| {
        got.get("app:v1") == Some(&(3, 3)) && got.get("app:v2") == Some(&(3, 3))
    })
    .await;
    wait_hpa(&ns, "lc", 6).await;
    let status = api.get("lc").await.unwrap().status.unwrap();
    assert_eq!(status.current_step_index, Some(1), "the step is unchanged");

    // The load falls back: both sides come down with it.
    set_load(&ns, "100m", "").await;
    follow_replicas(&ns, "lc", TIMEOUT * 2, within_share, |got| {
        got.get("app:v1") == Some(&(1, 1)) && got.get("app:v2") == Some(&(1, 1))
    })
    .await;
    promote(&api, "lc").await;
    wait_phase(&api, "lc", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "lc", &[("app:v2", 2)], TIMEOUT).await;
    wait_hpa(&ns, "lc", 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_scales_a_blue_green_update_on_the_load_of_the_active_side() {
    let (_env, ns, _controller) = setup("hpa-load-bluegreen").await;
    let api = rollouts(&ns);
    apply_blue_green_services(&ns, "lb").await;
    let manifest = blue_green_rollout("lb", 2, "app:v1", json!({"autoPromotionEnabled": false}));
    ns.apply_yaml(&with_cpu_request(&manifest.to_string()))
        .await
        .unwrap();
    wait_phase(&api, "lb", RolloutPhase::Healthy, TIMEOUT).await;
    // Traffic goes to the active Service's pods only.
    let active = |hash: String| format!("rollouts-pod-template-hash={hash}");
    let v1 = service_hash(&ns, "lb-active").await.unwrap();
    set_load(&ns, "100m", &active(v1.clone())).await;
    ns.apply_yaml(&hpa("lb")).await.unwrap();
    wait_hpa(&ns, "lb", 2).await;

    set_image(&api, "lb", "app:v2").await;
    wait_replicas(&ns, "lb", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
    wait_phase(&api, "lb", RolloutPhase::Paused, TIMEOUT).await;

    // Twice the load on the active pods: both sides grow to 4, the active never shrinks.
    set_load(&ns, "200m", &active(v1)).await;
    follow_replicas(
        &ns,
        "lb",
        TIMEOUT * 2,
        |got| assert!(spec_of(got, "app:v1") >= 2, "{got:?}"),
        |got| got.get("app:v1") == Some(&(4, 4)) && got.get("app:v2") == Some(&(4, 4)),
    )
    .await;
    wait_hpa(&ns, "lb", 4).await;

    promote(&api, "lb").await;
    wait_phase(&api, "lb", RolloutPhase::Healthy, TIMEOUT).await;
    // The traffic follows the active Service to the new pods, and falls back to 100m.
    let v2 = service_hash(&ns, "lb-active").await.unwrap();
    set_load(&ns, "100m", &active(v2)).await;
    follow_replicas(
        &ns,
        "lb",
        TIMEOUT * 2,
        |_| {},
        |got| got.get("app:v2") == Some(&(2, 2)) && spec_of(got, "app:v1") == 0,
    )
    .await;
    wait_hpa(&ns, "lb", 2).await;
}
