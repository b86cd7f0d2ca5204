//! The plugin host for the plugins of `argo-rollouts-config`: each installed as Argo installs
//! it (in the background: a slow download holds up only what uses that plugin), its download
//! headers read from the Secrets its `headersFrom` names, in the controller's namespace.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use sluice_plugins::{HostSettings, PluginHost, PluginKind, PluginSpec};
use tracing::warn;

use crate::args::Args;
use crate::config::{PluginType, RolloutsConfig};

/// The bridge's file name, looked for beside the controller's executable, then on PATH.
pub const BRIDGE_NAME: &str = "sluice-plugin-bridge";

/// The host for `config`'s plugins.
pub async fn host(
    client: &Client,
    config: &RolloutsConfig,
    args: &Args,
    namespace: &str,
) -> PluginHost {
    let mut specs = Vec::new();
    // A disabled step plugin is not installed, as in Argo.
    for item in config
        .plugins
        .iter()
        .filter(|p| p.type_ != PluginType::Step || !p.disabled)
    {
        let mut headers = Vec::new();
        let mut failed = None;
        for from in &item.headers_from {
            let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
            match secrets.get(&from.secret_ref.name).await {
                Ok(secret) => {
                    for (k, v) in secret.data.unwrap_or_default() {
                        headers.push((k, String::from_utf8_lossy(&v.0).into_owned()));
                    }
                }
                Err(e) => {
                    // As Argo, the plugin is not installed; its users see why.
                    let message = format!("failed to get secret in secretRef: {e}");
                    warn!(plugin = %item.name, "{message}");
                    failed = Some(message);
                }
            }
        }
        specs.push(PluginSpec {
            kind: kind(item.type_),
            name: item.name.clone(),
            location: item.location.clone(),
            sha256: item.sha256.clone(),
            args: item.args.clone(),
            headers,
            failed,
        });
    }
    let settings = HostSettings {
        bridge: bridge_path(args),
        dir: args.plugin_dir.clone(),
        call_timeout: args.plugin_call_timeout,
        start_timeout: args.plugin_call_timeout,
        // A plugin that talks to Kubernetes (a traffic router) reaches the cluster this
        // controller was pointed at; in a pod both use the in-cluster configuration.
        env: args
            .kubeconfig
            .iter()
            .map(|p| ("KUBECONFIG".to_owned(), p.display().to_string()))
            .collect(),
    };
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap_or_default();
    PluginHost::new(settings, &specs, http)
}

fn kind(t: PluginType) -> PluginKind {
    match t {
        PluginType::TrafficRouter => PluginKind::TrafficRouter,
        PluginType::MetricProvider => PluginKind::MetricProvider,
        PluginType::Step => PluginKind::Step,
    }
}

fn bridge_path(args: &Args) -> PathBuf {
    if let Some(path) = &args.plugin_bridge {
        return path.clone();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(BRIDGE_NAME)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(BRIDGE_NAME))
}
