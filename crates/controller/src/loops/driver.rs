//! One reconcile of a Rollout, free of kube's runtime types: which ReplicaSets are the
//! Rollout's, observe → decide → apply, and when to look at the Rollout again. The controller's
//! Rollout loop and the simulator both run exactly this; only their plumbing differs (caches,
//! clocks, the client behind [`ClusterAccess`]).

use std::future::Future;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use sluice_api::Rollout;
use sluice_engine::{Plan, Settings};

use super::apply::Applied;
use super::observe::observe;
use crate::cluster::{ClusterAccess, WriteError};

/// How soon a Rollout whose plan met a stale view (409, or an object gone) is looked at again.
pub const STALE_RETRY: Duration = Duration::from_millis(500);
/// How soon a Rollout whose reconcile failed is looked at again.
pub const ERROR_RETRY: Duration = Duration::from_secs(5);

/// When to reconcile a Rollout again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    After(Duration),
    /// Only when something changes: a lost leadership leaves the Rollout to the new leader,
    /// and the next acquisition reconciles everything anyway.
    AwaitChange,
}

/// Whether `rs` belongs to `rollout`: the Rollout is its controller owner (by uid, which also
/// tells apart a namesake created since) in the same namespace.
pub fn owns(rollout: &Rollout, rs: &ReplicaSet) -> bool {
    let uid = rollout.metadata.uid.as_deref();
    rs.metadata.namespace == rollout.metadata.namespace
        && rs
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
}

/// Observes the Rollout's world through `cluster` (its `replica_sets` come from a cache),
/// lets the engine decide with `settings`, and has `apply` execute the plan. Returns the plan
/// and what applying it did.
pub async fn reconcile<C, A, F>(
    cluster: &C,
    rollout: &Rollout,
    replica_sets: Vec<ReplicaSet>,
    now: Timestamp,
    settings: &Settings,
    apply: A,
) -> Result<(Plan, Applied), WriteError>
where
    C: ClusterAccess,
    A: FnOnce(Plan) -> F,
    F: Future<Output = Result<Applied, WriteError>>,
{
    let observed = observe(cluster, rollout, replica_sets, now).await?;
    let plan = sluice_engine::reconcile_with(&observed, settings);
    let applied = apply(plan.clone()).await?;
    Ok((plan, applied))
}

/// The requeue policy: after a plan, when it asks (a pause or deadline expiring) or at the
/// resync period at the latest; after a failure, as [`requeue_after_error`] says.
pub fn requeue(result: &Result<Plan, WriteError>, resync: Duration) -> Requeue {
    match result {
        Ok(plan) => Requeue::After(plan.requeue_after.map_or(resync, |d| d.min(resync))),
        Err(e) => requeue_after_error(e),
    }
}

/// A stale view is observed again shortly; a lost leadership waits for a change; any other
/// failure is retried after [`ERROR_RETRY`].
pub fn requeue_after_error(error: &WriteError) -> Requeue {
    match error {
        WriteError::Conflict | WriteError::NotFound => Requeue::After(STALE_RETRY),
        WriteError::NotLeader => Requeue::AwaitChange,
        WriteError::Api(_) => Requeue::After(ERROR_RETRY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(namespace: &str, owner_uid: &str, controller: bool) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "r-1", "namespace": namespace, "ownerReferences": [{
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "r",
                "uid": owner_uid, "controller": controller
            }]}
        }))
        .unwrap()
    }

    #[test]
    fn a_rollout_owns_what_it_controls_by_uid_in_its_namespace() {
        let ro: Rollout = serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "r", "namespace": "a", "uid": "u1"},
            "spec": {}
        }))
        .unwrap();
        assert!(owns(&ro, &rs("a", "u1", true)));
        assert!(!owns(&ro, &rs("a", "u2", true)), "a namesake's");
        assert!(!owns(&ro, &rs("a", "u1", false)), "not the controller");
        assert!(!owns(&ro, &rs("b", "u1", true)), "another namespace");
    }

    #[test]
    fn requeue_policy() {
        let resync = Duration::from_secs(900);
        let plan = |after: Option<u64>| Plan {
            requeue_after: after.map(Duration::from_secs),
            ..Default::default()
        };
        assert_eq!(requeue(&Ok(plan(None)), resync), Requeue::After(resync));
        assert_eq!(
            requeue(&Ok(plan(Some(3))), resync),
            Requeue::After(Duration::from_secs(3))
        );
        assert_eq!(
            requeue(&Ok(plan(Some(5000))), resync),
            Requeue::After(resync)
        );
        assert_eq!(
            requeue(&Err(WriteError::Conflict), resync),
            Requeue::After(STALE_RETRY)
        );
        assert_eq!(
            requeue(&Err(WriteError::NotFound), resync),
            Requeue::After(STALE_RETRY)
        );
        assert_eq!(
            requeue(&Err(WriteError::NotLeader), resync),
            Requeue::AwaitChange
        );
        assert_eq!(
            requeue(&Err(WriteError::Api("boom".into())), resync),
            Requeue::After(ERROR_RETRY)
        );
    }
}
