//! `AnalysisRun.status`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::AnalysisPhase;

/// Observed state of an AnalysisRun.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunStatus {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<AnalysisPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_results: Option<Vec<MetricResult>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Counts of metrics by phase, excluding dry-run metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_summary: Option<RunSummary>,
    /// Counts of dry-run metrics by phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run_summary: Option<RunSummary>,
}

impl AnalysisRunStatus {
    /// The result of the named metric, if any.
    pub fn metric_result(&self, name: &str) -> Option<&MetricResult> {
        self.metric_results
            .iter()
            .flatten()
            .find(|r| r.name.as_deref() == Some(name))
    }
}

/// Counts of metrics by phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successful: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<i32>,
}

/// Measurements and counters of one metric.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricResult {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<AnalysisPhase>,
    /// The retained measurements, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurements: Option<Vec<Measurement>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Measurements taken (Successful, Failed or Inconclusive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successful: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_error: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Provider-specific data (e.g. the resolved query).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_success: Option<i32>,
}

/// One measurement of a metric.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<AnalysisPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// The measured value as text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Provider-specific data (e.g. the Job name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// When a provider asked to be polled again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<Time>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_round_trip_and_lookup() {
        let value = json!({
            "phase": "Running",
            "startedAt": "2024-08-01T15:13:36Z",
            "metricResults": [{
                "name": "success-rate",
                "phase": "Running",
                "count": 1,
                "successful": 1,
                "measurements": [{
                    "phase": "Successful",
                    "value": "[0.99]",
                    "startedAt": "2024-08-01T15:13:36Z",
                    "finishedAt": "2024-08-01T15:13:37Z",
                    "metadata": {"job-name": "x"}
                }]
            }],
            "runSummary": {"count": 1, "successful": 0}
        });
        let status: AnalysisRunStatus = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(status.phase, Some(AnalysisPhase::Running));
        assert_eq!(status.metric_result("success-rate").unwrap().count, Some(1));
        assert!(status.metric_result("other").is_none());
        assert_eq!(serde_json::to_value(&status).unwrap(), value);
    }
}
