//! `spec.restartAt`: pods created before it are evicted, a few at a time, within the
//! availability budget; the restart is recorded once none is left. As in Argo, no event is
//! posted for it: the evictions are the pods' own events, and `status.restartedAt` says when
//! it was done.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use sluice_api::rollout::RolloutStatus;

use super::World;
use crate::observed::ReplicaSetExt;
use crate::plan::{Action, Plan, set_requeue};

impl World<'_> {
    /// `spec.restartAt`: evicts pods created before it, at most `max(maxUnavailable, 1)` pods
    /// unavailable at a time, then records `status.restartedAt`. Returns whether it evicted.
    pub(super) fn restart(&self, status: &mut RolloutStatus, plan: &mut Plan) -> bool {
        let Some(at) = self.ro.spec.restart_at.clone() else {
            return false;
        };
        if status.restarted_at.as_ref() == Some(&at) {
            return false;
        }
        if self.now < at.0 {
            let wait = Duration::try_from(at.0.duration_since(self.now)).unwrap_or_default();
            set_requeue(&mut plan.requeue_after, wait);
            return false;
        }
        let current: Vec<&str> = [self.new_rs, self.stable_rs]
            .into_iter()
            .flatten()
            .filter_map(|rs| rs.pod_hash())
            .collect();
        let mut stale: Vec<&Pod> = self
            .pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.metadata
                    .creation_timestamp
                    .as_ref()
                    .is_some_and(|t| t.0 < at.0)
            })
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(crate::labels::POD_TEMPLATE_HASH))
                    .is_some_and(|h| current.contains(&h.as_str()))
            })
            .collect();
        if stale.is_empty() {
            status.restarted_at = Some(at);
            return false;
        }
        stale.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let unavailable: i32 = [self.new_rs, self.stable_rs]
            .into_iter()
            .flatten()
            .map(|rs| (rs.spec_replicas() - rs.available_replicas()).max(0))
            .sum();
        let budget = (self.spec.limits.max_unavailable.max(1) - unavailable).max(0) as usize;
        for pod in stale.iter().take(budget) {
            plan.actions.push(Action::EvictPod {
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone(),
            });
        }
        // Pods are not watched: look again soon.
        set_requeue(&mut plan.requeue_after, Duration::from_secs(2));
        budget > 0
    }
}
