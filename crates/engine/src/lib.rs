//! The decision engine: pure functions from an observed Rollout world and the current time to a
//! plan of writes. No I/O, no clock, no async runtime: everything it needs is passed in.

pub mod analysis;
pub mod conditions;
pub mod config_copies;
pub mod config_rollout;
mod controller_revision;
pub mod daemonset;
mod driven;
mod duration;
pub mod ephemeral;
pub mod experiment;
pub mod labels;
pub mod observed;
mod pause;
pub mod phase;
pub mod plan;
pub mod pod_hash;
mod progress_deadline;
pub mod reconcile;
pub mod replicas;
pub mod replicaset;
pub mod statefulset;
pub mod step_plugins;
pub mod steps;
pub mod target_registration;
mod update_analysis;
pub mod waits;
pub mod workload;

/// The label the StatefulSet and DaemonSet controllers put on each pod: its revision's hash.
pub use controller_revision::REVISION_LABEL;
pub use observed::{Observed, ReplicaSetExt};
pub use plan::{Action, Event, EventType, Plan};
pub use reconcile::{
    Settings, reconcile, reconcile_with, router_dependent_references, router_references,
    router_selections, supports,
};
/// Label selectors are part of the API: the routers match them too.
pub use sluice_api::label_selector as selector;
pub use step_plugins::{StepPluginAnswer, StepPluginCall};
pub use waits::Wait;
