//! A HorizontalPodAutoscaler drives a Rollout through the scale subresource: a real HPA object
//! names the Rollout, whose `/scale` gives its replicas and a pod selector that finds its
//! pods, and `spec.replicas` changed through `/scale` in the middle of a canary and of a
//! blue-green update is followed at every step. The test writes `/scale` itself, as the HPA
//! does, to reach exact counts at exact moments: its namespace declares no load, so the fake
//! kubelet's metrics API reports no pod there and the HPA controller leaves the target alone.
//! `hpa_follows_load_through_updates` has the HPA controller scale on metrics.
//!
//! Argo #3849: during a canary the stable ReplicaSet is never scaled above its share of the
//! new count (stable + canary stay within the new count plus the surge).

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestNamespace, wait_for};
use sluice_e2e::*;

/// What the HPA controller writes: `spec.replicas` of the scale subresource.
async fn scale_to(api: &Api<Rollout>, name: &str, replicas: i32) {
    api.patch_scale(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

fn hpa(target: &str) -> String {
    json!({
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": target},
        "spec": {
            "scaleTargetRef": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": target},
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}
            }}]
        }
    })
    .to_string()
}

/// Resolves the HPA object's `scaleTargetRef` as the HPA controller does: the target's
/// `/scale` subresource, its pod selector, and the pods that selector finds, which must be
/// the `/scale` status count. (Resolved here: with no metrics for its pods the HPA controller
/// reports nothing of them.)
async fn wait_hpa_resolves_scale(ns: &TestNamespace, name: &str, replicas: i32) {
    let hpas: Api<HorizontalPodAutoscaler> = ns.api();
    let target = hpas.get(name).await.unwrap().spec.unwrap().scale_target_ref;
    assert_eq!(
        (target.api_version.as_deref(), target.kind.as_str()),
        (Some("argoproj.io/v1alpha1"), "Rollout")
    );
    let api = rollouts(ns);
    wait_for("the HPA's target to resolve /scale", TIMEOUT, || async {
        let (spec, status, selector) = scale_of(&api, &target.name).await;
        let pods: Api<Pod> = ns.api();
        let selected = pods
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .len();
        if !selector.is_empty()
            && (spec, status) == (replicas, replicas)
            && selected == replicas as usize
        {
            Ok(())
        } else {
            anyhow::bail!("scale {spec}/{status} selector {selector:?} selects {selected} pods")
        }
    })
    .await
    .unwrap();
}

/// The Rollout's scale subresource: replicas, status replicas (HPAReplicas) and selector.
async fn scale_of(api: &Api<Rollout>, name: &str) -> (i32, i32, String) {
    let scale: Scale = api.get_scale(name).await.unwrap();
    let status = scale.status.unwrap_or_default();
    (
        scale.spec.and_then(|s| s.replicas).unwrap_or(0),
        status.replicas,
        status.selector.unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_scales_a_canary_mid_update_without_growing_the_stable() {
    let (_env, ns, _controller) = setup("hpa-canary").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "hc",
        4,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "hc", RolloutPhase::Healthy, TIMEOUT).await;
    ns.apply_yaml(&hpa("hc")).await.unwrap();
    wait_hpa_resolves_scale(&ns, "hc", 4).await;
    assert_eq!(scale_of(&api, "hc").await, (4, 4, "app=hc".to_string()));

    set_image(&api, "hc", "app:v2").await;
    wait_replicas(&ns, "hc", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
    wait_phase(&api, "hc", RolloutPhase::Paused, TIMEOUT).await;

    // Up to 8 at 50%: 4 and 4, the stable never above its share, nothing above 8 + surge 2.
    scale_to(&api, "hc", 8).await;
    follow_replicas(
        &ns,
        "hc",
        TIMEOUT,
        |got| {
            assert!(spec_of(got, "app:v1") <= 4, "{got:?}");
            assert!(
                spec_of(got, "app:v1") + spec_of(got, "app:v2") <= 10,
                "{got:?}"
            );
        },
        |got| got.get("app:v1") == Some(&(4, 4)) && got.get("app:v2") == Some(&(4, 4)),
    )
    .await;
    // The HPA sees every pod of the update; the step is unchanged.
    wait_for("HPAReplicas", TIMEOUT, || async {
        let s = scale_of(&api, "hc").await;
        if s == (8, 8, "app=hc".to_string()) {
            Ok(())
        } else {
            anyhow::bail!("{s:?}")
        }
    })
    .await
    .unwrap();
    let ro = api.get("hc").await.unwrap();
    assert_eq!(ro.status.unwrap().current_step_index, Some(1));

    // Down to 2 at 50%: 1 and 1.
    scale_to(&api, "hc", 2).await;
    follow_replicas(
        &ns,
        "hc",
        TIMEOUT,
        |got| assert!(spec_of(got, "app:v1") <= 4, "{got:?}"),
        |got| got.get("app:v1") == Some(&(1, 1)) && got.get("app:v2") == Some(&(1, 1)),
    )
    .await;
    promote(&api, "hc").await;
    wait_phase(&api, "hc", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "hc", &[("app:v2", 2)], TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_scales_a_blue_green_update_on_both_sides() {
    let (_env, ns, _controller) = setup("hpa-bluegreen").await;
    let api = rollouts(&ns);
    apply_blue_green(
        &ns,
        "hb",
        2,
        "app:v1",
        json!({"autoPromotionEnabled": false}),
    )
    .await;
    wait_phase(&api, "hb", RolloutPhase::Healthy, TIMEOUT).await;
    ns.apply_yaml(&hpa("hb")).await.unwrap();
    wait_hpa_resolves_scale(&ns, "hb", 2).await;

    set_image(&api, "hb", "app:v2").await;
    wait_replicas(&ns, "hb", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
    wait_phase(&api, "hb", RolloutPhase::Paused, TIMEOUT).await;

    // The preview and the active ReplicaSet both follow the new count; the active one never
    // goes below what it had (its pods serve the traffic).
    scale_to(&api, "hb", 4).await;
    follow_replicas(
        &ns,
        "hb",
        TIMEOUT,
        |got| assert!(spec_of(got, "app:v1") >= 2, "{got:?}"),
        |got| got.get("app:v1") == Some(&(4, 4)) && got.get("app:v2") == Some(&(4, 4)),
    )
    .await;
    // Blue-green reports the active ReplicaSet to the HPA.
    let scale = scale_of(&api, "hb").await;
    assert_eq!((scale.0, scale.1), (4, 4));
    assert!(
        scale.2.starts_with("app=hb,rollouts-pod-template-hash="),
        "{scale:?}"
    );

    promote(&api, "hb").await;
    wait_phase(&api, "hb", RolloutPhase::Healthy, TIMEOUT).await;
    let ro = api.get("hb").await.unwrap();
    let status = ro.status.unwrap();
    assert_eq!(status.hpa_replicas, Some(4));
    assert_eq!(status.available_replicas, Some(4));
}
