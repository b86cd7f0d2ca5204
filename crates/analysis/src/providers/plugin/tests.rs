use std::sync::Arc;

use serde_json::json;
use sluice_api::common::AnalysisPhase;
use sluice_plugins::{HostSettings, PluginHost, PluginKind, PluginSpec};

use crate::providers::test_support::{ctx, metric_with, providers};

fn metric() -> sluice_api::analysis::Metric {
    metric_with(
        "m",
        json!({"plugin": {"acme/metric": {"query": "q"}}}),
        None,
        None,
    )
}

#[tokio::test]
async fn a_plugin_not_configured_is_argos_error() {
    let m = providers(Default::default())
        .measure(&ctx(), &metric())
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        m.message.as_deref(),
        Some(
            "unable to start plugin system: unable to find plugin (acme/metric): plugin acme/metric not configured in configmap"
        )
    );
}

#[tokio::test]
async fn a_plugin_that_could_not_be_installed_is_an_error_with_the_reason() {
    // The host's HTTP client is built before the providers (which install it otherwise).
    crate::providers::test_support::install_crypto();
    let dir = std::env::temp_dir().join(format!("sluice-metric-plugin-{}", std::process::id()));
    let settings = HostSettings {
        bridge: "/nonexistent/bridge".into(),
        dir: dir.clone(),
        call_timeout: std::time::Duration::from_secs(1),
        start_timeout: std::time::Duration::from_secs(1),
        env: Vec::new(),
    };
    let spec = PluginSpec {
        kind: PluginKind::MetricProvider,
        name: "acme/metric".into(),
        location: "file:///nonexistent/metric-plugin".into(),
        sha256: String::new(),
        args: vec![],
        headers: vec![],
        failed: None,
    };
    let host = PluginHost::install(settings, &[spec], reqwest::Client::new()).await;
    let p = providers(Default::default()).with_plugins(Arc::new(host));
    let m = p.measure(&ctx(), &metric()).await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    let message = m.message.unwrap();
    assert!(
        message.starts_with(
            "unable to start plugin system: failed to copy plugin from /nonexistent/metric-plugin to "
        ),
        "{message}"
    );
    assert!(m.finished_at.is_some());
    let _ = std::fs::remove_dir_all(dir);
}
