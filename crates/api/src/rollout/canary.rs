//! `spec.strategy.canary` and its steps.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AntiAffinity, RolloutAnalysis, RolloutTrafficRouting};
use crate::common::{
    AnalysisRunArgument, AnalysisRunMetadata, DryRun, PodTemplateMetadata, TemplateService,
};
use crate::duration::{DurationError, pause_duration};
use crate::schema::FreeFormObject;
use crate::string_enum::string_enum;

/// Canary: the new ReplicaSet is scaled up (or given traffic) step by step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStrategy {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<CanaryStep>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic_routing: Option<RolloutTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Background analysis running while the canary progresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<RolloutAnalysisBackground>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anti_affinity: Option<AntiAffinity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_metadata: Option<PodTemplateMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_metadata: Option<PodTemplateMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_revision_limit: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abort_scale_down_delay_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_stable_scale: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ping_pong: Option<PingPong>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_pods_per_replica_set: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_progress_threshold: Option<ReplicaProgressThreshold>,
}

/// Background analysis: a step-style analysis plus the step it starts at.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutAnalysisBackground {
    #[serde(flatten)]
    pub analysis: RolloutAnalysis,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starting_step: Option<i32>,
}

/// The two Services swapped in ping-pong mode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PingPong {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ping_service: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pong_service: Option<String>,
}

/// How much of the canary must be available before a step completes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaProgressThreshold {
    #[schemars(required)]
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ReplicaProgressThresholdType>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i32>,
}

string_enum! {
    /// Unit of a [`ReplicaProgressThreshold`].
    pub enum ReplicaProgressThresholdType {
        Percent => "Percent",
        Pods => "Pods",
    }
}

/// One canary step. Exactly one field is expected to be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStep {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_weight: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<RolloutPause>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<RolloutExperimentStep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis: Option<RolloutAnalysis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_canary_scale: Option<SetCanaryScale>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_header_route: Option<SetHeaderRoute>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_mirror_route: Option<SetMirrorRoute>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginStep>,
}

/// A borrowed view of the action a [`CanaryStep`] performs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CanaryStepAction<'a> {
    SetWeight(i32),
    Pause(&'a RolloutPause),
    Experiment(&'a RolloutExperimentStep),
    Analysis(&'a RolloutAnalysis),
    SetCanaryScale(&'a SetCanaryScale),
    SetHeaderRoute(&'a SetHeaderRoute),
    SetMirrorRoute(&'a SetMirrorRoute),
    Plugin(&'a PluginStep),
}

impl CanaryStep {
    /// The step's action: the first field set, in Argo's declaration order. `None` for an
    /// empty step.
    pub fn action(&self) -> Option<CanaryStepAction<'_>> {
        use CanaryStepAction as A;
        self.set_weight
            .map(A::SetWeight)
            .or_else(|| self.pause.as_ref().map(A::Pause))
            .or_else(|| self.experiment.as_ref().map(A::Experiment))
            .or_else(|| self.analysis.as_ref().map(A::Analysis))
            .or_else(|| self.set_canary_scale.as_ref().map(A::SetCanaryScale))
            .or_else(|| self.set_header_route.as_ref().map(A::SetHeaderRoute))
            .or_else(|| self.set_mirror_route.as_ref().map(A::SetMirrorRoute))
            .or_else(|| self.plugin.as_ref().map(A::Plugin))
    }

    /// How many of the step's action fields are set (a valid step has exactly one).
    pub fn action_count(&self) -> usize {
        [
            self.set_weight.is_some(),
            self.pause.is_some(),
            self.experiment.is_some(),
            self.analysis.is_some(),
            self.set_canary_scale.is_some(),
            self.set_header_route.is_some(),
            self.set_mirror_route.is_some(),
            self.plugin.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count()
    }
}

/// A pause step; without a duration it lasts until promoted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPause {
    /// Seconds as an integer or numeric string, or a Go duration string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<IntOrString>,
}

impl RolloutPause {
    /// The pause length in whole seconds; `None` means an indefinite pause.
    pub fn duration(&self) -> Option<Result<Duration, DurationError>> {
        self.duration.as_ref().map(pause_duration)
    }
}

/// Scales the canary independently of traffic weight (traffic routing only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetCanaryScale {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_traffic_weight: Option<bool>,
}

/// Routes requests matching headers to the canary through a managed route.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetHeaderRoute {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<Vec<HeaderRoutingMatch>>,
}

/// A header condition of a [`SetHeaderRoute`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeaderRoutingMatch {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_value: Option<StringMatch>,
}

/// A string comparison; exactly one of the fields is expected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StringMatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// Mirrors a percentage of matching requests to the canary through a managed route.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetMirrorRoute {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<Vec<RouteMatch>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
}

/// A request condition of a [`SetMirrorRoute`]; all given parts must match.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteMatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<StringMatch>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, StringMatch>>,
}

/// A step carried out by a step plugin.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginStep {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Plugin-defined configuration, passed through as JSON.
    #[schemars(with = "Option<FreeFormObject>")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
}

/// An Experiment run as a canary step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutExperimentStep {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<RolloutExperimentTemplate>>,
    /// Go duration string; the Experiment runs until its analyses finish when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analyses: Option<Vec<RolloutExperimentStepAnalysisTemplateRef>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<DryRun>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub analysis_run_metadata: Option<AnalysisRunMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_delay_seconds: Option<i32>,
}

/// A ReplicaSet of an experiment step, built from the canary or stable pod template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutExperimentTemplate {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec_ref: Option<ReplicaSetSpecRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<PodTemplateMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Traffic weight sent to this template (traffic routing only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<TemplateService>,
}

string_enum! {
    /// Which pod template an experiment-step template copies.
    pub enum ReplicaSetSpecRef {
        Canary => "canary",
        Stable => "stable",
    }
}

/// An analysis of an experiment step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutExperimentStepAnalysisTemplateRef {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_scope: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<AnalysisRunArgument>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_for_completion: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(value: serde_json::Value) -> CanaryStep {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn step_actions() {
        assert_eq!(
            step(json!({"setWeight": 20})).action(),
            Some(CanaryStepAction::SetWeight(20))
        );
        let pause = step(json!({"pause": {}}));
        assert!(
            matches!(pause.action(), Some(CanaryStepAction::Pause(p)) if p.duration().is_none())
        );
        assert_eq!(step(json!({})).action(), None);
        assert_eq!(step(json!({})).action_count(), 0);
        assert_eq!(step(json!({"setWeight": 1, "pause": {}})).action_count(), 2);
        let plugin = step(json!({"plugin": {"name": "org/p", "config": {"a": [1, 2]}}}));
        match plugin.action() {
            Some(CanaryStepAction::Plugin(p)) => {
                assert_eq!(p.config, Some(json!({"a": [1, 2]})))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn pause_duration_forms() {
        let pause =
            |v| -> RolloutPause { serde_json::from_value(json!({ "duration": v })).unwrap() };
        assert_eq!(pause(json!(10)).duration().unwrap().unwrap().as_secs(), 10);
        assert_eq!(
            pause(json!("10")).duration().unwrap().unwrap().as_secs(),
            10
        );
        assert_eq!(
            pause(json!("1h")).duration().unwrap().unwrap().as_secs(),
            3600
        );
        assert!(pause(json!("later")).duration().unwrap().is_err());
        // The int/string distinction survives a round trip.
        assert_eq!(
            serde_json::to_value(pause(json!("10"))).unwrap(),
            json!({"duration": "10"})
        );
        assert_eq!(
            serde_json::to_value(pause(json!(10))).unwrap(),
            json!({"duration": 10})
        );
    }

    #[test]
    fn background_analysis_flattens() {
        let value = json!({"templates": [{"templateName": "t"}], "startingStep": 2});
        let bg: RolloutAnalysisBackground = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(bg.starting_step, Some(2));
        assert_eq!(bg.analysis.templates.as_ref().unwrap().len(), 1);
        assert_eq!(serde_json::to_value(&bg).unwrap(), value);
    }

    #[test]
    fn spec_ref_values() {
        let t: RolloutExperimentTemplate =
            serde_json::from_value(json!({"name": "a", "specRef": "canary"})).unwrap();
        assert_eq!(t.spec_ref, Some(ReplicaSetSpecRef::Canary));
    }
}
