//! Metric providers behind one interface: start a measurement, resume or terminate an
//! asynchronous one (Jobs), and garbage-collect what measurements left behind.
//!
//! Every measurement gets `startedAt`, and `finishedAt` once it is complete. Provider failures
//! become phase `Error` with the reason as message; nothing here returns early with a Rust error,
//! so a run always has a measurement to record. Secret values are redacted from the result.

mod datadog;
mod http;
mod job;
mod newrelic;
mod prometheus;
mod web;

#[cfg(test)]
mod test_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use expr::Value;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::AnalysisRun;
use sluice_api::analysis::{Measurement, Metric, MetricProvider, ProviderKind};
use sluice_api::common::AnalysisPhase;

use crate::expression::evaluate_metric;
use crate::redact::Redactor;
use crate::secrets::{KubeSecrets, SecretSource};

pub use datadog::DatadogCredentials;
pub use job::{
    ANALYSIS_RUN_METRIC_ANNOTATION, ANALYSIS_RUN_NAME_ANNOTATION,
    ANALYSIS_RUN_NAMESPACE_ANNOTATION, ANALYSIS_RUN_UID_LABEL, JOB_NAME_KEY, JOB_NAMESPACE_KEY,
    build_job, job_name,
};
pub use prometheus::RESOLVED_PROMETHEUS_QUERY;

/// Env var with the Prometheus address used when a metric names none.
pub const PROMETHEUS_ADDRESS_ENV: &str = "ARGO_ROLLOUTS_PROMETHEUS_ADDRESS";
/// Namespace of the controller's own provider Secrets when neither setting nor env var says.
pub const DEFAULT_CONTROLLER_NAMESPACE: &str = "argo-rollouts";

/// A provider could not be set up or used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProviderError(pub String);

impl ProviderError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// The AnalysisRun a measurement belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunContext {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// Secret values to keep out of measurements (from [`crate::ResolvedArgs::redactor`]).
    pub redactor: Redactor,
    /// Measurements taken so far per metric (`count + error`), which numbers Job names.
    pub measurements_taken: BTreeMap<String, i32>,
}

impl RunContext {
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        uid: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            uid: uid.into(),
            ..Default::default()
        }
    }

    /// Name, namespace and uid from the run's metadata; measurements taken from its status.
    pub fn for_run(run: &AnalysisRun) -> Self {
        let meta = &run.metadata;
        let mut ctx = Self::new(
            meta.name.clone().unwrap_or_default(),
            meta.namespace.clone().unwrap_or_default(),
            meta.uid.clone().unwrap_or_default(),
        );
        let results = run
            .status
            .iter()
            .flat_map(|s| s.metric_results.iter().flatten());
        for result in results {
            if let Some(name) = &result.name {
                let taken = result.count.unwrap_or(0) + result.error.unwrap_or(0);
                ctx.measurements_taken.insert(name.clone(), taken);
            }
        }
        ctx
    }

    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    pub fn with_measurements_taken(mut self, metric: &str, taken: i32) -> Self {
        self.measurements_taken.insert(metric.to_owned(), taken);
        self
    }

    /// Measurements taken so far for `metric`.
    pub fn measurements_taken(&self, metric: &str) -> i32 {
        self.measurements_taken.get(metric).copied().unwrap_or(0)
    }
}

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

/// The metric providers, with the clients they share.
#[derive(Clone)]
pub struct Providers {
    http: reqwest::Client,
    insecure_http: reqwest::Client,
    kube: Option<kube::Client>,
    secrets: Arc<dyn SecretSource>,
    settings: ProviderSettings,
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
        })
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
        let outcome = match single_provider(metric) {
            Ok(Provider::Prometheus(p)) => prometheus::measure(self, metric, p).await,
            Ok(Provider::Web(w)) => web::measure(self, metric, w).await,
            Ok(Provider::Datadog(d)) => datadog::measure(self, ctx, metric, d, &mut redactor).await,
            Ok(Provider::NewRelic(n)) => newrelic::measure(self, metric, n, &mut redactor).await,
            Ok(Provider::Job(j)) => job::measure(self, ctx, metric, j).await,
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
        let measurement = match single_provider(metric) {
            Ok(Provider::Job(_)) => job::resume(self, ctx, measurement).await,
            _ => measurement,
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
        let measurement = match single_provider(metric) {
            Ok(Provider::Job(_)) => job::terminate(self, ctx, measurement).await,
            _ => measurement,
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
        match single_provider(metric) {
            Ok(Provider::Job(_)) => job::garbage_collect(self, ctx, metric, keep).await,
            _ => Ok(()),
        }
        .map_err(|err| ProviderError(ctx.redactor.redact(&err.0)))
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
    let query = metric
        .provider
        .as_ref()?
        .prometheus
        .as_ref()?
        .query
        .as_deref()
        .filter(|q| !q.is_empty())?;
    Some(BTreeMap::from([(
        RESOLVED_PROMETHEUS_QUERY.to_owned(),
        redactor.redact(query),
    )]))
}

enum Provider<'a> {
    Prometheus(&'a sluice_api::analysis::PrometheusMetric),
    Web(&'a sluice_api::analysis::WebMetric),
    Datadog(&'a sluice_api::analysis::DatadogMetric),
    NewRelic(&'a sluice_api::analysis::NewRelicMetric),
    Job(&'a sluice_api::analysis::JobMetric),
}

fn single_provider(metric: &Metric) -> Result<Provider<'_>, ProviderError> {
    let Some(provider) = &metric.provider else {
        return Err(ProviderError::new("metric has no provider"));
    };
    let kinds = provider.kinds();
    match kinds.as_slice() {
        [] => Err(ProviderError::new("metric has no provider")),
        [kind] => supported(provider, *kind),
        many => Err(ProviderError(format!(
            "metric has more than one provider: {}",
            many.iter()
                .map(|k| format!("{:?}", json_key(*k)))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn supported(provider: &MetricProvider, kind: ProviderKind) -> Result<Provider<'_>, ProviderError> {
    let found = match kind {
        ProviderKind::Prometheus => provider.prometheus.as_ref().map(Provider::Prometheus),
        ProviderKind::Web => provider.web.as_ref().map(Provider::Web),
        ProviderKind::Datadog => provider.datadog.as_ref().map(Provider::Datadog),
        ProviderKind::NewRelic => provider.new_relic.as_ref().map(Provider::NewRelic),
        ProviderKind::Job => provider.job.as_ref().map(Provider::Job),
        _ => None,
    };
    found.ok_or_else(|| {
        let plugins = provider
            .plugin
            .iter()
            .flat_map(|p| p.keys())
            .map(String::as_str)
            .collect::<Vec<_>>();
        if kind == ProviderKind::Plugin && !plugins.is_empty() {
            ProviderError(format!(
                "provider \"plugin\" ({}) is not supported",
                plugins.join(", ")
            ))
        } else {
            ProviderError(format!("provider {:?} is not supported", json_key(kind)))
        }
    })
}

/// The provider's key in `metrics[].provider`.
fn json_key(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Prometheus => "prometheus",
        ProviderKind::Kayenta => "kayenta",
        ProviderKind::Web => "web",
        ProviderKind::Datadog => "datadog",
        ProviderKind::Wavefront => "wavefront",
        ProviderKind::NewRelic => "newRelic",
        ProviderKind::Job => "job",
        ProviderKind::CloudWatch => "cloudWatch",
        ProviderKind::Graphite => "graphite",
        ProviderKind::Influxdb => "influxdb",
        ProviderKind::SkyWalking => "skywalking",
        ProviderKind::Plugin => "plugin",
    }
}

/// What a provider found, before timestamps are added.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    phase: Option<AnalysisPhase>,
    value: Option<String>,
    message: Option<String>,
    metadata: BTreeMap<String, String>,
}

impl Outcome {
    /// A value judged against the metric's conditions. A condition that cannot be evaluated
    /// gives Error, keeping the value for the reader.
    pub(crate) fn judged(metric: &Metric, value: impl Into<String>, result: &Value) -> Self {
        let (phase, message) = match evaluate_metric(metric, result) {
            Ok(phase) => (phase, None),
            Err(err) => (AnalysisPhase::Error, Some(err.0)),
        };
        Self {
            phase: Some(phase),
            value: Some(value.into()),
            message,
            metadata: BTreeMap::new(),
        }
    }

    /// A measurement still in flight.
    pub(crate) fn running(metadata: BTreeMap<String, String>) -> Self {
        Self {
            phase: Some(AnalysisPhase::Running),
            metadata,
            ..Default::default()
        }
    }

    pub(crate) fn with_metadata(mut self, key: &str, value: impl Into<String>) -> Self {
        self.metadata.insert(key.to_owned(), value.into());
        self
    }
}

fn outcome_to_measurement(started: Time, outcome: Result<Outcome, ProviderError>) -> Measurement {
    let outcome = outcome.unwrap_or_else(|err| Outcome {
        phase: Some(AnalysisPhase::Error),
        message: Some(err.0),
        ..Default::default()
    });
    let phase = outcome.phase.unwrap_or(AnalysisPhase::Error);
    Measurement {
        finished_at: phase.is_completed().then(now),
        phase: Some(phase),
        message: outcome.message,
        started_at: Some(started),
        value: outcome.value,
        metadata: (!outcome.metadata.is_empty()).then_some(outcome.metadata),
        resume_at: None,
    }
}

/// Marks a measurement as failed with an error, as Argo's `MarkMeasurementError` does.
pub(crate) fn mark_error(mut measurement: Measurement, message: impl Into<String>) -> Measurement {
    measurement.phase = Some(AnalysisPhase::Error);
    measurement.message = Some(message.into());
    if measurement.finished_at.is_none() {
        measurement.finished_at = Some(now());
    }
    measurement
}

/// The current time, in whole seconds as the API server stores it.
pub(crate) fn now() -> Time {
    Time(sluice_api::time::whole_seconds(jiff::Timestamp::now()))
}

/// A float as Go's `strconv.FormatFloat(f, 'f', -1, 64)` writes it (and Prometheus' sample
/// values print): shortest form, no exponent, `NaN`, `+Inf`, `-Inf`.
pub(crate) fn format_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{f}")
    }
}

/// `[a,b,c]`, the way Argo writes a list of floats.
pub(crate) fn format_floats(values: &[f64]) -> String {
    let items: Vec<String> = values.iter().copied().map(format_float).collect();
    format!("[{}]", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::test_support::providers;
    use super::*;
    use serde_json::json;

    fn metric(provider: serde_json::Value) -> Metric {
        serde_json::from_value(json!({"name": "m", "provider": provider})).unwrap()
    }

    #[tokio::test]
    async fn unsupported_providers_are_errors() {
        let p = providers(Default::default());
        let ctx = RunContext::new("run", "ns", "uid");
        let cases = [
            (
                json!({"kayenta": {}}),
                "provider \"kayenta\" is not supported",
            ),
            (
                json!({"cloudWatch": {"metricDataQueries": []}}),
                "provider \"cloudWatch\" is not supported",
            ),
            (
                json!({"wavefront": {}}),
                "provider \"wavefront\" is not supported",
            ),
            (
                json!({"graphite": {}}),
                "provider \"graphite\" is not supported",
            ),
            (
                json!({"influxdb": {}}),
                "provider \"influxdb\" is not supported",
            ),
            (
                json!({"skywalking": {}}),
                "provider \"skywalking\" is not supported",
            ),
            (
                json!({"plugin": {"argoproj-labs/sample": {}}}),
                "provider \"plugin\" (argoproj-labs/sample) is not supported",
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
    fn run_context_from_run() {
        let run: AnalysisRun = serde_json::from_value(json!({
            "metadata": {"name": "r", "namespace": "ns", "uid": "u-1"},
            "spec": {"metrics": []},
            "status": {"phase": "Running", "metricResults": [
                {"name": "a", "phase": "Running", "count": 2, "error": 1},
                {"name": "b", "phase": "Running"}
            ]}
        }))
        .unwrap();
        let ctx = RunContext::for_run(&run);
        assert_eq!((ctx.name.as_str(), ctx.namespace.as_str()), ("r", "ns"));
        assert_eq!(ctx.uid, "u-1");
        assert_eq!(ctx.measurements_taken("a"), 3);
        assert_eq!(ctx.measurements_taken("b"), 0);
        assert_eq!(ctx.measurements_taken("c"), 0);
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

    #[test]
    fn floats_as_go_writes_them() {
        assert_eq!(format_float(0.99), "0.99");
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(1e-7), "0.0000001");
        assert_eq!(format_float(f64::NAN), "NaN");
        assert_eq!(format_float(f64::INFINITY), "+Inf");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_floats(&[]), "[]");
        assert_eq!(format_floats(&[0.5, 2.0]), "[0.5,2]");
    }

    #[test]
    fn outcomes_become_measurements() {
        let m = outcome_to_measurement(now(), Err(ProviderError::new("boom")));
        assert_eq!(m.phase, Some(AnalysisPhase::Error));
        assert_eq!(m.message.as_deref(), Some("boom"));
        assert!(m.finished_at.is_some());

        let running = outcome_to_measurement(
            now(),
            Ok(Outcome::running(BTreeMap::from([("k".into(), "v".into())]))),
        );
        assert_eq!(running.phase, Some(AnalysisPhase::Running));
        assert!(running.finished_at.is_none());
        assert_eq!(running.metadata.unwrap()["k"], "v");

        let metric = Metric {
            success_condition: Some("result >".into()),
            ..Default::default()
        };
        let judged =
            outcome_to_measurement(now(), Ok(Outcome::judged(&metric, "1", &Value::Float(1.0))));
        assert_eq!(judged.phase, Some(AnalysisPhase::Error));
        assert_eq!(judged.value.as_deref(), Some("1"));
        assert!(judged.message.unwrap().contains("syntax error"));
    }
}
