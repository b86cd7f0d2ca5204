//! Types shared by several kinds: metadata stamps, analysis arguments, dry-run and retention
//! settings, template references and condition statuses.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum::string_enum;

/// Labels and annotations added to generated pods, ReplicaSets or AnalysisRuns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateMetadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// Extra labels and annotations for the AnalysisRuns a Rollout or Experiment creates.
pub type AnalysisRunMetadata = PodTemplateMetadata;

/// An argument of an AnalysisTemplate, AnalysisRun or Experiment analysis.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Argument {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ValueFrom>,
}

/// Where an analysis argument's value comes from at run time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueFrom {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeyRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<FieldRef>,
}

/// A key of a Secret in the AnalysisRun's namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A path into the owning object, e.g. `metadata.labels['app']` or
/// `spec.template.spec.containers[0].image`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldRef {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
}

/// An argument passed by a Rollout (or a Rollout's experiment step) to an analysis.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunArgument {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ArgumentValueFrom>,
}

/// Rollout-side argument sources.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArgumentValueFrom {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_template_hash_value: Option<PodTemplateHashValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<FieldRef>,
}

string_enum! {
    /// Which ReplicaSet's pod-template hash an argument receives.
    pub enum PodTemplateHashValue {
        Stable => "Stable",
        Latest => "Latest",
    }
}

/// A metric whose results do not affect the run's phase (`*` matches every metric).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRun {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_name: Option<String>,
}

/// How many measurements of a metric are kept in the AnalysisRun status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeasurementRetention {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric_name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i32>,
}

/// A reference to an AnalysisTemplate, or a ClusterAnalysisTemplate when `clusterScope` is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisTemplateRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_scope: Option<bool>,
}

impl AnalysisTemplateRef {
    /// Whether the reference names a ClusterAnalysisTemplate.
    pub fn is_cluster_scoped(&self) -> bool {
        self.cluster_scope.unwrap_or(false)
    }
}

/// A Service created for an experiment template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateService {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

string_enum! {
    /// The status of a condition.
    pub enum ConditionStatus {
        True => "True",
        False => "False",
        Unknown => "Unknown",
    }
}

string_enum! {
    /// Phase of an AnalysisRun, a metric, a measurement or an Experiment.
    pub enum AnalysisPhase {
        Pending => "Pending",
        Running => "Running",
        Successful => "Successful",
        Failed => "Failed",
        Error => "Error",
        Inconclusive => "Inconclusive",
    }
}

impl AnalysisPhase {
    /// Whether the phase is final (Successful, Failed, Error or Inconclusive).
    pub fn is_completed(&self) -> bool {
        matches!(
            self,
            AnalysisPhase::Successful
                | AnalysisPhase::Failed
                | AnalysisPhase::Error
                | AnalysisPhase::Inconclusive
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_phases() {
        let completed: Vec<_> = AnalysisPhase::KNOWN
            .iter()
            .filter(|p| p.is_completed())
            .map(AnalysisPhase::as_str)
            .collect();
        assert_eq!(completed, ["Successful", "Failed", "Error", "Inconclusive"]);
        assert!(!AnalysisPhase::from("Terminated").is_completed());
    }

    #[test]
    fn argument_keeps_absent_and_empty_apart() {
        let arg: Argument = serde_json::from_str(r#"{"name":"a","value":""}"#).unwrap();
        assert_eq!(arg.value.as_deref(), Some(""));
        assert_eq!(
            serde_json::to_string(&arg).unwrap(),
            r#"{"name":"a","value":""}"#
        );
        let arg: Argument = serde_json::from_str(r#"{"name":"a"}"#).unwrap();
        assert_eq!(serde_json::to_string(&arg).unwrap(), r#"{"name":"a"}"#);
    }

    #[test]
    fn cluster_scope_defaults_to_namespaced() {
        assert!(!AnalysisTemplateRef::default().is_cluster_scoped());
        let r: AnalysisTemplateRef =
            serde_json::from_str(r#"{"templateName":"t","clusterScope":true}"#).unwrap();
        assert!(r.is_cluster_scoped());
    }
}
