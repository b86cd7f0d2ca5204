//! Argo's sample metric plugin (`test/cmd/metrics-plugin-sample` of the argo-rollouts module,
//! `argoproj/sample-prometheus`) measures AnalysisRuns through the plugin bridge: installed from
//! `argo-rollouts-config` with a `file://` location, judged by the plugin itself, restarted
//! after it is killed. A plugin whose file is missing, whose download does not match its
//! sha256, or that hangs past the call deadline makes only its own measurements Errors, with
//! the reason; the other runs are measured as before.

use std::time::Duration;

use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_e2e::TIMEOUT;
use sluice_e2e::harness::{TestEnv, TestNamespace, plugin_binaries, wait_for};
use sluice_e2e::plugins::{pid_of, plugin_args, start_with_plugins};
use sluice_testenv::http_stub::HttpStub;

const PLUGIN: &str = "argoproj/sample-prometheus";

fn run(name: &str, plugin: &str, config: serde_json::Value) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name},
        "spec": {"metrics": [{
            "name": "m",
            "successCondition": "result == 1",
            // The first Error ends the run, rather than Argo's retries every 10 s.
            "consecutiveErrorLimit": 0,
            "provider": {"plugin": {plugin: config}}
        }]}
    })
    .to_string()
}

/// The run once completed, and its one measurement's phase and message.
async fn finished(ns: &TestNamespace, name: &str) -> (AnalysisPhase, String) {
    let api = ns.api::<AnalysisRun>();
    let run = wait_for(&format!("run {name} to finish"), TIMEOUT, || async {
        let run = api.get(name).await?;
        match run.status.as_ref().and_then(|s| s.phase.clone()) {
            Some(p) if p.is_completed() => Ok(run),
            other => anyhow::bail!("{other:?}"),
        }
    })
    .await
    .unwrap();
    let status = run.status.unwrap();
    let result = &status.metric_results.unwrap()[0];
    let m = result
        .measurements
        .as_ref()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    (
        status.phase.unwrap(),
        m.message.unwrap_or_default() + &m.value.map(|v| format!(" value={v}")).unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_metric_plugin_measures_and_broken_plugins_fail_alone() {
    let bin = plugin_binaries().await.unwrap();
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "metric-plugins").await.unwrap();
    let prometheus = HttpStub::start().await.unwrap();
    prometheus.respond_json(
        200,
        &json!({"status": "success", "data": {"resultType": "scalar", "result": [1700000000.0, "1"]}}),
    );
    let download = HttpStub::start().await.unwrap();
    download.respond(200, "application/octet-stream", "not the plugin");
    // A Prometheus that accepts and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });

    let plugin_dir = std::env::temp_dir().join(format!("sluice-plugin-bin-{}", ns.name()));
    let wrong_sha = download.url("/plugin");
    let plugins = format!(
        "- name: {PLUGIN}\n  location: file://{}\n\
         - name: acme/missing\n  location: file:///nonexistent/metric-plugin\n\
         - name: acme/checked\n  location: {wrong_sha}\n  sha256: {}\n",
        bin.join("metrics-plugin-sample").display(),
        "0".repeat(64),
    );
    ns.apply_yaml(
        &json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "argo-rollouts-config"},
            "data": {"metricProviderPlugins": plugins}
        })
        .to_string(),
    )
    .await
    .unwrap();

    let mut args = plugin_args(&ns, &bin);
    args.plugin_dir = plugin_dir.clone();
    args.plugin_call_timeout = Duration::from_secs(3);
    let controller = start_with_plugins(&env, &ns, &args).await;

    let good = json!({"address": prometheus.url(""), "query": "up"});
    ns.apply_yaml(&run("good", PLUGIN, good.clone()))
        .await
        .unwrap();
    ns.apply_yaml(&run("missing", "acme/missing", json!({})))
        .await
        .unwrap();
    ns.apply_yaml(&run("checked", "acme/checked", json!({})))
        .await
        .unwrap();

    let (phase, message) = finished(&ns, "good").await;
    assert_eq!(phase, AnalysisPhase::Successful, "{message}");
    assert_eq!(message, " value=1");
    assert!(
        !prometheus.requests().is_empty(),
        "the plugin queried Prometheus"
    );

    let (phase, message) = finished(&ns, "missing").await;
    assert_eq!(phase, AnalysisPhase::Error);
    assert!(
        message.starts_with(
            "unable to start plugin system: failed to copy plugin from /nonexistent/metric-plugin to "
        ),
        "{message}"
    );

    let (phase, message) = finished(&ns, "checked").await;
    assert_eq!(phase, AnalysisPhase::Error);
    assert_eq!(
        message,
        format!(
            "unable to start plugin system: sha256 hash of downloaded plugin ({wrong_sha}) does not match expected hash"
        )
    );

    // Killed between measurements: the next measurement starts it again.
    let installed = plugin_dir.join("argoproj/sample-prometheus");
    let pid = pid_of(&installed).expect("the plugin runs");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    ns.apply_yaml(&run("after-kill", PLUGIN, good.clone()))
        .await
        .unwrap();
    let (phase, message) = finished(&ns, "after-kill").await;
    assert_eq!(phase, AnalysisPhase::Successful, "{message}");
    assert!(
        pid_of(&installed).is_some_and(|p| p != pid),
        "a new plugin process"
    );

    // Hangs past the deadline: an Error saying so; the plugin is ended and started again.
    ns.apply_yaml(&run(
        "hangs",
        PLUGIN,
        json!({"address": silent_url, "query": "up"}),
    ))
    .await
    .unwrap();
    let (phase, message) = finished(&ns, "hangs").await;
    assert_eq!(phase, AnalysisPhase::Error);
    assert_eq!(message, "Run rpc call error: no answer within 3s");
    tokio::time::sleep(Duration::from_secs(1)).await;
    ns.apply_yaml(&run("after-hang", PLUGIN, good))
        .await
        .unwrap();
    let (phase, message) = finished(&ns, "after-hang").await;
    assert_eq!(phase, AnalysisPhase::Successful, "{message}");

    controller.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(plugin_dir);
}
