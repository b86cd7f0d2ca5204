//! The `argo-rollouts-config` ConfigMap is read as Argo Rollouts reads it: once at start, its
//! plugin lists parsed (a Gateway API entry named as the binary that serves its Rollouts); a
//! changed value takes effect at the next start; a value Argo refuses stops the controller.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_controller::ControllerHandle;
use sluice_controller::config::PluginType;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};

async fn start(env: &TestEnv, ns: &TestNamespace) -> ControllerHandle {
    sluice_controller::install_crypto_provider();
    let mut args = sluice_e2e::controller_args(ns.name());
    args.leader_elect = false;
    // Plugins are installed under it: a throw-away folder, not the working directory.
    args.plugin_dir = std::env::temp_dir().join(format!("sluice-plugin-bin-{}", ns.name()));
    let options = sluice_controller::Options {
        config_namespace: Some(ns.name().to_string()),
        ..Default::default()
    };
    sluice_controller::start(env.config().clone(), &args, options)
        .await
        .unwrap()
}

async fn loaded(handle: &ControllerHandle) -> sluice_controller::config::RolloutsConfig {
    wait_for("the config to be read", Duration::from_secs(30), || async {
        handle
            .config()
            .ok_or_else(|| anyhow::anyhow!("not read yet"))
    })
    .await
    .unwrap()
}

fn set_plugins(key: &str, yaml: &str) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"data": {key: yaml}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_map_is_read_at_start_and_a_change_counts_from_the_next_start() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "rollouts-config")
        .await
        .unwrap();

    // No ConfigMap: every default.
    let handle = start(&env, &ns).await;
    let config = loaded(&handle).await;
    assert!(!config.found && config.plugins.is_empty());
    handle.shutdown().await.unwrap();

    ns.apply_yaml(
        &json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "argo-rollouts-config"},
            "data": {
                "trafficRouterPlugins": "- name: argoproj-labs/gatewayAPI\n  location: https://example.com/gatewayapi\n",
                "metricProviderPlugins": "- name: argoproj-labs/sample-prometheus\n  location: file://./prometheus\n",
            }
        })
        .to_string(),
    )
    .await
    .unwrap();
    let handle = start(&env, &ns).await;
    let config = loaded(&handle).await;
    assert!(config.found);
    assert_eq!(config.plugins.len(), 2);
    assert_eq!(config.plugins[1].type_, PluginType::MetricProvider);
    assert_eq!(
        config.router_binaries().into_iter().collect::<Vec<_>>(),
        ["argoproj-labs/gatewayAPI"],
        "the Gateway API entry's binary serves the Rollouts that name it"
    );

    // Changed while running: as in Argo, the running controller keeps what it read.
    let cms = ns.api::<ConfigMap>();
    cms.patch(
        "argo-rollouts-config",
        &PatchParams::default(),
        &set_plugins(
            "stepPlugins",
            "- name: argoproj-labs/step-exec\n  location: file://./exec\n",
        ),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(handle.config().unwrap().plugins.len(), 2);
    handle.shutdown().await.unwrap();
    // ... and the next start reads the new value.
    let handle = start(&env, &ns).await;
    let config = loaded(&handle).await;
    assert_eq!(config.plugins.len(), 3);
    assert_eq!(config.plugins[2].type_, PluginType::Step);
    handle.shutdown().await.unwrap();

    // A plugin name Argo refuses stops the controller at start, as it stops Argo's.
    cms.patch(
        "argo-rollouts-config",
        &PatchParams::default(),
        &set_plugins(
            "stepPlugins",
            "- name: not-a-repository\n  location: file://x\n",
        ),
    )
    .await
    .unwrap();
    let handle = start(&env, &ns).await;
    let ended = tokio::time::timeout(Duration::from_secs(30), handle.join())
        .await
        .expect("the controller stops");
    let err = ended
        .expect_err("an invalid config is an error")
        .to_string();
    assert!(err.contains("<namespace>/<name>"), "{err}");
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("sluice-plugin-bin-{}", ns.name())),
    );
}
