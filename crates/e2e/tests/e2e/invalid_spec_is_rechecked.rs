//! A Rollout that is `InvalidSpec` because of another object is re-evaluated promptly once that
//! object appears: at once for an AnalysisTemplate it names (the controller watches
//! templates), and within Argo's 20-second re-queue of invalid Rollouts for anything else (a
//! blue-green Service here). The controller's resync is set to 5 minutes, so neither can be the
//! periodic resync.

use std::time::{Duration, Instant};

use serde_json::json;
use sluice_api::rollout::{RolloutConditionType, RolloutPhase};
use sluice_e2e::harness::{TestEnv, TestNamespace};
use sluice_e2e::*;

/// Long enough that a pick-up within the bounds below cannot be the resync.
const RESYNC_SECONDS: u64 = 300;

async fn setup_with_long_resync(prefix: &str) -> (TestEnv, TestNamespace, RunningController) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, prefix)
        .await
        .expect("test namespace");
    let mut args = controller_args(ns.name());
    args.rollout_resync = RESYNC_SECONDS;
    let controller = start_controller_with_args(env.client(), args);
    (env, ns, controller)
}

fn invalid_spec_message(ro: &sluice_api::Rollout) -> Option<String> {
    ro.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(RolloutConditionType::InvalidSpec))
        .map(|c| c.message.clone().unwrap_or_default())
}

#[tokio::test]
async fn a_template_created_later_is_picked_up_at_once() {
    let (_env, ns, _controller) = setup_with_long_resync("invalid-template").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        1,
        "example.invalid/web:1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({"strategy": {"canary": {
            "steps": [{"setWeight": 50}, {"pause": {}}],
            "analysis": {"templates": [{"templateName": "health"}]}
        }}}),
    ))
    .await
    .unwrap();
    let ro = wait_phase(&api, "web", RolloutPhase::Degraded, TIMEOUT).await;
    let message = invalid_spec_message(&ro).expect("an InvalidSpec condition");
    assert_eq!(
        message,
        "The Rollout \"web\" is invalid: spec.strategy.canary.analysis.templates: Invalid value: \"health\": AnalysisTemplate 'health' not found"
    );

    ns.apply_yaml(
        r#"
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: health
spec:
  metrics:
  - name: up
    interval: 5s
    successCondition: result == 1
    provider:
      web:
        url: http://127.0.0.1:9/health
        jsonPath: "{$.up}"
"#,
    )
    .await
    .unwrap();
    let created = Instant::now();
    let ro = wait_phase(&api, "web", RolloutPhase::Healthy, Duration::from_secs(60)).await;
    let took = created.elapsed();
    assert!(invalid_spec_message(&ro).is_none(), "{:?}", ro.status);
    // The watch wakes the Rollout up: well before the 20-second re-queue.
    assert!(
        took < Duration::from_secs(10),
        "picked up {took:?} after the template was created"
    );
}

#[tokio::test]
async fn a_missing_service_is_rechecked_within_twenty_seconds() {
    let (_env, ns, _controller) = setup_with_long_resync("invalid-service").await;
    let api = rollouts(&ns);
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "example.invalid/web:1"}]}
                },
                "strategy": {"blueGreen": {"activeService": "web-active"}}
            }
        })
        .to_string(),
    )
    .await
    .unwrap();
    let ro = wait_phase(&api, "web", RolloutPhase::Degraded, TIMEOUT).await;
    let message = invalid_spec_message(&ro).expect("an InvalidSpec condition");
    assert!(message.contains("web-active"), "{message}");

    ns.apply_yaml(
        r#"
apiVersion: v1
kind: Service
metadata:
  name: web-active
spec:
  selector: {app: web}
  ports: [{port: 80}]
"#,
    )
    .await
    .unwrap();
    // 20 s re-queue, plus a reconcile and the pods becoming ready; far below the resync.
    wait_phase(&api, "web", RolloutPhase::Healthy, Duration::from_secs(45)).await;
}
