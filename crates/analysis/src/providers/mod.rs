//! Metric providers behind one interface: start a measurement, resume or terminate an
//! asynchronous one (Jobs), and garbage-collect what measurements left behind.
//!
//! Each provider is one module implementing [`provider::Provider`], listed once in
//! [`REGISTRY`]; dispatch finds a metric's provider there and names none of them.
//!
//! Every measurement gets `startedAt`, and `finishedAt` once it is complete. Provider failures
//! become phase `Error` with the reason as message; nothing here returns early with a Rust error,
//! so a run always has a measurement to record. Secret values are redacted from the result.

mod cloudwatch;
mod datadog;
mod graphite;
mod http;
mod influxdb;
mod job;
mod kayenta;
mod newrelic;
mod outcome;
mod plugin;
mod prometheus;
mod provider;
mod run_context;
mod settings;
mod skywalking;
mod wavefront;
mod web;

#[cfg(test)]
mod test_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_api::analysis::{Measurement, Metric, ProviderKind};

use crate::redact::Redactor;
use crate::secrets::{KubeSecrets, SecretSource};
use outcome::{now, outcome_to_measurement};
use provider::{Adapter, Env, Registered};

pub use job::{
    ANALYSIS_RUN_METRIC_ANNOTATION, ANALYSIS_RUN_NAME_ANNOTATION,
    ANALYSIS_RUN_NAMESPACE_ANNOTATION, ANALYSIS_RUN_UID_LABEL, JOB_NAME_KEY, JOB_NAMESPACE_KEY,
    build_job, job_name,
};
pub use prometheus::RESOLVED_PROMETHEUS_QUERY;
pub use run_context::RunContext;
pub use settings::{
    DEFAULT_CONTROLLER_NAMESPACE, DatadogCredentials, PROMETHEUS_ADDRESS_ENV, ProviderSettings,
};

/// Every metric provider Sluice has, one line each. A metric whose provider is not here is
/// measured as an Error saying the provider is not supported.
static REGISTRY: &[&dyn Registered] = &[
    &Adapter::<prometheus::Prometheus>::NEW,
    &Adapter::<web::Web>::NEW,
    &Adapter::<datadog::Datadog>::NEW,
    &Adapter::<newrelic::NewRelic>::NEW,
    &Adapter::<job::JobProvider>::NEW,
    &Adapter::<graphite::Graphite>::NEW,
    &Adapter::<influxdb::Influxdb>::NEW,
    &Adapter::<wavefront::Wavefront>::NEW,
    &Adapter::<skywalking::SkyWalking>::NEW,
    &Adapter::<kayenta::Kayenta>::NEW,
    &Adapter::<cloudwatch::CloudWatch>::NEW,
    &Adapter::<plugin::Plugin>::NEW,
];

/// A provider could not be set up or used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

impl ProviderError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// The metric providers, with the clients they share.
#[derive(Clone)]
pub struct Providers {
    http: reqwest::Client,
    insecure_http: reqwest::Client,
    kube: Option<kube::Client>,
    secrets: Arc<dyn SecretSource>,
    settings: ProviderSettings,
    plugins: Option<Arc<sluice_plugins::PluginHost>>,
    /// The AWS configuration CloudWatch and SigV4 use; the process's when not given.
    aws: Option<Arc<sluice_aws::SdkConfig>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers")
            .field("kube", &self.kube.is_some())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Providers {
    /// Providers reading Secrets through `secrets`; without a kube client the Job provider
    /// reports an error. A rustls crypto provider must be installed for the process.
    pub fn new(
        settings: ProviderSettings,
        secrets: Arc<dyn SecretSource>,
        kube: Option<kube::Client>,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            http: http::build_client(false)?,
            insecure_http: http::build_client(true)?,
            kube,
            secrets,
            settings,
            plugins: None,
            aws: None,
        })
    }

    /// The same providers, running metric plugins through `host`.
    pub fn with_plugins(mut self, host: Arc<sluice_plugins::PluginHost>) -> Self {
        self.plugins = Some(host);
        self
    }

    pub(crate) fn plugins(&self) -> Option<&sluice_plugins::PluginHost> {
        self.plugins.as_deref()
    }

    /// The same providers, reaching AWS as `config` says (a test's endpoint and credentials)
    /// instead of through the process's configuration.
    pub fn with_aws(mut self, config: sluice_aws::SdkConfig) -> Self {
        self.aws = Some(Arc::new(config));
        self
    }

    /// The AWS configuration: the one given, else the process's, loaded from the default
    /// chain on first use (so that a controller with no AWS metric never reads it).
    pub(crate) async fn aws(&self) -> &sluice_aws::SdkConfig {
        match &self.aws {
            Some(config) => config,
            None => sluice_aws::sdk_config().await,
        }
    }

    /// Providers for a cluster: settings from the environment, Secrets from the API server.
    pub fn for_cluster(kube: kube::Client) -> Result<Self, ProviderError> {
        Self::new(
            ProviderSettings::from_env(),
            Arc::new(KubeSecrets::new(kube.clone())),
            Some(kube),
        )
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// Takes a measurement. Synchronous providers return it judged (Successful, Failed,
    /// Inconclusive or Error); the Job provider returns it Running, with the Job's name and
    /// namespace in `metadata`, to be [resumed](Self::resume).
    pub async fn measure(&self, ctx: &RunContext, metric: &Metric) -> Measurement {
        let started = now();
        let mut redactor = ctx.redactor.clone();
        let outcome = match provider_of(metric) {
            Ok(provider) => provider.measure(self.env(ctx, metric), &mut redactor).await,
            Err(err) => Err(err),
        };
        redactor.redact_measurement(outcome_to_measurement(started, outcome))
    }

    /// Polls an in-flight measurement; for providers that finish in [`Self::measure`] the
    /// measurement is returned unchanged.
    pub async fn resume(
        &self,
        ctx: &RunContext,
        metric: &Metric,
        measurement: Measurement,
    ) -> Measurement {
        let measurement = match provider_of(metric) {
            Ok(provider) => provider.resume(self.env(ctx, metric), measurement).await,
            Err(_) => measurement,
        };
        ctx.redactor.redact_measurement(measurement)
    }

    /// Stops an in-flight measurement. A Job is deleted and the measurement becomes Successful
    /// (Argo's terminate semantics); other providers return it unchanged.
    pub async fn terminate(
        &self,
        ctx: &RunContext,
        metric: &Metric,
        measurement: Measurement,
    ) -> Measurement {
        let measurement = match provider_of(metric) {
            Ok(provider) => provider.terminate(self.env(ctx, metric), measurement).await,
            Err(_) => measurement,
        };
        ctx.redactor.redact_measurement(measurement)
    }

    /// Deletes what old measurements left behind, keeping the newest `keep` (Jobs of this
    /// metric). A no-op for other providers.
    pub async fn garbage_collect(
        &self,
        ctx: &RunContext,
        metric: &Metric,
        keep: usize,
    ) -> Result<(), ProviderError> {
        match provider_of(metric) {
            Ok(provider) => provider.garbage_collect(self.env(ctx, metric), keep).await,
            Err(_) => Ok(()),
        }
        .map_err(|err| ProviderError(ctx.redactor.redact(&err.0)))
    }

    fn env<'a>(&'a self, run: &'a RunContext, metric: &'a Metric) -> Env<'a> {
        Env {
            providers: self,
            run,
            metric,
        }
    }

    pub(crate) fn http(&self, insecure: bool) -> &reqwest::Client {
        if insecure {
            &self.insecure_http
        } else {
            &self.http
        }
    }

    pub(crate) fn kube(&self) -> Result<&kube::Client, ProviderError> {
        self.kube
            .as_ref()
            .ok_or_else(|| ProviderError::new("the job provider needs a Kubernetes client"))
    }

    pub(crate) fn secrets(&self) -> &dyn SecretSource {
        self.secrets.as_ref()
    }
}

/// Extra data a provider shows on the metric's result, e.g. the resolved Prometheus query
/// (`ResolvedPrometheusQuery`), redacted.
pub fn metric_metadata(metric: &Metric, redactor: &Redactor) -> Option<BTreeMap<String, String>> {
    let provider = metric.provider.as_ref()?;
    provider
        .kinds()
        .into_iter()
        .filter_map(registered)
        .find_map(|p| p.metadata(provider, redactor))
}

fn registered(kind: ProviderKind) -> Option<&'static dyn Registered> {
    REGISTRY.iter().copied().find(|p| p.kind() == kind)
}

/// The one provider the metric sets, if Sluice has it.
fn provider_of(metric: &Metric) -> Result<&'static dyn Registered, ProviderError> {
    let Some(provider) = &metric.provider else {
        return Err(ProviderError::new("metric has no provider"));
    };
    let kind = match provider.kinds().as_slice() {
        [] => return Err(ProviderError::new("metric has no provider")),
        [kind] => *kind,
        many => {
            return Err(ProviderError(format!(
                "metric has more than one provider: {}",
                many.iter()
                    .map(|k| format!("{:?}", k.field_name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    };
    registered(kind)
        .ok_or_else(|| ProviderError(format!("provider {:?} is not supported", kind.field_name())))
}

#[cfg(test)]
mod tests {
    use super::test_support::providers;
    use super::*;
    use serde_json::json;
    use sluice_api::common::AnalysisPhase;

    fn metric(provider: serde_json::Value) -> Metric {
        serde_json::from_value(json!({"name": "m", "provider": provider})).unwrap()
    }

    #[tokio::test]
    async fn unsupported_providers_are_errors() {
        let p = providers(Default::default());
        let ctx = RunContext::new("run", "ns", "uid");
        let cases = [
            (
                json!({"plugin": {"argoproj-labs/sample": {}}}),
                "unable to start plugin system: unable to find plugin (argoproj-labs/sample): plugin argoproj-labs/sample not configured in configmap",
            ),
            (json!({}), "metric has no provider"),
            (
                json!({"web": {"url": "http://x"}, "job": {}}),
                "metric has more than one provider: \"web\", \"job\"",
            ),
        ];
        for (provider, message) in cases {
            let m = p.measure(&ctx, &metric(provider)).await;
            assert_eq!(m.phase, Some(AnalysisPhase::Error));
            assert_eq!(m.message.as_deref(), Some(message));
            assert!(m.started_at.is_some() && m.finished_at.is_some());
        }
        let no_provider = Metric {
            name: Some("m".into()),
            ..Default::default()
        };
        let m = p.measure(&ctx, &no_provider).await;
        assert_eq!(m.message.as_deref(), Some("metric has no provider"));
    }

    #[tokio::test]
    async fn each_provider_is_registered_once_and_reads_its_own_field() {
        let p = providers(Default::default());
        let ctx = RunContext::new("run", "ns", "uid");
        let mut fields = std::collections::BTreeSet::new();
        for registered in REGISTRY {
            let field = registered.kind().field_name();
            assert!(fields.insert(field), "{field} is registered twice");
            let m = metric(json!({ field: {} }));
            let found = provider_of(&m).unwrap();
            assert_eq!(found.kind(), registered.kind());
            let measured = p.measure(&ctx, &m).await;
            let message = measured.message.unwrap_or_default();
            assert!(!message.contains("is not supported"), "{field}: {message}");
            assert!(!message.starts_with("metric has no"), "{field}: {message}");
        }
    }

    #[tokio::test]
    async fn resume_and_terminate_leave_synchronous_measurements_alone() {
        let p = providers(Default::default());
        let ctx = RunContext::new("run", "ns", "uid");
        let m = metric(json!({"web": {"url": "http://x"}}));
        let measurement = Measurement {
            phase: Some(AnalysisPhase::Successful),
            value: Some("1".into()),
            ..Default::default()
        };
        assert_eq!(p.resume(&ctx, &m, measurement.clone()).await, measurement);
        assert_eq!(
            p.terminate(&ctx, &m, measurement.clone()).await,
            measurement
        );
        p.garbage_collect(&ctx, &m, 0).await.unwrap();
    }

    #[test]
    fn prometheus_query_metadata() {
        let m = metric(json!({"prometheus": {"query": "up{token=\"abc\"}"}}));
        assert_eq!(
            metric_metadata(&m, &Redactor::new(["abc"])),
            Some(BTreeMap::from([(
                "ResolvedPrometheusQuery".to_owned(),
                "up{token=\"*****\"}".to_owned()
            )]))
        );
        assert_eq!(
            metric_metadata(&metric(json!({"web": {}})), &Redactor::default()),
            None
        );
    }
}
