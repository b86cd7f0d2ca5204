//! Blue-green fast rollback, as in Argo: going back to a ReplicaSet whose pods are still up
//! within its scale-down delay switches the active Service to it at once and makes it stable,
//! with no BlueGreenPause and no new pre- or post-promotion analysis, even where the update to
//! it needed all three.

use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_engine::labels::SCALE_DOWN_DEADLINE;
use sluice_testenv::harness::{ARGO_1_10, ArgoController, TestEnv, TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;

async fn runs_of(ns: &TestNamespace, kind: &str) -> Vec<AnalysisRun> {
    ns.api::<AnalysisRun>()
        .list(&ListParams::default().labels(&format!("rollout-type={kind}")))
        .await
        .unwrap()
        .items
}

async fn pre_promotion_runs(ns: &TestNamespace) -> Vec<AnalysisRun> {
    runs_of(ns, "PrePromotion").await
}

async fn post_promotion_runs(ns: &TestNamespace) -> Vec<AnalysisRun> {
    runs_of(ns, "PostPromotion").await
}

async fn deadline_of(ns: &TestNamespace, name: &str) -> Option<String> {
    let rss: kube::Api<k8s_openapi::api::apps::v1::ReplicaSet> = ns.api();
    let rs = rss.get(name).await.unwrap();
    rs.annotation(SCALE_DOWN_DEADLINE).map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_within_the_scale_down_delay_switches_at_once_without_pause_or_analysis() {
    let (_env, ns, _controller) = setup("bg-fast-rollback").await;
    fast_rollback(&ns, |_| "Fast rollback".to_string()).await;
}

/// The same, under Argo Rollouts 1.9.1's own controller: what Sluice does is what Argo does,
/// but for the completion's words, which 1.10 changed and Sluice follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_rollback_within_the_scale_down_delay_switches_at_once_without_pause_or_analysis() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, "bg-fast-rollback-argo")
        .await
        .expect("test namespace");
    let _argo = ArgoController::start(&env, ns.name(), &[])
        .await
        .expect("Argo Rollouts' controller");
    fast_rollback(&ns, |v1| {
        format!("Rollback to 'fr-{v1}' within scaleDownDelay")
    })
    .await;
}

/// And under Argo 1.10's, whose words Sluice's are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_1_10_rollback_within_the_scale_down_delay_is_a_fast_rollback() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, "bg-fast-rollback-argo-110")
        .await
        .expect("test namespace");
    let _argo = ArgoController::start_version(&env, ns.name(), &[], ARGO_1_10)
        .await
        .expect("Argo Rollouts' controller");
    fast_rollback(&ns, |_| "Fast rollback".to_string()).await;
}

/// `reason` gives the completion's reason from the first revision's hash.
async fn fast_rollback(ns: &TestNamespace, reason: impl Fn(&str) -> String) {
    let api = rollouts(ns);
    let pre = HttpStub::start().await.unwrap();
    pre.respond_json(200, &json!({"status": "ok"}));
    for template in ["pre-check", "post-check"] {
        ns.apply_yaml(
            &json!({
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "AnalysisTemplate",
                "metadata": {"name": template},
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
    }
    apply_blue_green(
        ns,
        "fr",
        2,
        "app:v1",
        json!({
            "autoPromotionEnabled": false,
            "scaleDownDelaySeconds": 600,
            "prePromotionAnalysis": {"templates": [{"templateName": "pre-check"}]},
            "postPromotionAnalysis": {"templates": [{"templateName": "post-check"}]}
        }),
    )
    .await;
    let ro = wait_phase(&api, "fr", RolloutPhase::Healthy, TIMEOUT).await;
    let v1 = ro.status.unwrap().current_pod_hash.unwrap();

    // The update to v2: analysed, then paused until promoted.
    set_image(&api, "fr", "app:v2").await;
    let ro = wait_phase(&api, "fr", RolloutPhase::Paused, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.message.as_deref(), Some("BlueGreenPause"));
    let v2 = status.current_pod_hash.unwrap();
    let runs = pre_promotion_runs(ns).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].status.as_ref().and_then(|s| s.phase.clone()),
        Some(AnalysisPhase::Successful),
        "the pause comes after the analysis"
    );
    // Promoted as `kubectl argo rollouts promote` does (the pause conditions cleared). Argo's
    // controller can miss that change (it writes the Rollout it last patched back into its
    // cache over a newer one, and a promote repeated on a promoted status changes nothing):
    // while the phase still reads Paused, the Rollout is touched so that a watch event brings
    // it the current one. Stable once the post-promotion analysis has passed.
    promote(&api, "fr").await;
    let touches = std::sync::atomic::AtomicU32::new(0);
    let ro = wait_for("the promotion", TIMEOUT, || async {
        let ro = api.get("fr").await?;
        match observed_phase(&ro) {
            Some(RolloutPhase::Healthy) => Ok(ro),
            Some(RolloutPhase::Paused) => {
                tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                promote(&api, "fr").await;
                let n = touches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let touch = json!({"metadata": {"annotations": {"e2e-touch": n.to_string()}}});
                api.patch("fr", &PatchParams::default(), &Patch::Merge(&touch))
                    .await?;
                anyhow::bail!("paused")
            }
            other => anyhow::bail!("{other:?}"),
        }
    })
    .await
    .unwrap();
    assert_eq!(ro.status.unwrap().stable_rs.as_deref(), Some(v2.as_str()));
    assert_eq!(service_hash(ns, "fr-active").await, Some(v2.clone()));
    let runs = post_promotion_runs(ns).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].status.as_ref().and_then(|s| s.phase.clone()),
        Some(AnalysisPhase::Successful)
    );
    // v1 waits out its scale-down delay with its pods up.
    wait_replicas(ns, "fr", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
    assert!(deadline_of(ns, &format!("fr-{v1}")).await.is_some());

    // Back to v1: switched without a promote (a BlueGreenPause would hold it until one), and
    // stable without a post-promotion analysis.
    set_image(&api, "fr", "app:v1").await;
    wait_for("the active Service back on v1", TIMEOUT, || async {
        match service_hash(ns, "fr-active").await {
            Some(h) if h == v1 => Ok(()),
            other => anyhow::bail!("{other:?}"),
        }
    })
    .await
    .unwrap();
    let ro = wait_phase(&api, "fr", RolloutPhase::Healthy, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.current_pod_hash.as_deref(), Some(v1.as_str()));
    assert_eq!(status.stable_rs.as_deref(), Some(v1.as_str()));
    assert_eq!(status.pause_conditions, None);
    assert_eq!(
        service_hash(ns, "fr-preview").await.as_deref(),
        Some(v1.as_str())
    );
    assert_eq!(
        pre_promotion_runs(ns).await.len(),
        1,
        "no new pre-promotion analysis"
    );
    assert_eq!(
        post_promotion_runs(ns).await.len(),
        1,
        "no new post-promotion analysis"
    );
    let completed: Vec<String> = rollout_events(ns, "fr")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "RolloutCompleted")
        .map(|(_, message)| message)
        .collect();
    assert_eq!(
        completed.last(),
        Some(&format!(
            "Rollout completed update to revision 3 ({v1}): {}",
            reason(&v1)
        )),
        "{completed:#?}"
    );
    // v1 stays; v2 now waits out its own delay, pods up.
    assert_eq!(deadline_of(ns, &format!("fr-{v1}")).await, None);
    assert!(deadline_of(ns, &format!("fr-{v2}")).await.is_some());
    wait_replicas(ns, "fr", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
}
