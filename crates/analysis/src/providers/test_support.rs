//! A local HTTP server per test, providers wired to in-memory Secrets, and the run and metric
//! the provider tests measure.

use std::sync::Arc;

use sluice_api::analysis::Metric;

use super::{ProviderSettings, Providers, RunContext};
use crate::secrets::MemorySecrets;

pub(crate) fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub(crate) fn providers(settings: ProviderSettings) -> Providers {
    providers_with(settings, MemorySecrets::new())
}

/// Providers with an AWS configuration holding nothing (no region, no credentials), so that
/// no test reads the machine's AWS settings; the AWS tests give their own.
pub(crate) fn providers_with(settings: ProviderSettings, secrets: MemorySecrets) -> Providers {
    install_crypto();
    Providers::new(settings, Arc::new(secrets), None)
        .unwrap()
        .with_aws(sluice_aws::SdkConfig::builder().build())
}

/// Serves `router` on 127.0.0.1 and returns its base URL (`http://127.0.0.1:<port>`).
pub(crate) async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

/// The run every provider test measures for.
pub(crate) fn ctx() -> RunContext {
    RunContext::new("run", "ns", "uid")
}

/// A metric `name` measured by `provider` (`{"<kind>": {...}}`), with its conditions.
pub(crate) fn metric_with(
    name: &str,
    provider: serde_json::Value,
    success: Option<&str>,
    failure: Option<&str>,
) -> Metric {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "successCondition": success,
        "failureCondition": failure,
        "provider": provider
    }))
    .unwrap()
}
