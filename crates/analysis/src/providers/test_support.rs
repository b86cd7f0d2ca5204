//! A local HTTP server per test and providers wired to in-memory Secrets.

use std::sync::Arc;

use super::{ProviderSettings, Providers};
use crate::secrets::MemorySecrets;

pub(crate) fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub(crate) fn providers(settings: ProviderSettings) -> Providers {
    providers_with(settings, MemorySecrets::new())
}

pub(crate) fn providers_with(settings: ProviderSettings, secrets: MemorySecrets) -> Providers {
    install_crypto();
    Providers::new(settings, Arc::new(secrets), None).unwrap()
}

/// Serves `router` on 127.0.0.1 and returns its base URL (`http://127.0.0.1:<port>`).
pub(crate) async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}
