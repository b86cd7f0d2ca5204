//! The observed world of one Rollout: everything a decision needs, gathered by the I/O layer
//! before the engine runs. Plain values only.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use sluice_api::rollout::Rollout;

use crate::labels::{POD_TEMPLATE_HASH, REVISION};

/// One Rollout and the objects it owns, as seen at `now`.
#[derive(Debug, Clone)]
pub struct Observed {
    pub rollout: Rollout,
    /// ReplicaSets controlled by this Rollout (owner reference with `controller: true`).
    pub replica_sets: Vec<ReplicaSet>,
    /// Pods of the Rollout. Only needed (and only gathered) while a restart is pending; see
    /// [`Observed::needs_pods`].
    pub pods: Vec<Pod>,
    /// The Services a blue-green Rollout names (active, preview), as found; absent ones are
    /// simply missing from the list.
    pub services: Vec<Service>,
    pub now: Timestamp,
}

impl Observed {
    /// Names of the Services the Rollout routes traffic through, to be fetched before deciding.
    pub fn service_names(rollout: &Rollout) -> Vec<String> {
        let Some(bg) = rollout
            .spec
            .strategy
            .as_ref()
            .and_then(|s| s.blue_green.as_ref())
        else {
            return Vec::new();
        };
        [&bg.active_service, &bg.preview_service]
            .into_iter()
            .flatten()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect()
    }

    /// Whether the decision needs the Rollout's pods: only while `spec.restartAt` has passed and
    /// is not yet recorded as done. Pods are listed on demand, never cached cluster-wide.
    pub fn needs_pods(rollout: &Rollout, now: Timestamp) -> bool {
        let Some(at) = &rollout.spec.restart_at else {
            return false;
        };
        let done = rollout
            .status
            .as_ref()
            .and_then(|s| s.restarted_at.as_ref())
            == Some(at);
        !done && at.0 <= now
    }
}

/// Read-only helpers over a ReplicaSet, named after what the engine asks of one.
pub trait ReplicaSetExt {
    fn name(&self) -> &str;
    fn pod_hash(&self) -> Option<&str>;
    fn revision(&self) -> Option<i64>;
    fn annotation(&self, key: &str) -> Option<&str>;
    fn spec_replicas(&self) -> i32;
    fn status_replicas(&self) -> i32;
    fn ready_replicas(&self) -> i32;
    fn available_replicas(&self) -> i32;
    /// Whether the ReplicaSet controller has caught up with the latest spec change.
    fn status_is_current(&self) -> bool;
    fn is_being_deleted(&self) -> bool;
}

impl ReplicaSetExt for ReplicaSet {
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    fn pod_hash(&self) -> Option<&str> {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_TEMPLATE_HASH))
            .map(String::as_str)
    }

    fn revision(&self) -> Option<i64> {
        self.annotation(REVISION).and_then(|v| v.parse().ok())
    }

    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    fn spec_replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }

    fn status_replicas(&self) -> i32 {
        self.status.as_ref().map(|s| s.replicas).unwrap_or(0)
    }

    fn ready_replicas(&self) -> i32 {
        self.status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0)
    }

    fn available_replicas(&self) -> i32 {
        self.status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0)
    }

    fn status_is_current(&self) -> bool {
        let generation = self.metadata.generation.unwrap_or(0);
        let observed = self
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0);
        observed >= generation
    }

    fn is_being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }
}
