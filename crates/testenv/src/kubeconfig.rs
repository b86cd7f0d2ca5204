//! Clients from kubeconfig files.

use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Reads a kubeconfig file (its current context) into a client configuration.
pub async fn config_from_file(path: &Path) -> anyhow::Result<Config> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading kubeconfig {}", path.display()))
}

/// A client for the current context of a kubeconfig file.
pub async fn client_from_file(path: &Path) -> anyhow::Result<Client> {
    let config = config_from_file(path).await?;
    Client::try_from(config).context("building a Kubernetes client")
}
