//! The `argoproj.io/v1alpha1` API: Rollout, AnalysisTemplate, ClusterAnalysisTemplate,
//! AnalysisRun and Experiment, field for field as Argo Rollouts defines them, plus the
//! CustomResourceDefinitions generated from these types.

pub mod analysis;
pub mod common;
pub mod corpus;
pub mod crd;
pub mod duration;
pub mod experiment;
pub mod label_selector;
pub mod pod_defaults;
pub mod pod_template_hash;
pub mod rollout;
pub mod time;
pub mod validation;
pub mod yaml;

mod schema;
mod string_enum;

pub use analysis::{
    AnalysisRun, AnalysisRunSpec, AnalysisRunStatus, AnalysisTemplate, AnalysisTemplateSpec,
    ClusterAnalysisTemplate, ClusterAnalysisTemplateSpec,
};
pub use duration::{format_go_duration, parse_go_duration, pause_duration};
pub use experiment::{Experiment, ExperimentSpec, ExperimentStatus};
pub use rollout::{Rollout, RolloutSpec, RolloutStatus};

/// API group of all kinds.
pub const GROUP: &str = "argoproj.io";
/// The only API version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of all kinds.
pub const API_VERSION: &str = "argoproj.io/v1alpha1";
