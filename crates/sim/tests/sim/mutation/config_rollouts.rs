//! Mutation tests of config rollouts: copies made after the ReplicaSet that reads them, a
//! shared copy owned by one of its readers only, and a new copy mounted into the stable
//! ReplicaSet's pods in place, each planted in the Rollout loop's write path and caught by the
//! invariant it breaks.

use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_controller::loops::apply::{Applied, apply_plan};
use sluice_engine::labels::POD_TEMPLATE_HASH;
use sluice_engine::{Action, Plan};
use sluice_sim::controller::BoxFuture;
use sluice_sim::invariants::config_rollouts::{COPIES_EXIST_WHILE_READ, SETTLED};
use sluice_sim::net::SimWriter;

use super::seeds_to_catch;

/// The copies a plan makes are made after its other writes, the ReplicaSet whose pods read
/// them among those.
fn copy_after_the_replica_set(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    let (copies, rest): (Vec<Action>, Vec<Action>) = plan
        .actions
        .drain(..)
        .partition(|a| matches!(a, Action::CopyConfig { .. }));
    plan.actions = rest.into_iter().chain(copies).collect();
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

#[test]
fn a_copy_made_after_the_replica_set_that_reads_it_is_caught() {
    seeds_to_catch(
        "config-rollout",
        copy_after_the_replica_set,
        COPIES_EXIST_WHILE_READ,
    );
}

/// A copy read by several ReplicaSets (the Secret's, which no edit changes) is owned by one of
/// them only, the last the plan names: the garbage collector takes it with that one (when it
/// goes beyond the history limit) while the others still read it.
fn own_by_one_reader(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    for action in &mut plan.actions {
        if let Action::OwnConfigCopy { owners, .. } = action {
            let keep = owners.len().saturating_sub(1);
            owners.drain(..keep);
        }
    }
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

#[test]
fn a_shared_copy_owned_by_one_of_its_readers_is_caught() {
    seeds_to_catch("config-rollout", own_by_one_reader, COPIES_EXIST_WHILE_READ);
}

/// A copy made is also mounted in place into the stable ReplicaSet's pods (its volume, not
/// its environment), as a mounted ConfigMap is refreshed without config rollouts: an abort
/// leaves the stable revision reading the aborted content.
fn refresh_the_stable_volume(
    w: SimWriter,
    ro: Rollout,
    plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move {
        let made: Vec<(String, String)> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::CopyConfig { source, copy, .. } => Some((source.clone(), copy.clone())),
                _ => None,
            })
            .collect();
        let applied = apply_plan(&w, &ro, &plan).await?;
        let Some(stable) = plan.status.stable_rs.clone() else {
            return Ok(applied);
        };
        for rs in w.list_replica_sets("default").await? {
            let labels = rs.metadata.labels.clone().unwrap_or_default();
            if made.is_empty() || labels.get(POD_TEMPLATE_HASH) != Some(&stable) {
                continue;
            }
            let template = rs.spec.as_ref().and_then(|s| s.template.as_ref());
            let Ok(mut volumes) =
                serde_json::to_value(template.and_then(|t| t.spec.as_ref()).map(|s| &s.volumes))
            else {
                continue;
            };
            for volume in volumes.as_array_mut().into_iter().flatten() {
                let Some(name) = volume.pointer_mut("/configMap/name") else {
                    continue;
                };
                let current = name.as_str().unwrap_or_default().to_string();
                if let Some((_, copy)) = made
                    .iter()
                    .find(|(source, _)| current.starts_with(&format!("{source}-")))
                {
                    *name = Value::String(copy.clone());
                }
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            let patch = json!({"spec": {"template": {"spec": {"volumes": volumes}}}});
            w.patch_replica_set("default", &name, &patch).await?;
        }
        Ok(applied)
    })
}

#[test]
fn a_copy_mounted_into_the_stable_pods_is_caught() {
    seeds_to_catch("config-rollout", refresh_the_stable_volume, SETTLED);
}

/// Each invariant shown able to fail in this file, and the test that shows it.
pub const CAUGHT_BY: &[(&str, &str)] = &[
    (
        COPIES_EXIST_WHILE_READ,
        "a_copy_made_after_the_replica_set_that_reads_it_is_caught",
    ),
    (
        COPIES_EXIST_WHILE_READ,
        "a_shared_copy_owned_by_one_of_its_readers_is_caught",
    ),
    (SETTLED, "a_copy_mounted_into_the_stable_pods_is_caught"),
];
