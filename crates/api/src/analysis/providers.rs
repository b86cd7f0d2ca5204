//! Metric providers (`metrics[].provider`): where measurements come from.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::JobSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::FreeFormObject;

/// The source of a metric's measurements; exactly one field is expected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricProvider {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kayenta: Option<KayentaMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web: Option<WebMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datadog: Option<DatadogMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavefront: Option<WavefrontMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_relic: Option<NewRelicMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_watch: Option<CloudWatchMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graphite: Option<GraphiteMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub influxdb: Option<InfluxdbMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skywalking: Option<SkyWalkingMetric>,
    /// Metric-provider plugins by `<org>/<name>`, each with its own configuration.
    #[schemars(with = "Option<FreeFormObject>")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<BTreeMap<String, serde_json::Value>>,
}

/// The kind of a metric provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    Prometheus,
    Kayenta,
    Web,
    Datadog,
    Wavefront,
    NewRelic,
    Job,
    CloudWatch,
    Graphite,
    Influxdb,
    SkyWalking,
    Plugin,
}

impl ProviderKind {
    /// The provider type name Argo reports (e.g. in the `type` metric label).
    pub fn type_name(self) -> &'static str {
        match self {
            ProviderKind::Prometheus => "Prometheus",
            ProviderKind::Kayenta => "Kayenta",
            ProviderKind::Web => "Web",
            ProviderKind::Datadog => "Datadog",
            ProviderKind::Wavefront => "Wavefront",
            ProviderKind::NewRelic => "NewRelic",
            ProviderKind::Job => "Job",
            ProviderKind::CloudWatch => "CloudWatch",
            ProviderKind::Graphite => "Graphite",
            ProviderKind::Influxdb => "Influxdb",
            ProviderKind::SkyWalking => "skywalking",
            ProviderKind::Plugin => "RPCPlugin",
        }
    }
}

impl ProviderKind {
    /// The provider's field in `metrics[].provider`.
    pub fn field_name(self) -> &'static str {
        match self {
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
}

impl MetricProvider {
    /// The kinds of all providers set, in declaration order (a valid metric has one).
    pub fn kinds(&self) -> Vec<ProviderKind> {
        let set = [
            (self.prometheus.is_some(), ProviderKind::Prometheus),
            (self.kayenta.is_some(), ProviderKind::Kayenta),
            (self.web.is_some(), ProviderKind::Web),
            (self.datadog.is_some(), ProviderKind::Datadog),
            (self.wavefront.is_some(), ProviderKind::Wavefront),
            (self.new_relic.is_some(), ProviderKind::NewRelic),
            (self.job.is_some(), ProviderKind::Job),
            (self.cloud_watch.is_some(), ProviderKind::CloudWatch),
            (self.graphite.is_some(), ProviderKind::Graphite),
            (self.influxdb.is_some(), ProviderKind::Influxdb),
            (self.skywalking.is_some(), ProviderKind::SkyWalking),
            (self.plugin.is_some(), ProviderKind::Plugin),
        ];
        set.into_iter()
            .filter_map(|(present, kind)| present.then_some(kind))
            .collect()
    }

    /// The kind of the first provider set, if any.
    pub fn kind(&self) -> Option<ProviderKind> {
        self.kinds().first().copied()
    }
}

/// A PromQL query, instant or ranged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusMetric {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
    /// Query timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
    /// Skip TLS verification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<WebMetricHeader>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range_query: Option<PrometheusRangeQueryArgs>,
}

/// Start, end and step of a range query (expressions such as `now() - 1h`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusRangeQueryArgs {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// How to authenticate to a Prometheus or web endpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Authentication {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sigv4: Option<Sigv4Config>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OAuth2Config>,
    /// HTTP basic authentication (Argo's master, its pull request 4401; Grafana Cloud's
    /// Prometheus asks for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_auth: Option<BasicAuthConfig>,
}

/// A user name and password sent as HTTP basic authentication.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BasicAuthConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

impl std::fmt::Debug for BasicAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuthConfig")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// AWS SigV4 request signing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sigv4Config {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
}

/// OAuth2 client-credentials flow.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2Config {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}

/// An HTTP request whose (JSON) response is the measurement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebMetric {
    /// GET, POST or PUT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<Vec<WebMetricHeader>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// JSONPath into the response selecting the result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// Request body given as JSON rather than a string.
    #[schemars(with = "Option<FreeFormObject>")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json_body: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication: Option<Authentication>,
}

/// An HTTP header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebMetricHeader {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A Kubernetes Job; completion is success, failure is failure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobMetric {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSpec>,
}

/// A Datadog metrics query (API v1 or v2).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatadogMetric {
    /// Go duration of the query window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Named queries combined by `formula` (v2 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queries: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// `v1` (the default) or `v2`.
    #[schemars(extend("enum" = ["v1", "v2"]))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// How v2 query results are reduced to one value.
    #[schemars(extend("enum" = ["avg", "min", "max", "sum", "last", "percentile", "mean", "l2norm", "area"]))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggregator: Option<String>,
    /// Go duration the request to Datadog may take (Argo 1.10; default 10s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_timeout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
}

/// Datadog API version used when `apiVersion` is not set. (Argo's CRD declares it as a schema
/// default; the generated CRDs declare no defaults, so readers apply it.)
pub const DEFAULT_DATADOG_API_VERSION: &str = "v1";
/// Datadog query window used when `interval` is not set.
pub const DEFAULT_DATADOG_INTERVAL: &str = "5m";

impl DatadogMetric {
    /// `apiVersion`, defaulting to `v1`.
    pub fn api_version(&self) -> &str {
        self.api_version
            .as_deref()
            .unwrap_or(DEFAULT_DATADOG_API_VERSION)
    }

    /// `interval`, defaulting to `5m`.
    pub fn interval(&self) -> &str {
        self.interval.as_deref().unwrap_or(DEFAULT_DATADOG_INTERVAL)
    }
}

/// The Secret holding provider credentials.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Look the Secret up in the AnalysisRun's namespace rather than the controller's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaced: Option<bool>,
}

/// A Wavefront query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WavefrontMetric {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// A New Relic NRQL query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewRelicMetric {
    /// Secret with the account credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Query timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
}

/// A Kayenta canary analysis.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KayentaMetric {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_config_name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_account_name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration_account_name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_account_name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<KayentaThreshold>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<KayentaScope>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookback: Option<bool>,
}

/// Kayenta score thresholds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KayentaThreshold {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<i64>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marginal: Option<i64>,
}

/// A named pair of control and experiment scopes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KayentaScope {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_scope: Option<ScopeDetail>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment_scope: Option<ScopeDetail>,
}

/// One Kayenta scope.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScopeDetail {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
}

/// AWS CloudWatch `GetMetricData` queries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudWatchMetric {
    /// Go duration of the query window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_data_queries: Option<Vec<CloudWatchMetricDataQuery>>,
}

/// One CloudWatch metric data query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudWatchMetricDataQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_stat: Option<CloudWatchMetricStat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<IntOrString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_data: Option<bool>,
}

/// A CloudWatch metric and statistic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudWatchMetricStat {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<CloudWatchMetricStatMetric>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<IntOrString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stat: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// A CloudWatch metric by namespace, name and dimensions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudWatchMetricStatMetric {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<Vec<CloudWatchMetricStatMetricDimension>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A CloudWatch dimension.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudWatchMetricStatMetricDimension {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A Graphite render query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GraphiteMetric {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// An InfluxDB Flux query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfluxdbMetric {
    /// Secret with the connection settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
}

/// An Apache SkyWalking GraphQL query.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkyWalkingMetric {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provider_kinds() {
        let p: MetricProvider = serde_json::from_value(json!({
            "newRelic": {"query": "q"},
            "plugin": {"argoproj-labs/sample": {"address": "x"}}
        }))
        .unwrap();
        assert_eq!(p.kinds(), [ProviderKind::NewRelic, ProviderKind::Plugin]);
        assert_eq!(p.kind().map(ProviderKind::type_name), Some("NewRelic"));
        assert_eq!(MetricProvider::default().kind(), None);
    }

    #[test]
    fn field_names_are_the_serialized_keys() {
        let all = json!({
            "prometheus": {}, "kayenta": {}, "web": {}, "datadog": {}, "wavefront": {},
            "newRelic": {}, "job": {}, "cloudWatch": {}, "graphite": {}, "influxdb": {},
            "skywalking": {}, "plugin": {}
        });
        let p: MetricProvider = serde_json::from_value(all.clone()).unwrap();
        let names: Vec<&str> = p
            .kinds()
            .into_iter()
            .map(ProviderKind::field_name)
            .collect();
        let keys: Vec<&str> = all
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(names.len(), 12);
        for name in names {
            assert!(keys.contains(&name), "{name}");
        }
    }

    #[test]
    fn datadog_defaults() {
        let d = DatadogMetric::default();
        assert_eq!((d.api_version(), d.interval()), ("v1", "5m"));
        let d: DatadogMetric =
            serde_json::from_value(json!({"apiVersion": "v2", "interval": "1m"})).unwrap();
        assert_eq!((d.api_version(), d.interval()), ("v2", "1m"));
    }

    #[test]
    fn web_json_body_is_kept_verbatim() {
        let value =
            json!({"url": "http://x", "method": "POST", "jsonBody": {"a": {"b": [1, "2", null]}}});
        let web: WebMetric = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(serde_json::to_value(&web).unwrap(), value);
    }
}
