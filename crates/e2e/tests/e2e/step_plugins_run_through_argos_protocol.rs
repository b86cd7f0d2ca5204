//! Argo's three step-plugin Rollouts (`test/e2e/step-plugin/` of its corpus) run under Sluice
//! with Argo's own end-to-end step plugin (`test/cmd/step-plugin-e2e` of the argo-rollouts
//! module) behind the plugin bridge, installed from `argo-rollouts-config` as in Argo's e2e
//! ConfigMap: a plugin answering Successful completes its steps, one answering Failed aborts the
//! update with Argo's message and the step that ran is aborted, a disabled plugin's step is
//! skipped, and a plugin not configured is an Error on its step until the progress deadline
//! ends the update. A plugin killed while its step runs is started again for the step's next
//! call, which it answers; a plugin whose file is missing is an Error on its step with the
//! reason and a Warning event. Each Rollout is updated once (a canary's first deploy skips its
//! steps).

use std::path::Path;

use kube::Api;
use sluice_api::Rollout;
use sluice_api::rollout::{
    RolloutPhase, StepPluginOperation as Op, StepPluginPhase as Phase, StepPluginStatus,
};
use sluice_e2e::harness::{TestEnv, TestNamespace, plugin_binaries, wait_for};
use sluice_e2e::plugins::{pid_of, plugin_args, start_with_plugins};
use sluice_e2e::{TIMEOUT, corpus_file, rollouts, set_image, wait_phase};

fn entries(ro: &Rollout) -> Vec<StepPluginStatus> {
    ro.status
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.step_plugin_statuses.clone())
        .unwrap_or_default()
}

/// Argo's corpus Rollout `file` with its placeholders filled in.
async fn apply_corpus(ns: &TestNamespace, file: &str, fill: &[(&str, &str)]) {
    let mut yaml = corpus_file(&format!("test/e2e/step-plugin/{file}"));
    for (k, v) in fill {
        yaml = yaml.replace(k, v);
    }
    ns.apply_yaml(&yaml).await.unwrap();
}

/// Argo's e2e ConfigMap (`argo-rollouts-config.yaml` beside the Rollouts), its plugin's
/// location pointed at the binary built for the test.
async fn apply_config(ns: &TestNamespace, bin: &Path) {
    let plugin = bin.join("step-plugin-e2e");
    let yaml = corpus_file("test/e2e/step-plugin/argo-rollouts-config.yaml")
        .replace("  namespace: argo-rollouts\n", "")
        .replace(
            "file://plugin-bin/e2e-step-plugin",
            &format!("file://{}", plugin.display()),
        )
        // One more, whose file is missing.
        + "\n    - name: \"step/missing\"\n      location: \"file:///nonexistent/step-plugin\"\n";
    ns.apply_yaml(&yaml).await.unwrap();
}

async fn wait_degraded_with(api: &Api<Rollout>, name: &str, message: &str) -> Rollout {
    wait_for(&format!("{name} Degraded"), TIMEOUT, || async {
        let ro = api.get(name).await?;
        let status = ro.status.clone().unwrap_or_default();
        let m = status.message.clone().unwrap_or_default();
        anyhow::ensure!(
            status.phase == Some(RolloutPhase::Degraded) && m.contains(message),
            "{:?} {m:?}",
            status.phase
        );
        Ok(ro)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argos_step_plugin_rollouts_run_their_plugin_steps() {
    let bin = plugin_binaries().await.unwrap();
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "step-plugins").await.unwrap();
    apply_config(&ns, &bin).await;

    let args = plugin_args(&ns, &bin);
    let _controller = start_with_plugins(&env, &ns, &args).await;

    let api = rollouts(&ns);
    let ok = "step-plugin-e2e-ok";
    let failing = "step-plugin-e2e-failing";
    apply_corpus(
        &ns,
        "template-rollout.yaml",
        &[("$$name$$", "ok"), ("$$phase$$", "Successful")],
    )
    .await;
    apply_corpus(
        &ns,
        "template-rollout.yaml",
        &[("$$name$$", "failing"), ("$$phase$$", "Failed")],
    )
    .await;
    apply_corpus(
        &ns,
        "disabled-rollout.yaml",
        &[("$$disabled_plugin$$", "step/e2e-test-disabled")],
    )
    .await;
    apply_corpus(&ns, "invalid-rollout.yaml", &[]).await;
    let running = "step-plugin-e2e-running";
    apply_corpus(
        &ns,
        "template-rollout.yaml",
        &[("$$name$$", "running"), ("$$phase$$", "Running")],
    )
    .await;
    apply_corpus(
        &ns,
        "invalid-rollout.yaml",
        &[
            ("invalid-step-plugin", "missing-step-plugin"),
            ("step/e2e-test-invalid-name", "step/missing"),
        ],
    )
    .await;
    let names = [
        ok,
        failing,
        "disabled-step-plugin",
        "invalid-step-plugin",
        running,
        "missing-step-plugin",
    ];
    for name in names {
        wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    }
    for name in names {
        set_image(&api, name, "nginx:1.20-alpine").await;
    }

    // Both steps Successful: the update completes, each Run recorded once with the status
    // the plugin keeps.
    wait_phase(&api, ok, RolloutPhase::Healthy, TIMEOUT).await;
    let ro = wait_for("the ok rollout's statuses", TIMEOUT, || async {
        let ro = api.get(ok).await?;
        anyhow::ensure!(entries(&ro).len() == 2, "{:?}", entries(&ro));
        Ok(ro)
    })
    .await
    .unwrap();
    let e = entries(&ro);
    for (i, entry) in e.iter().enumerate() {
        assert_eq!(
            (
                entry.index,
                entry.operation.clone(),
                entry.phase.clone(),
                entry.executions
            ),
            (
                Some(i as i32),
                Some(Op::Run),
                Some(Phase::Successful),
                Some(1)
            ),
            "{e:#?}"
        );
        assert_eq!(entry.name.as_deref(), Some("step/e2e-test"));
        assert!(entry.status.is_some(), "the plugin's own status is kept");
    }

    // The second step Failed: aborted with Argo's message, the first step's plugin aborted.
    let ro = wait_degraded_with(&api, failing, "Step Plugin 2 (step/e2e-test) failed").await;
    assert_eq!(ro.status.as_ref().unwrap().abort, Some(true));
    let ro = wait_for("the failing rollout's abort call", TIMEOUT, || async {
        let ro = api.get(failing).await?;
        anyhow::ensure!(
            entries(&ro)
                .iter()
                .any(|e| e.operation == Some(Op::Abort) && e.index == Some(0)),
            "{:?}",
            entries(&ro)
        );
        Ok(ro)
    })
    .await
    .unwrap();
    let failed = entries(&ro)
        .into_iter()
        .find(|e| e.index == Some(1) && e.operation == Some(Op::Run))
        .unwrap();
    assert_eq!(failed.phase, Some(Phase::Failed));

    // A disabled plugin's step is skipped; the next step's plugin runs.
    wait_phase(&api, "disabled-step-plugin", RolloutPhase::Healthy, TIMEOUT).await;
    let ro = api.get("disabled-step-plugin").await.unwrap();
    let e = entries(&ro);
    assert_eq!(e[0].disabled, Some(true), "{e:#?}");
    assert_eq!(e[1].phase, Some(Phase::Successful), "{e:#?}");

    // A plugin not configured: its step is an Error saying so, and the progress deadline
    // (15 s) ends the update.
    let ro = wait_degraded_with(&api, "invalid-step-plugin", "ProgressDeadlineExceeded").await;
    let e = entries(&ro);
    assert_eq!(e[0].phase, Some(Phase::Error), "{e:#?}");
    assert_eq!(
        e[0].message.as_deref(),
        Some("plugin step/e2e-test-invalid-name not configured in configmap")
    );
    // A missing file: an Error on its step with the reason, told in a Warning event.
    let ro = wait_for("the missing plugin's error", TIMEOUT, || async {
        let ro = api.get("missing-step-plugin").await?;
        let e = entries(&ro);
        anyhow::ensure!(
            e.first().is_some_and(|e| e.phase == Some(Phase::Error)),
            "{e:?}"
        );
        Ok(ro)
    })
    .await
    .unwrap();
    let message = entries(&ro)[0].message.clone().unwrap_or_default();
    assert!(message.contains("/nonexistent/step-plugin"), "{message}");
    let events = sluice_e2e::rollout_events(&ns, "missing-step-plugin").await;
    assert!(
        events
            .iter()
            .any(|(reason, m)| reason == "StepPluginTransition"
                && m == "Step plugin step/missing (step 0) transitioned to Error"),
        "{events:?}"
    );

    // Killed while its second step runs (asked again after its 17 s): started again for the
    // next call, which it answers as before.
    wait_for("the running step's first call", TIMEOUT, || async {
        let e = entries(&api.get(running).await?);
        anyhow::ensure!(
            e.iter()
                .any(|e| e.index == Some(1) && e.phase == Some(Phase::Running)),
            "{e:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
    let installed = args.plugin_dir.join("step/e2e-test");
    let pid = pid_of(&installed).expect("the step plugin runs");
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    let ro = wait_for("the step's call after the kill", TIMEOUT, || async {
        let ro = api.get(running).await?;
        let e = entries(&ro);
        anyhow::ensure!(
            e.iter()
                .any(|e| e.index == Some(1) && e.executions == Some(2)),
            "{e:?}"
        );
        Ok(ro)
    })
    .await
    .unwrap();
    let e = entries(&ro);
    assert_eq!(e[1].phase, Some(Phase::Running), "{e:#?}");
    assert_ne!(pid_of(&installed), Some(pid), "a new plugin process");

    // Every other Rollout kept its state meanwhile.
    wait_phase(&api, ok, RolloutPhase::Healthy, TIMEOUT).await;
}
