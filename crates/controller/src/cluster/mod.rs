//! The controller's narrow access to the cluster: the reads the observe step makes (pods,
//! Services, AnalysisRuns, templates, Experiments, router objects) and every write. The observe
//! and apply layers speak only this, so the real API server ([`KubeCluster`], reading from watch
//! caches where it has them) and the deterministic simulator can both stand behind it.

mod access;
mod api_server;
mod aws_load_balancers;
mod aws_target_groups;
mod cached;
pub mod config_copies;
mod driven;
mod field_manager;
pub mod requeue;
pub mod router_plugins;
#[cfg(test)]
pub(crate) mod tests;

pub use access::{ClusterAccess, controlled_by};
pub use api_server::KubeCluster;
pub use field_manager::FIELD_MANAGER;

use std::fmt::Debug;

use crate::leader::fence::Fenced;
use requeue::requeue_after_error;

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The object changed since it was observed (HTTP 409): observe again and re-decide.
    #[error("conflict: the object changed since it was read")]
    Conflict,
    #[error("not found")]
    NotFound,
    /// This instance does not hold the leader lease (or lost it since the plan was decided):
    /// nothing was written. Not an error of the Rollout; the leader handles it.
    #[error("not the leader: write refused")]
    NotLeader,
    #[error("{0}")]
    Api(String),
}

impl WriteError {
    /// How a reconcile goes on after this failure when it is an expected one rather than an
    /// error: a stale view (409, or the object gone) is observed again shortly; a lost
    /// leadership leaves the object to the new leader, who re-decides from what was written.
    pub fn expected_outcome(&self) -> Option<kube::runtime::controller::Action> {
        match self {
            WriteError::Api(_) => None,
            expected => Some(requeue_after_error(expected).into()),
        }
    }
}

impl From<kube::Error> for WriteError {
    fn from(e: kube::Error) -> Self {
        match &e {
            kube::Error::Api(status) if status.is_conflict() => WriteError::Conflict,
            kube::Error::Api(status) if status.is_already_exists() => WriteError::Conflict,
            kube::Error::Api(status) if status.is_not_found() => WriteError::NotFound,
            kube::Error::Service(inner) if inner.is::<Fenced>() => WriteError::NotLeader,
            _ => WriteError::Api(e.to_string()),
        }
    }
}
