//! previewReplicaCount with auto-promotion, as in Argo: the preview stays at
//! previewReplicaCount through pre-promotion analysis and the BlueGreenPause of
//! autoPromotionSeconds; then it scales up to full size, and the active Service switches once
//! it is fully available.

use kube::api::ListParams;
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::wait_for;
use sluice_testenv::http_stub::HttpStub;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_stays_at_preview_replica_count_through_analysis_and_the_timed_pause() {
    let (_env, ns, _controller) = setup("bg-preview-count").await;
    let api = rollouts(&ns);
    let pre = HttpStub::start().await.unwrap();
    pre.respond_json(200, &json!({"status": "ok"}));
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "pre-check"},
            "spec": {"metrics": [{
                "name": "web", "interval": "1s", "count": 1,
                "successCondition": "result.status == 'ok'",
                "provider": {"web": {"url": pre.url("/")}}
            }]}
        })
        .to_string(),
    )
    .await
    .unwrap();
    apply_blue_green(
        &ns,
        "pc",
        3,
        "app:v1",
        json!({
            "previewReplicaCount": 1,
            "autoPromotionSeconds": 8,
            "scaleDownDelaySeconds": 600,
            "prePromotionAnalysis": {"templates": [{"templateName": "pre-check"}]}
        }),
    )
    .await;
    let ro = wait_phase(&api, "pc", RolloutPhase::Healthy, TIMEOUT).await;
    let v1 = ro.status.unwrap().current_pod_hash.unwrap();

    set_image(&api, "pc", "app:v2").await;
    let ro = wait_phase(&api, "pc", RolloutPhase::Paused, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.message.as_deref(), Some("BlueGreenPause"));
    assert_eq!(status.controller_pause, Some(true));
    let v2 = status.current_pod_hash.clone().unwrap();
    // Paused at preview size, after the analysis passed, traffic still on v1.
    let runs = ns
        .api::<AnalysisRun>()
        .list(&ListParams::default().labels("rollout-type=PrePromotion"))
        .await
        .unwrap()
        .items;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].status.as_ref().and_then(|s| s.phase.clone()),
        Some(AnalysisPhase::Successful)
    );
    let by_image = replicas_by_image(&ns, "pc").await;
    assert_eq!(by_image.get("app:v2").map(|c| c.0), Some(1), "{by_image:?}");
    assert_eq!(by_image.get("app:v1").map(|c| c.0), Some(3), "{by_image:?}");
    assert_eq!(service_hash(&ns, "pc-active").await, Some(v1.clone()));
    assert_eq!(service_hash(&ns, "pc-preview").await, Some(v2.clone()));
    assert_ne!(
        status
            .blue_green
            .and_then(|b| b.scale_up_preview_check_point),
        Some(true)
    );

    // autoPromotionSeconds later: scaled up, then switched, never to a partly available v2.
    let v2_image = "app:v2";
    wait_for("switched to a fully available v2", TIMEOUT, || async {
        let active = service_hash(&ns, "pc-active").await;
        if active.as_deref() != Some(v2.as_str()) {
            anyhow::bail!("active {active:?}");
        }
        let by_image = replicas_by_image(&ns, "pc").await;
        assert_eq!(by_image.get(v2_image), Some(&(3, 3)), "{by_image:?}");
        Ok(())
    })
    .await
    .unwrap();
    let ro = wait_phase(&api, "pc", RolloutPhase::Healthy, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.stable_rs.as_deref(), Some(v2.as_str()));
    assert_eq!(status.pause_conditions, None);
    wait_replicas(&ns, "pc", &[("app:v1", 3), ("app:v2", 3)], TIMEOUT).await;
    let events = rollout_events(&ns, "pc").await;
    assert!(
        events.contains(&(
            "RolloutPaused".to_string(),
            "Rollout is paused (BlueGreenPause)".to_string()
        )),
        "{events:#?}"
    );
}
