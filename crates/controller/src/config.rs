//! The `argo-rollouts-config` ConfigMap, read as Argo Rollouts reads it: once, when the
//! controller starts, from the controller's namespace (`$POD_NAMESPACE`, else the service
//! account's, else `argo-rollouts`). A missing ConfigMap means every default. Its keys are the
//! plugin lists `trafficRouterPlugins`, `metricProviderPlugins` and `stepPlugins` (YAML lists of
//! `name`, `location`, `sha256`, `disabled`, `args`, `headersFrom`); a list that is not valid YAML, or a plugin name not
//! of the form `<namespace>/<name>`, stops the controller at start, as it stops Argo's. Every
//! plugin listed is installed (`crate::plugins`); metric plugins run through the plugin bridge
//! (docs/plugins.md); traffic-router and step plugins are logged as not run yet, except the
//! Gateway API traffic router (`argoproj-labs/gatewayAPI`), which is built in. As in Argo, a changed value
//! takes effect when the controller restarts (`kubectl rollout restart`).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use serde::Deserialize;
use tracing::{info, warn};

/// The ConfigMap's name (Argo's `DefaultRolloutsConfigMapName`).
pub const CONFIG_MAP_NAME: &str = "argo-rollouts-config";

/// The plugin Sluice has built in.
pub const BUILT_IN_TRAFFIC_ROUTER: &str = "argoproj-labs/gatewayAPI";

/// How long the read at start may take before the defaults are used.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The kinds of plugins the ConfigMap lists, by their key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginType {
    TrafficRouter,
    MetricProvider,
    Step,
}

impl PluginType {
    pub const ALL: [PluginType; 3] = [
        PluginType::TrafficRouter,
        PluginType::MetricProvider,
        PluginType::Step,
    ];

    /// The ConfigMap key listing plugins of this type.
    pub fn key(self) -> &'static str {
        match self {
            PluginType::TrafficRouter => "trafficRouterPlugins",
            PluginType::MetricProvider => "metricProviderPlugins",
            PluginType::Step => "stepPlugins",
        }
    }
}

/// One plugin of the ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PluginItem {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub location: String,
    #[serde(default)]
    pub sha256: String,
    #[serde(default)]
    pub disabled: bool,
    /// Command-line arguments the plugin is started with.
    #[serde(default)]
    pub args: Vec<String>,
    /// Secrets whose keys and values become headers of the download.
    #[serde(default, rename = "headersFrom")]
    pub headers_from: Vec<HeadersFrom>,
    #[serde(skip, default = "default_type")]
    pub type_: PluginType,
}

/// `headersFrom[]` of a plugin: a Secret in the controller's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HeadersFrom {
    #[serde(rename = "secretRef")]
    pub secret_ref: SecretRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SecretRef {
    #[serde(default)]
    pub name: String,
}

fn default_type() -> PluginType {
    PluginType::TrafficRouter
}

/// What the controller took from the ConfigMap at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutsConfig {
    /// Whether the ConfigMap was there (or readable).
    pub found: bool,
    pub plugins: Vec<PluginItem>,
}

impl RolloutsConfig {
    /// Parses the ConfigMap's data as Argo does; an error stops the controller.
    pub fn parse(
        data: &std::collections::BTreeMap<String, String>,
    ) -> Result<RolloutsConfig, String> {
        let mut plugins = Vec::new();
        for type_ in PluginType::ALL {
            let key = type_.key();
            let text = data.get(key).map(String::as_str).unwrap_or("");
            let items: Option<Vec<PluginItem>> = if text.trim().is_empty() {
                None
            } else {
                serde_saphyr::from_str(text)
                    .map_err(|e| format!("failed to unmarshal {key} of {CONFIG_MAP_NAME}: {e}"))?
            };
            for mut item in items.unwrap_or_default() {
                item.type_ = type_;
                plugins.push(item);
            }
        }
        for item in &plugins {
            if !valid_plugin_name(&item.name) {
                return Err(format!(
                    "plugin repository ({}) must be in the format of <namespace>/<name>",
                    item.name
                ));
            }
        }
        Ok(RolloutsConfig {
            found: true,
            plugins,
        })
    }

    /// The step plugins listed as `disabled`: their steps are skipped, as in Argo.
    pub fn disabled_step_plugins(&self) -> std::collections::BTreeSet<String> {
        self.plugins
            .iter()
            .filter(|p| p.type_ == PluginType::Step && p.disabled)
            .map(|p| p.name.clone())
            .collect()
    }

    /// The built-in plugin routers the ConfigMap points at a binary (`trafficRouterPlugins`
    /// naming `argoproj-labs/gatewayAPI`): the binary serves the Rollouts that name them.
    pub fn router_binaries(&self) -> std::collections::BTreeSet<String> {
        self.plugins
            .iter()
            .filter(|p| p.type_ == PluginType::TrafficRouter && p.name == BUILT_IN_TRAFFIC_ROUTER)
            .map(|p| p.name.clone())
            .collect()
    }
}

/// Argo's rule: `<github user or org>/<repository>`.
fn valid_plugin_name(name: &str) -> bool {
    let Some((ns, repo)) = name.split_once('/') else {
        return false;
    };
    !ns.is_empty()
        && !repo.is_empty()
        && ns.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && repo
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// The controller's namespace as Argo finds it: `$POD_NAMESPACE`, the service account's, then
/// `argo-rollouts`.
pub fn controller_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .or_else(|| std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE).ok())
        .map(|ns| ns.trim().to_string())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "argo-rollouts".to_string())
}

/// Reads and logs the ConfigMap of `namespace`. A ConfigMap that is missing, or that the
/// controller may not read, means the defaults (logged); one that Argo would refuse is an error.
pub async fn load(client: &Client, namespace: &str) -> anyhow::Result<RolloutsConfig> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let read = tokio::time::timeout(READ_TIMEOUT, api.get_opt(CONFIG_MAP_NAME)).await;
    let Ok(read) = read else {
        warn!(namespace, timeout = ?READ_TIMEOUT, "no answer reading the {CONFIG_MAP_NAME} \
            ConfigMap: every setting at its default");
        return Ok(RolloutsConfig::default());
    };
    let cm = match read {
        Ok(Some(cm)) => cm,
        Ok(None) => {
            info!(
                namespace,
                "no {CONFIG_MAP_NAME} ConfigMap: every setting at its default"
            );
            return Ok(RolloutsConfig::default());
        }
        Err(e) => {
            warn!(namespace, error = %e, "cannot read the {CONFIG_MAP_NAME} ConfigMap: every \
                setting at its default");
            return Ok(RolloutsConfig::default());
        }
    };
    let config = RolloutsConfig::parse(&cm.data.unwrap_or_default())
        .map_err(|e| anyhow::anyhow!("failed to init config: {e}"))?;
    for name in config.router_binaries() {
        info!(
            "{CONFIG_MAP_NAME}: trafficRouterPlugins names {name}: its binary serves the \
             Rollouts that name it, instead of the built-in router"
        );
    }
    info!(
        namespace,
        plugins = config.plugins.len(),
        "read {CONFIG_MAP_NAME} (changes take effect when the controller restarts, as in Argo Rollouts)"
    );
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_empty_config_map_is_every_default() {
        let c = RolloutsConfig::parse(&BTreeMap::new()).unwrap();
        assert!(c.plugins.is_empty() && c.router_binaries().is_empty());
    }

    #[test]
    fn plugin_lists_are_read_and_the_gateway_api_binary_named() {
        let c = RolloutsConfig::parse(&data(&[
            (
                "trafficRouterPlugins",
                "- name: argoproj-labs/gatewayAPI\n  location: https://example.com/gw\n\
                 - name: argoproj-labs/contour\n  location: file://./contour\n",
            ),
            (
                "metricProviderPlugins",
                "- name: argoproj-labs/sample-prometheus\n  location: file://./prom\n  sha256: abc\n",
            ),
            (
                "stepPlugins",
                "- name: argoproj-labs/step-exec\n  location: file://./exec\n  disabled: true\n",
            ),
            ("somethingElse", "ignored, as Argo ignores it"),
        ]))
        .unwrap();
        assert_eq!(c.plugins.len(), 4);
        assert_eq!(c.plugins[2].type_, PluginType::MetricProvider);
        assert_eq!(c.plugins[2].sha256, "abc");
        assert!(c.plugins[3].disabled);
        assert_eq!(
            c.disabled_step_plugins().into_iter().collect::<Vec<_>>(),
            ["argoproj-labs/step-exec"]
        );
        assert_eq!(
            c.router_binaries().into_iter().collect::<Vec<_>>(),
            ["argoproj-labs/gatewayAPI"]
        );
    }

    #[test]
    fn what_argo_refuses_is_refused() {
        assert!(RolloutsConfig::parse(&data(&[("stepPlugins", "{not: a list")])).is_err());
        assert!(
            RolloutsConfig::parse(&data(&[(
                "metricProviderPlugins",
                "- name: no-slash\n  location: file://x\n"
            )]))
            .unwrap_err()
            .contains("<namespace>/<name>")
        );
        assert!(valid_plugin_name("argoproj-labs/rollouts-plugin_x.v2"));
        assert!(!valid_plugin_name("a/b/c"));
        assert!(!valid_plugin_name("a_b/c"));
    }
}
