//! Mutation tests of a Rollout driving a DaemonSet: a plan's evictions taken one node too far,
//! and an abort that restores the stable template but evicts nothing, each planted in the
//! Rollout loop's write path and caught by the DaemonSet invariant it breaks.

use sluice_api::Rollout;
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_controller::loops::apply::{Applied, apply_plan};
use sluice_engine::{Action, Plan};
use sluice_sim::controller::BoxFuture;
use sluice_sim::invariants::daemon_sets::{NODES_WITHIN_STEP, SETTLED};
use sluice_sim::net::SimWriter;

use super::seeds_to_catch;

/// Whenever a plan of an update in progress evicts, one more old pod goes with its
/// evictions: the first by name that runs another revision than the update's and that the
/// plan leaves alone.
fn evict_one_node_too_many(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move {
        let evicting: Vec<String> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::EvictPod { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        let update = plan.status.current_pod_hash.clone();
        if !evicting.is_empty() && plan.status.abort != Some(true) {
            let pods = w.list_pods("default", "app=demo").await?;
            let extra = pods.iter().find(|p| {
                let name = p.metadata.name.clone().unwrap_or_default();
                let revision = p
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("controller-revision-hash"))
                    .cloned();
                !evicting.contains(&name) && revision.is_some() && revision != update
            });
            if let Some(pod) = extra {
                plan.actions.push(Action::EvictPod {
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    uid: pod.metadata.uid.clone(),
                });
            }
        }
        apply_plan(&w, &ro, &plan).await
    })
}

#[test]
fn a_daemon_set_update_that_evicts_one_node_too_many_is_caught() {
    seeds_to_catch(
        "daemonset-canary",
        evict_one_node_too_many,
        NODES_WITHIN_STEP,
    );
}

/// An abort that puts the stable template back but evicts no pod: the nodes already
/// updated keep the aborted revision.
fn abort_without_evicting(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    if plan.status.abort == Some(true) {
        plan.actions
            .retain(|a| !matches!(a, Action::EvictPod { .. }));
    }
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

#[test]
fn a_daemon_set_abort_that_leaves_its_updated_nodes_is_caught() {
    seeds_to_catch("daemonset-canary", abort_without_evicting, SETTLED);
}

/// Each invariant shown able to fail in this file, and the test that shows it.
pub const CAUGHT_BY: &[(&str, &str)] = &[
    (
        NODES_WITHIN_STEP,
        "a_daemon_set_update_that_evicts_one_node_too_many_is_caught",
    ),
    (
        SETTLED,
        "a_daemon_set_abort_that_leaves_its_updated_nodes_is_caught",
    ),
];
