//! `--aws-verify-target-group` against a real ELBv2 API (moto's server): the ALB canary of
//! Argo's own end-to-end suite, its Ingress pointing at a load balancer with two target
//! groups tagged as the AWS Load Balancer Controller tags them. The test plays that
//! controller: it changes the listener's weights when it chooses.
//!
//! Proven:
//! - after the first deploy `status.alb` and `status.albs` name the load balancer, the canary
//!   and stable target groups (full names from their ARNs) and the Ingress, as Argo fills them;
//! - a `setWeight` step whose weight the load balancer does not route yet is held:
//!   `weights.verified` false, a `TargetGroupUnverified` warning with the current weight;
//! - once the listener routes it, the step completes (`TargetGroupVerified`);
//! - when AWS cannot be reached the step is held with `TargetGroupVerifyError` naming the
//!   cause, and `weights.verified` false.

use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::aws::Aws;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};
use sluice_testenv::moto::Moto;

const NAME: &str = "alb-canary";
const INGRESS: &str = "alb-canary-ingress";
const CANARY: &str = "alb-canary-desired";

/// The Rollout as JSON, with the fields Argo writes.
async fn raw(ns: &TestNamespace) -> Value {
    json_of(
        &router_api(ns, "argoproj.io", "v1alpha1", "Rollout", "rollouts")
            .get(NAME)
            .await
            .unwrap(),
    )
}

async fn wait_event(ns: &TestNamespace, reason: &str, message: &str) {
    wait_for(&format!("event {reason}: {message}"), TIMEOUT, || async {
        let events = rollout_events(ns, NAME).await;
        anyhow::ensure!(
            events
                .iter()
                .any(|(r, m)| r == reason && m.contains(message)),
            "{events:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
}

/// Waits until the Rollout stands at step `index` with `weights.verified` = `verified`
/// (`None`: absent).
async fn wait_step(ns: &TestNamespace, index: i64, verified: Option<bool>) {
    let verified = verified.map(Value::Bool);
    wait_for(
        &format!("step {index}, verified {verified:?}"),
        TIMEOUT,
        || async {
            let ro = raw(ns).await;
            let status = &ro["status"];
            anyhow::ensure!(
                status["currentStepIndex"] == json!(index)
                    && status.pointer("/canary/weights/verified") == verified.as_ref(),
                "{}",
                status
            );
            Ok(())
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_waits_until_the_load_balancer_routes_its_weight() {
    let moto = Moto::start().await.expect("moto's server");
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, "alb-verify").await.unwrap();
    let aws = Aws::create(&moto, ns.name()).await;

    // Argo's ALB canary, with pauses that wait for a promotion.
    let manifest = corpus_file("test/e2e/functional/alb-canary-rollout.yaml")
        .replace("pause: {duration: 5s}", "pause: {}");
    ns.apply_yaml(&manifest).await.unwrap();
    // The load balancer the AWS Load Balancer Controller would have given the Ingress.
    let _controller = aws.verifying_controller(&env, &ns).await;
    let api = rollouts(&ns);
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;

    // Filled once after the first deploy, as Argo does with nothing to verify.
    wait_for("status.alb", TIMEOUT, || async {
        let ro = raw(&ns).await;
        anyhow::ensure!(ro["status"].get("albs").is_some(), "{}", ro["status"]);
        Ok(())
    })
    .await
    .unwrap();
    let status = raw(&ns).await["status"].clone();
    let full = |arn: &str, skip: usize| arn.split('/').skip(skip).collect::<Vec<_>>().join("/");
    let lb_arn = status["alb"]["loadBalancer"]["arn"]
        .as_str()
        .unwrap()
        .to_string();
    let alb = json!({
        "loadBalancer": {"name": "sluice-e2e", "arn": lb_arn, "fullName": full(&lb_arn, 2)},
        "canaryTargetGroup": {"name": "canary", "arn": aws.canary_group,
            "fullName": full(&aws.canary_group, 1)},
        "stableTargetGroup": {"name": "stable", "arn": aws.stable_group,
            "fullName": full(&aws.stable_group, 1)},
        "ingress": INGRESS,
    });
    assert_eq!(status["alb"], alb);
    assert_eq!(status["albs"], json!([alb]));
    // Argo keeps the ARN from its third `/` segment on: `<name>/<id>`.
    assert!(full(&lb_arn, 2).starts_with("sluice-e2e/"), "{lb_arn}");

    // setWeight 10: written to the Ingress, not yet routed by the load balancer.
    set_image(&api, NAME, "nginx:1.20-alpine").await;
    wait_step(&ns, 0, Some(false)).await;
    wait_event(
        &ns,
        "TargetGroupUnverified",
        &format!(
            "Service {CANARY} (TargetGroup {}) not verified: canary weight 10 not yet set (current: 0)",
            aws.canary_group
        ),
    )
    .await;
    // Held: past Argo's 10 s retry, still at the step.
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    assert_eq!(raw(&ns).await["status"]["currentStepIndex"], json!(0));

    // The load balancer catches up: the step completes, the pause is reached (where, as in
    // Argo, there is no weight to verify and `verified` is left out).
    aws.route(10).await;
    wait_step(&ns, 1, None).await;
    wait_event(
        &ns,
        "TargetGroupVerified",
        &format!(
            "Service {CANARY} (TargetGroup {}) verified: canary weight 10 set",
            aws.canary_group
        ),
    )
    .await;

    // AWS unreachable: setWeight 20 is held, the cause in the event.
    drop(moto);
    promote(&api, NAME).await;
    wait_step(&ns, 2, Some(false)).await;
    wait_event(
        &ns,
        "TargetGroupVerifyError",
        &format!("Failed to verify Service {CANARY} (TargetGroup unknown): dispatch failure"),
    )
    .await;
    let events = rollout_events(&ns, NAME).await;
    let error = events
        .iter()
        .find(|(r, _)| r == "TargetGroupVerifyError")
        .unwrap();
    assert!(error.1.to_lowercase().contains("connect"), "{error:?}");
    assert_eq!(raw(&ns).await["status"]["currentStepIndex"], json!(2));
}
