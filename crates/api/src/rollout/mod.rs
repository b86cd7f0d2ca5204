//! The `Rollout` kind: a Deployment-like workload updated with a canary or blue-green strategy.

mod bluegreen;
mod canary;
mod status;
mod traffic;

pub use bluegreen::*;
pub use canary::*;
pub use status::*;
pub use traffic::*;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    AnalysisRunArgument, AnalysisRunMetadata, AnalysisTemplateRef, DryRun, MeasurementRetention,
};
use crate::string_enum::string_enum;

/// Default of `spec.replicas`.
pub const DEFAULT_REPLICAS: i32 = 1;
/// Default of `spec.revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// Default of `spec.progressDeadlineSeconds`.
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;
/// Default of both AnalysisRun history limits in `spec.analysis`.
pub const DEFAULT_ANALYSIS_RUN_HISTORY_LIMIT: i32 = 5;

/// Desired state of a Rollout.
// Each `printcolumn(...)` repeats the same keys, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "argoproj.io",
    version = "v1alpha1",
    kind = "Rollout",
    plural = "rollouts",
    shortname = "ro",
    namespaced,
    status = "RolloutStatus",
    derive = "PartialEq",
    derive = "Default",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.HPAReplicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Number of desired pods"
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.replicas",
        description = "Total number of non-terminated pods targeted by this rollout"
    ),
    printcolumn(
        name = "Up-to-date",
        type_ = "integer",
        json_path = ".status.updatedReplicas",
        description = "Total number of non-terminated pods targeted by this rollout that have the desired template spec"
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        description = "Total number of available pods (ready for at least minReadySeconds) targeted by this rollout"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time since resource was created"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Immutable once set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    /// Takes the pod template from a Deployment, ReplicaSet or PodTemplate instead of `template`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_ref: Option<WorkloadRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_window: Option<RollbackWindow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RolloutStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_deadline_abort: Option<bool>,
    /// Pods created before this time are restarted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisRunStrategy>,
}

/// The workload a Rollout takes its pod template from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<WorkloadRefScaleDown>,
}

string_enum! {
    /// How the referenced Deployment is scaled down once the Rollout takes over.
    pub enum WorkloadRefScaleDown {
        Never => "never",
        OnSuccess => "onsuccess",
        Progressively => "progressively",
    }
}

/// Rollbacks to one of the last `revisions` revisions skip steps and analysis.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackWindow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revisions: Option<i32>,
}

/// How many finished AnalysisRuns and Experiments are kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisRunStrategy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successful_run_history_limit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsuccessful_run_history_limit: Option<i32>,
}

/// The update strategy; exactly one of the two is expected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blue_green: Option<BlueGreenStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStrategy>,
}

/// Analysis run by a Rollout: in a step, or before/after a blue-green promotion.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysis {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<AnalysisTemplateRef>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<AnalysisRunArgument>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement_retention: Option<Vec<MeasurementRetention>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis_run_metadata: Option<AnalysisRunMetadata>,
}

/// Pod anti-affinity injected into the new ReplicaSet against the stable pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AntiAffinity {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution:
        Option<PreferredDuringSchedulingIgnoredDuringExecution>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution:
        Option<RequiredDuringSchedulingIgnoredDuringExecution>,
}

/// Soft anti-affinity with the given weight (1-100).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferredDuringSchedulingIgnoredDuringExecution {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// Hard anti-affinity; carries no settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequiredDuringSchedulingIgnoredDuringExecution {}

impl Rollout {
    /// The canary strategy, if the Rollout uses one.
    pub fn canary(&self) -> Option<&CanaryStrategy> {
        self.spec.strategy.as_ref()?.canary.as_ref()
    }

    /// The blue-green strategy, if the Rollout uses one.
    pub fn blue_green(&self) -> Option<&BlueGreenStrategy> {
        self.spec.strategy.as_ref()?.blue_green.as_ref()
    }

    /// The canary steps; empty for blue-green or a canary without steps.
    pub fn steps(&self) -> &[CanaryStep] {
        self.canary()
            .and_then(|c| c.steps.as_deref())
            .unwrap_or_default()
    }

    /// `spec.replicas`, defaulting to 1.
    pub fn desired_replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(DEFAULT_REPLICAS)
    }
}

impl RolloutSpec {
    /// `revisionHistoryLimit`, defaulting to 10.
    pub fn revision_history_limit(&self) -> i32 {
        self.revision_history_limit
            .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }

    /// `progressDeadlineSeconds`, defaulting to 600.
    pub fn progress_deadline_seconds(&self) -> i32 {
        self.progress_deadline_seconds
            .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS)
    }

    /// Whether the user paused the Rollout (`spec.paused`).
    pub fn is_paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }
}

/// Sluice's opt-in (outside `argoproj.io`, so Argo ignores it): the Rollout drives the
/// partitioned rolling update of the StatefulSet of its namespace this names, instead of
/// ReplicaSets of its own (docs/statefulsets.md).
pub const STATEFULSET_ANNOTATION: &str = "rollouts.sluice.dev/statefulset";

/// The StatefulSet a Rollout drives ([`STATEFULSET_ANNOTATION`]), if it opted in. An empty
/// value names none but still opts in: validation reports it.
pub fn stateful_set_name(rollout: &crate::Rollout) -> Option<&str> {
    annotation(rollout, STATEFULSET_ANNOTATION)
}

/// Sluice's opt-in for a DaemonSet: the Rollout drives, node by node, the `OnDelete` updates of
/// the DaemonSet of its namespace this names (docs/daemonsets.md).
pub const DAEMONSET_ANNOTATION: &str = "rollouts.sluice.dev/daemonset";

/// The DaemonSet a Rollout drives ([`DAEMONSET_ANNOTATION`]), if it opted in. An empty value
/// names none but still opts in: validation reports it.
pub fn daemon_set_name(rollout: &crate::Rollout) -> Option<&str> {
    annotation(rollout, DAEMONSET_ANNOTATION)
}

/// Sluice's opt-in for config rollouts: with `"true"`, a change of a ConfigMap or Secret the
/// pod template references is a new revision, its pods reading a copy of the new content
/// (docs/config-rollouts.md).
pub const CONFIG_ROLLOUT_ANNOTATION: &str = "rollouts.sluice.dev/config-rollout";

/// The value of [`CONFIG_ROLLOUT_ANNOTATION`], if the Rollout has it.
pub fn config_rollout(rollout: &crate::Rollout) -> Option<&str> {
    annotation(rollout, CONFIG_ROLLOUT_ANNOTATION)
}

fn annotation<'a>(rollout: &'a crate::Rollout, key: &str) -> Option<&'a str> {
    rollout
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(value: serde_json::Value) -> Rollout {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn accessors_and_defaults() {
        let ro = rollout(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "demo"},
            "spec": {
                "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}}
            }
        }));
        assert_eq!(ro.desired_replicas(), 1);
        assert_eq!(ro.steps().len(), 2);
        assert!(ro.canary().is_some());
        assert!(ro.blue_green().is_none());
        assert_eq!(ro.spec.revision_history_limit(), 10);
        assert_eq!(ro.spec.progress_deadline_seconds(), 600);
        assert!(!ro.spec.is_paused());
    }

    #[test]
    fn blue_green_has_no_steps() {
        let ro = rollout(json!({
            "metadata": {"name": "bg"},
            "spec": {"replicas": 3, "strategy": {"blueGreen": {"activeService": "active"}}}
        }));
        assert_eq!(ro.desired_replicas(), 3);
        assert!(ro.steps().is_empty());
        assert_eq!(
            ro.blue_green().unwrap().active_service.as_deref(),
            Some("active")
        );
    }

    #[test]
    fn serializing_never_invents_fields() {
        let input = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {},
            "spec": {
                "strategy": {"canary": {"steps": [], "antiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}
            }
        });
        let output = serde_json::to_value(rollout(input.clone())).unwrap();
        assert_eq!(output, input);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let ro = rollout(json!({
            "metadata": {"name": "x"},
            "spec": {"futureField": true, "strategy": {"canary": {"futureStep": 1}}},
            "status": {"duration": {"rolloutStartedAt": "2024-01-01T00:00:00Z"}}
        }));
        assert!(ro.canary().is_some());
        assert!(ro.status.is_some());
    }

    #[test]
    fn workload_ref_scale_down_values() {
        let wr: WorkloadRef = serde_json::from_value(json!({"scaleDown": "onsuccess"})).unwrap();
        assert_eq!(wr.scale_down, Some(WorkloadRefScaleDown::OnSuccess));
    }
}
