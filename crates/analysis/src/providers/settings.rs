//! Process-wide provider settings, read from the environment as Argo reads them.

/// Env var with the Prometheus address used when a metric names none.
pub const PROMETHEUS_ADDRESS_ENV: &str = "ARGO_ROLLOUTS_PROMETHEUS_ADDRESS";
/// Namespace of the controller's own provider Secrets when neither setting nor env var says.
pub const DEFAULT_CONTROLLER_NAMESPACE: &str = "argo-rollouts";

/// Process-wide settings, as Argo reads them from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderSettings {
    /// Where the default provider Secrets (`datadog`, `newrelic`) live.
    pub controller_namespace: String,
    /// `ARGO_ROLLOUTS_PROMETHEUS_ADDRESS`.
    pub prometheus_address: Option<String>,
    /// `DD_API_KEY`, `DD_APP_KEY` and `DD_ADDRESS`.
    pub datadog: Option<DatadogCredentials>,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        Self {
            controller_namespace: DEFAULT_CONTROLLER_NAMESPACE.to_owned(),
            prometheus_address: None,
            datadog: None,
        }
    }
}

impl ProviderSettings {
    /// Reads the settings from the environment: `POD_NAMESPACE` (else the service account's
    /// namespace, else `argo-rollouts`), `ARGO_ROLLOUTS_PROMETHEUS_ADDRESS` and `DD_*`.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let controller_namespace = var("POD_NAMESPACE")
            .or_else(|| {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .ok()
                    .map(|ns| ns.trim().to_owned())
                    .filter(|ns| !ns.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_CONTROLLER_NAMESPACE.to_owned());
        let datadog = match (var("DD_API_KEY"), var("DD_APP_KEY")) {
            (Some(api_key), Some(app_key)) => Some(DatadogCredentials {
                address: var("DD_ADDRESS"),
                api_key,
                app_key,
            }),
            _ => None,
        };
        Self {
            controller_namespace,
            prometheus_address: var(PROMETHEUS_ADDRESS_ENV),
            datadog,
        }
    }
}

/// Datadog API credentials and the API address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatadogCredentials {
    pub address: Option<String>,
    pub api_key: String,
    pub app_key: String,
}
