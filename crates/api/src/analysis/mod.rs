//! Analysis kinds: `AnalysisTemplate`, `ClusterAnalysisTemplate` and `AnalysisRun`, with their
//! metrics and metric providers.

pub mod placeholders;
mod providers;
mod status;

pub use providers::*;
pub use status::*;

use std::ops::{Deref, DerefMut};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{AnalysisTemplateRef, Argument, DryRun, MeasurementRetention};
use crate::duration::{DurationError, parse_go_duration};

/// Default of `consecutiveErrorLimit`.
pub const DEFAULT_CONSECUTIVE_ERROR_LIMIT: i32 = 4;
/// Measurements kept per metric when no `measurementRetention` applies.
pub const DEFAULT_MEASUREMENT_HISTORY_LIMIT: i32 = 10;

/// A reusable set of metrics, instantiated as AnalysisRuns.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "AnalysisTemplate",
    plural = "analysistemplates",
    shortname = "at",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since resource was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisTemplateSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<Metric>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<Argument>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement_retention: Option<Vec<MeasurementRetention>>,
    /// Other templates whose metrics and args are merged into this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<AnalysisTemplateRef>>,
}

/// The spec of a [`ClusterAnalysisTemplate`]: the same fields as an AnalysisTemplate's.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "ClusterAnalysisTemplate",
    plural = "clusteranalysistemplates",
    shortname = "cat",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since resource was created"
    )
)]
#[serde(transparent)]
#[schemars(transparent)]
pub struct ClusterAnalysisTemplateSpec(pub AnalysisTemplateSpec);

impl Deref for ClusterAnalysisTemplateSpec {
    type Target = AnalysisTemplateSpec;

    fn deref(&self) -> &AnalysisTemplateSpec {
        &self.0
    }
}

impl DerefMut for ClusterAnalysisTemplateSpec {
    fn deref_mut(&mut self) -> &mut AnalysisTemplateSpec {
        &mut self.0
    }
}

impl From<AnalysisTemplateSpec> for ClusterAnalysisTemplateSpec {
    fn from(spec: AnalysisTemplateSpec) -> Self {
        Self(spec)
    }
}

/// One execution of a set of metrics.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "AnalysisRun",
    plural = "analysisruns",
    shortname = "ar",
    namespaced,
    status = "AnalysisRunStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.phase",
        description = "AnalysisRun status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since resource was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunSpec {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<Metric>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<Argument>>,
    /// Set to stop the run early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement_retention: Option<Vec<MeasurementRetention>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_strategy: Option<TtlStrategy>,
}

impl AnalysisRunSpec {
    /// Whether termination was requested.
    pub fn is_terminating(&self) -> bool {
        self.terminate.unwrap_or(false)
    }
}

/// When a finished AnalysisRun is deleted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TtlStrategy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_after_completion: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_after_failure: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_after_success: Option<i32>,
}

/// A metric: how to measure, how often, and how to judge the result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Go duration between measurements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Go duration to wait before the first measurement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<String>,
    /// Number of measurements; may be a `{{args.x}}` string until resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<IntOrString>,
    /// expr-lang expression over `result`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_condition: Option<String>,
    /// expr-lang expression over `result`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_condition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_limit: Option<IntOrString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inconclusive_limit: Option<IntOrString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_error_limit: Option<IntOrString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_success_limit: Option<IntOrString>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<MetricProvider>,
}

impl Metric {
    /// The measurement interval; `None` when not set.
    pub fn interval(&self) -> Option<Result<Duration, DurationError>> {
        self.interval.as_deref().map(parse_go_duration)
    }

    /// The delay before the first measurement; `None` when not set.
    pub fn initial_delay(&self) -> Option<Result<Duration, DurationError>> {
        self.initial_delay.as_deref().map(parse_go_duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_template_spec_is_transparent() {
        let value = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "ClusterAnalysisTemplate",
            "metadata": {"name": "t"},
            "spec": {"metrics": [{"name": "m", "provider": {"job": {"spec": {"template": {"spec": {"containers": []}}}}}}]}
        });
        let cat: ClusterAnalysisTemplate = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(cat.spec.metrics.as_ref().unwrap().len(), 1);
        assert_eq!(serde_json::to_value(&cat).unwrap(), value);
    }

    #[test]
    fn metric_durations_and_int_or_string_fields() {
        let m: Metric = serde_json::from_value(json!({
            "name": "m",
            "interval": "1m30s",
            "count": "{{args.count}}",
            "failureLimit": 3,
            "provider": {"web": {"url": "http://x"}}
        }))
        .unwrap();
        assert_eq!(m.interval().unwrap().unwrap(), Duration::from_secs(90));
        assert!(m.initial_delay().is_none());
        assert_eq!(m.count, Some(IntOrString::String("{{args.count}}".into())));
        assert_eq!(m.failure_limit, Some(IntOrString::Int(3)));
        assert_eq!(m.provider.as_ref().unwrap().kind(), Some(ProviderKind::Web));
    }

    #[test]
    fn analysis_run_status_is_optional() {
        let ar: AnalysisRun = serde_json::from_value(json!({
            "metadata": {"name": "r"},
            "spec": {"metrics": [], "terminate": true}
        }))
        .unwrap();
        assert!(ar.status.is_none());
        assert!(ar.spec.is_terminating());
    }
}
