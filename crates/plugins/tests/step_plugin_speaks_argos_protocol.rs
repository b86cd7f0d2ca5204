//! The step plugin of Argo's own end-to-end tests (`test/cmd/step-plugin-e2e`, built from the
//! argo-rollouts module) answers Run, Terminate and Abort through the bridge: its phase, its
//! requeue, and the status it keeps between calls, as Argo's controller gets them. The engine
//! does not run plugin steps yet; this proves the protocol for them.

use std::time::Duration;

use serde_json::json;
use sluice_plugins::{HostSettings, PluginHost, PluginKind, PluginSpec};
use sluice_testenv::harness::plugin_binaries;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_plugin_runs_keeps_its_status_and_aborts() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bin = plugin_binaries().await.unwrap();
    let dir = std::env::temp_dir().join(format!("sluice-step-plugin-{}", std::process::id()));
    let settings = HostSettings {
        bridge: bin.join("sluice-plugin-bridge"),
        dir: dir.clone(),
        call_timeout: Duration::from_secs(10),
        start_timeout: Duration::from_secs(10),
        env: Vec::new(),
    };
    let spec = PluginSpec {
        kind: PluginKind::Step,
        name: "step/e2e-test".into(),
        location: format!("file://{}", bin.join("step-plugin-e2e").display()),
        sha256: String::new(),
        args: vec![],
        headers: vec![],
        failed: None,
    };
    let host = PluginHost::install(settings, &[spec], reqwest::Client::new()).await;
    let rollout = json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": {}});
    let call = |method: &'static str, config: serde_json::Value, status: serde_json::Value| {
        let args = json!({
            "rollout": rollout, "pluginName": "step/e2e-test", "config": config, "status": status,
        });
        let host = &host;
        async move {
            host.call(PluginKind::Step, "step/e2e-test", method, args)
                .await
                .unwrap()
        }
    };

    let first = call(
        "Run",
        json!({"return": "Running", "requeue": "17s"}),
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(first["phase"], "Running");
    assert_eq!(first["requeueAfterNanos"], 17_000_000_000_i64);
    assert_eq!(first["error"], "");
    assert_eq!(first["status"]["Count"], 1);
    let data = first["status"]["Data"].clone();

    let second = call(
        "Run",
        json!({"return": "Successful"}),
        first["status"].clone(),
    )
    .await;
    assert_eq!(second["phase"], "Successful");
    assert_eq!(second["status"]["Count"], 2);
    assert_eq!(second["status"]["Data"], data, "the status is kept");

    let aborted = call(
        "Abort",
        json!({"abort": {"return": "Failed"}}),
        second["status"].clone(),
    )
    .await;
    assert_eq!(aborted["phase"], "Failed");
    let terminated = call("Terminate", json!({}), second["status"].clone()).await;
    assert_eq!(terminated["phase"], "Successful");

    // The plugin's own error comes back as its error, not as a failed call.
    let refused = call(
        "Run",
        json!({"return": "Nonsense"}),
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(
        refused["error"],
        "could not parse phase: phase 'Nonsense' is not valid"
    );
    let _ = std::fs::remove_dir_all(dir);
}
