//! `Rollout.status`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{AnalysisPhase, ConditionStatus};
use crate::schema::FreeFormObject;
use crate::string_enum::string_enum;

/// Observed state of a Rollout.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Set by the user (or the controller) to abort the update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_conditions: Option<Vec<PauseCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_pause: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_pod_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_step_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_step_index: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// `metadata.generation` as a decimal string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<RolloutCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<CanaryStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blue_green: Option<BlueGreenStatus>,
    /// Pod count reported to the scale subresource.
    #[serde(rename = "HPAReplicas", skip_serializing_if = "Option::is_none")]
    pub hpa_replicas: Option<i32>,
    /// Label selector (string form) reported to the scale subresource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Pod-template hash of the stable ReplicaSet.
    #[serde(rename = "stableRS", skip_serializing_if = "Option::is_none")]
    pub stable_rs: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promote_full: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<RolloutPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_observed_generation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alb: Option<AlbStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub albs: Option<Vec<AlbStatus>>,
    /// How long the latest update took (Argo's master, its pull request 4774).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<RolloutDurationStatus>,
}

/// The timing of the latest update: while it runs, and once it ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutDurationStatus {
    /// When the update began (its pod template first seen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_started_at: Option<Time>,
    /// When it ended: promoted, aborted or superseded by another update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// When the update began waiting for a person (a user pause, an indefinite pause step, a
    /// blue-green promotion without auto-promotion), while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manual_pause_started_at: Option<Time>,
    /// Seconds spent waiting for a person, the waits that ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_manual_pause_duration_seconds: Option<i64>,
    /// How it ended: Promoted, FastPromoted, Aborted, Superseded, RolledBack, FastRolledBack.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_status: Option<String>,
}

impl RolloutStatus {
    /// `observedGeneration` as a number; `None` when absent or not a number.
    pub fn observed_generation(&self) -> Option<i64> {
        self.observed_generation.as_deref()?.parse().ok()
    }

    /// Records `generation` in the string form Argo uses.
    pub fn set_observed_generation(&mut self, generation: i64) {
        self.observed_generation = Some(generation.to_string());
    }

    /// Whether the given pause reason is among the pause conditions.
    pub fn has_pause_condition(&self, reason: &PauseReason) -> bool {
        self.pause_conditions
            .iter()
            .flatten()
            .any(|c| c.reason.as_ref() == Some(reason))
    }

    /// The condition of the given type, if present.
    pub fn condition(&self, type_: &RolloutConditionType) -> Option<&RolloutCondition> {
        self.conditions
            .iter()
            .flatten()
            .find(|c| c.type_.as_ref() == Some(type_))
    }

    /// Whether the update is aborted.
    pub fn is_aborted(&self) -> bool {
        self.abort.unwrap_or(false)
    }
}

/// Why and since when the controller paused the Rollout.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PauseCondition {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<PauseReason>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

string_enum! {
    /// Reasons the controller pauses a Rollout.
    pub enum PauseReason {
        CanaryPauseStep => "CanaryPauseStep",
        BlueGreenPause => "BlueGreenPause",
        InconclusiveAnalysisRun => "InconclusiveAnalysisRun",
        InconclusiveExperiment => "InconclusiveExperiment",
        /// Sluice only: a failed AnalysisRun paused the update instead of aborting it, as the
        /// Rollout asked with `rollouts.sluice.dev/on-analysis-failure: pause`.
        FailedAnalysisRun => "FailedAnalysisRun",
    }
}

string_enum! {
    /// Overall health of a Rollout.
    pub enum RolloutPhase {
        Healthy => "Healthy",
        Degraded => "Degraded",
        Paused => "Paused",
        Progressing => "Progressing",
    }
}

/// A condition of a Rollout.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutCondition {
    #[schemars(required)]
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<RolloutConditionType>,
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
    /// Condition types of a Rollout.
    pub enum RolloutConditionType {
        InvalidSpec => "InvalidSpec",
        Available => "Available",
        Progressing => "Progressing",
        ReplicaFailure => "ReplicaFailure",
        Paused => "Paused",
        Completed => "Completed",
        Healthy => "Healthy",
    }
}

/// Canary progress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_step_analysis_run_status: Option<RolloutAnalysisRunStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_background_analysis_run_status: Option<RolloutAnalysisRunStatus>,
    /// Name of the current step's Experiment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_experiment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights: Option<TrafficWeights>,
    /// Which ping-pong Service currently fronts the stable pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_ping_pong: Option<PingPongType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_plugin_statuses: Option<Vec<StepPluginStatus>>,
}

string_enum! {
    /// A ping-pong Service.
    pub enum PingPongType {
        Ping => "ping",
        Pong => "pong",
    }
}

/// Name and phase of an AnalysisRun the Rollout waits on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysisRunStatus {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<AnalysisPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Traffic weights as last set on the traffic router.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrafficWeights {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary: Option<WeightDestination>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable: Option<WeightDestination>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional: Option<Vec<WeightDestination>>,
    /// Whether the weights were verified against the load balancer (ALB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

/// The weight given to one destination.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WeightDestination {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_template_hash: Option<String>,
}

/// State of a plugin step's current operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepPluginStatus {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<i32>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<StepPluginOperation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<StepPluginPhase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Go duration string until the next attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executions: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Plugin-defined state, passed through as JSON.
    #[schemars(with = "Option<FreeFormObject>")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

string_enum! {
    /// Operations the controller asks of a step plugin.
    pub enum StepPluginOperation {
        Run => "Run",
        Terminate => "Terminate",
        Abort => "Abort",
    }
}

string_enum! {
    /// Phase of a step plugin operation.
    pub enum StepPluginPhase {
        Running => "Running",
        Successful => "Successful",
        Failed => "Failed",
        Error => "Error",
    }
}

/// Blue-green progress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStatus {
    /// Pod-template hash the preview Service selects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview_selector: Option<String>,
    /// Pod-template hash the active Service selects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_selector: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_up_preview_check_point: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_promotion_analysis_run_status: Option<RolloutAnalysisRunStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_promotion_analysis_run_status: Option<RolloutAnalysisRunStatus>,
}

/// AWS resources behind an ALB-routed Ingress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlbStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<AwsResourceRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_target_group: Option<AwsResourceRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_target_group: Option<AwsResourceRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
}

/// An AWS resource by name and ARN.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsResourceRef {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argo_spellings() {
        let value = json!({
            "HPAReplicas": 3,
            "stableRS": "abc123",
            "observedGeneration": "7",
            "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2024-08-01T15:13:36Z"}],
            "conditions": [{
                "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                "message": "ok", "lastUpdateTime": "2024-08-01T15:13:36Z",
                "lastTransitionTime": "2024-08-01T15:13:36Z"
            }],
            "canary": {"stablePingPong": "ping", "weights": {"canary": {"weight": 0}, "stable": {"weight": 100}}},
            "phase": "Paused"
        });
        let status: RolloutStatus = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(status.hpa_replicas, Some(3));
        assert_eq!(status.stable_rs.as_deref(), Some("abc123"));
        assert_eq!(status.observed_generation(), Some(7));
        assert!(status.has_pause_condition(&PauseReason::CanaryPauseStep));
        assert!(!status.has_pause_condition(&PauseReason::BlueGreenPause));
        assert_eq!(
            status
                .condition(&RolloutConditionType::Progressing)
                .and_then(|c| c.status.clone()),
            Some(ConditionStatus::True)
        );
        assert_eq!(status.phase, Some(RolloutPhase::Paused));
        assert_eq!(serde_json::to_value(&status).unwrap(), value);
    }

    #[test]
    fn observed_generation_is_a_string() {
        let mut status = RolloutStatus::default();
        status.set_observed_generation(12);
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"observedGeneration": "12"})
        );
        status.observed_generation = Some("x".into());
        assert_eq!(status.observed_generation(), None);
    }

    #[test]
    fn unknown_pause_reason_round_trips() {
        let c: PauseCondition = serde_json::from_value(
            json!({"reason": "SomethingNew", "startTime": "2024-08-01T15:13:36Z"}),
        )
        .unwrap();
        assert_eq!(c.reason, Some(PauseReason::Other("SomethingNew".into())));
        assert_eq!(serde_json::to_value(&c).unwrap()["reason"], "SomethingNew");
    }
}
