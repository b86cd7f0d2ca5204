//! The `Experiment` kind: ReplicaSets run side by side for a while, with analyses.

use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    AnalysisPhase, AnalysisRunMetadata, Argument, ConditionStatus, DryRun, MeasurementRetention,
    TemplateService,
};
use crate::duration::{DurationError, parse_go_duration};
use crate::string_enum::string_enum;

/// Default of `progressDeadlineSeconds`.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;
/// Default of `scaleDownDelaySeconds`.
pub const DEFAULT_SCALE_DOWN_DELAY_SECONDS: i32 = 30;

/// Desired state of an Experiment.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "Experiment",
    plural = "experiments",
    shortname = "exp",
    namespaced,
    status = "ExperimentStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.phase",
        description = "Experiment status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since resource was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentSpec {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<TemplateSpec>>,
    /// Go duration; without it the Experiment runs until its analyses complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
    /// Set to stop the Experiment early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminate: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analyses: Option<Vec<ExperimentAnalysisTemplateRef>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement_retention: Option<Vec<MeasurementRetention>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis_run_metadata: Option<AnalysisRunMetadata>,
}

impl ExperimentSpec {
    /// The run time; `None` when the Experiment has no fixed duration.
    pub fn duration(&self) -> Option<Result<Duration, DurationError>> {
        self.duration.as_deref().map(parse_go_duration)
    }

    /// Whether termination was requested.
    pub fn is_terminating(&self) -> bool {
        self.terminate.unwrap_or(false)
    }
}

/// A ReplicaSet of an Experiment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSpec {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<TemplateService>,
}

/// An analysis of an Experiment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentAnalysisTemplateRef {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_scope: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<Argument>>,
    /// The Experiment waits for this analysis before it completes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_for_completion: Option<bool>,
}

/// Observed state of an Experiment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<AnalysisPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_statuses: Option<Vec<TemplateStatus>>,
    /// When all templates first became available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ExperimentCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis_runs: Option<Vec<ExperimentAnalysisRunStatus>>,
}

impl ExperimentStatus {
    /// The status of the named template, if any.
    pub fn template_status(&self, name: &str) -> Option<&TemplateStatus> {
        self.template_statuses
            .iter()
            .flatten()
            .find(|s| s.name.as_deref() == Some(name))
    }
}

/// Replica counts and state of one Experiment template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateStatus {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<TemplateStatusCode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_template_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

string_enum! {
    /// State of an Experiment template.
    pub enum TemplateStatusCode {
        Progressing => "Progressing",
        Running => "Running",
        Successful => "Successful",
        Failed => "Failed",
        Error => "Error",
    }
}

/// A condition of an Experiment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentCondition {
    #[schemars(required)]
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ExperimentConditionType>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<ConditionStatus>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

string_enum! {
    /// Condition types of an Experiment.
    pub enum ExperimentConditionType {
        InvalidSpec => "InvalidSpec",
        Completed => "Completed",
        Progressing => "Progressing",
        Running => "Running",
        ReplicaFailure => "ReplicaFailure",
    }
}

/// An AnalysisRun started by an Experiment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentAnalysisRunStatus {
    /// The analysis name from the spec.
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The AnalysisRun object's name.
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis_run: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<AnalysisPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_helpers() {
        let exp: Experiment = serde_json::from_value(json!({
            "metadata": {"name": "e"},
            "spec": {"duration": "5m", "templates": []}
        }))
        .unwrap();
        assert_eq!(
            exp.spec.duration().unwrap().unwrap(),
            Duration::from_secs(300)
        );
        assert!(!exp.spec.is_terminating());
    }

    #[test]
    fn status_round_trip() {
        let value = json!({
            "phase": "Running",
            "availableAt": "2024-08-01T15:13:36Z",
            "templateStatuses": [{
                "name": "baseline", "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
                "availableReplicas": 1, "status": "Running", "podTemplateHash": "abc",
                "serviceName": "svc"
            }],
            "analysisRuns": [{"name": "a", "analysisRun": "e-a", "phase": "Pending"}]
        });
        let status: ExperimentStatus = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            status.template_status("baseline").unwrap().status,
            Some(TemplateStatusCode::Running)
        );
        assert_eq!(serde_json::to_value(&status).unwrap(), value);
    }
}
