//! `kubectl sluice undo --fast` on the real control plane, with the controller running: after
//! two promoted updates, going back to the earlier (not the stable) revision would walk the
//! steps and stop at the indefinite pause; with `--fast` it is stable as soon as its pods are
//! up, the annotation the command wrote is gone again, and the Rollout's events say why.

use std::process::{Command, Output};

use kube::ResourceExt as _;
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, wait_for_object};

fn sluice(env: &TestEnv, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .output()
        .expect("kubectl-sluice runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_fast_skips_steps_and_analysis() {
    let (env, ns, _controller) = setup("undo-fast").await;
    let steps = json!([{"setWeight": 50}, {"pause": {}}]);
    ns.apply_yaml(&canary_rollout("web", 2, "app:v1", steps, json!({})))
        .await
        .unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    let mut stable = String::new();
    for image in ["app:v2", "app:v3"] {
        set_image(&api, "web", image).await;
        wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
        promote(&api, "web").await;
        stable = wait_promoted(&api, "web", &stable).await;
    }

    // v3 is stable; v2 (revision 2) is not, so an undo to it would pause at the step.
    let out = sluice(&env, &["-n", ns.name(), "undo", "web", "--fast"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "rollout 'web' rolled back to revision 2, fast: steps, pauses and analyses skipped\n"
    );
    let v2 = wait_promoted(&api, "web", &stable).await;
    let ro = api.get("web").await.unwrap();
    let status = ro.status.clone().unwrap_or_default();
    assert_eq!(status.current_pod_hash.as_deref(), Some(v2.as_str()));
    assert!(status.pause_conditions.is_none(), "{status:?}");
    // The annotation goes in the pass after the one that made v2 stable: that pass reads the
    // Rollout as it was before, while v2 was still the update.
    wait_for_object(
        &api,
        "web",
        TIMEOUT,
        "the fast-undo annotation removed",
        |ro| {
            !ro.annotations()
                .contains_key("rollouts.sluice.dev/fast-undo")
        },
    )
    .await
    .unwrap();
    let events = rollout_events(&ns, "web").await;
    assert!(
        events
            .iter()
            .any(|(reason, message)| reason == "SkipSteps" && message.starts_with("Fast undo")),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|(reason, message)| reason == "RolloutCompleted" && message.ends_with("Fast undo")),
        "{events:#?}"
    );
}
