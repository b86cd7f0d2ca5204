//! `spec.strategy.blueGreen`.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AntiAffinity, RolloutAnalysis};
use crate::common::PodTemplateMetadata;

/// Blue-green: the new ReplicaSet comes up behind the preview Service and is promoted by
/// switching the active Service's selector to it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlueGreenStrategy {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview_service: Option<String>,
    /// Replicas of the preview ReplicaSet before promotion; full size when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview_replica_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_promotion_enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_promotion_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_revision_limit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_promotion_analysis: Option<RolloutAnalysis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_promotion_analysis: Option<RolloutAnalysis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anti_affinity: Option<AntiAffinity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview_metadata: Option<PodTemplateMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_metadata: Option<PodTemplateMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort_scale_down_delay_seconds: Option<i32>,
}

impl BlueGreenStrategy {
    /// `autoPromotionEnabled`, which defaults to true.
    pub fn auto_promotion_enabled(&self) -> bool {
        self.auto_promotion_enabled.unwrap_or(true)
    }
}
