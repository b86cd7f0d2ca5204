//! Mutations of the ReplicaSet side of an update and of what moves it on: how ReplicaSets are
//! named, found and sized, the traffic routed to them, and the status that carries the update
//! to its end. Each plants one bug a careless controller could have, in the plan
//! (or around it) before it is applied, and shows that the named invariant catches it.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::rollout::{CanaryStrategy, PauseReason, RolloutPhase, RolloutStatus};
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_controller::loops::apply::{Applied, apply_plan};
use sluice_engine::labels::POD_TEMPLATE_HASH;
use sluice_engine::{Action, Plan};
use sluice_sim::controller::BoxFuture;
use sluice_sim::invariants::{
    AVAILABILITY, DEADLINES_MET, FINAL_PHASE, ONE_REPLICA_SET_PER_TEMPLATE, PROGRESS, QUIET,
    ROUTED_REPLICA_SETS_KEEP_THEIR_PODS, SCALED_DOWN, TRAFFIC_WAITS_FOR_PODS, UNIQUE_REPLICA_SET,
};
use sluice_sim::net::SimWriter;

use super::seeds_to_catch;

type Applying = BoxFuture<Result<Applied, WriteError>>;

/// The simulated cluster's one namespace.
const NS: &str = "default";

fn apply(w: SimWriter, ro: Rollout, plan: Plan) -> Applying {
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

/// The name of the Rollout's ReplicaSet for `hash`.
fn rs_name(ro: &Rollout, hash: &str) -> String {
    format!("{}-{hash}", ro.metadata.name.as_deref().unwrap_or_default())
}

fn hash_of(rs: &ReplicaSet) -> Option<&str> {
    rs.metadata
        .labels
        .as_ref()?
        .get(POD_TEMPLATE_HASH)
        .map(String::as_str)
}

fn canary(ro: &Rollout) -> Option<&CanaryStrategy> {
    ro.spec.strategy.as_ref()?.canary.as_ref()
}

/// Treats every scale-down as the last one: an old ReplicaSet goes to zero at its first
/// scale-down, before the new pods that replace it are available, instead of as fast as
/// maxUnavailable allows.
fn scale_down_to_zero_at_once(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    for a in &mut plan.actions {
        if let Action::ScaleReplicaSet { from, to, .. } = a
            && *to < *from
        {
            *to = 0;
        }
    }
    apply(w, ro, plan)
}

#[test]
fn old_replica_set_scaled_to_zero_before_the_new_pods_are_up_is_caught() {
    seeds_to_catch("supersede", scale_down_to_zero_at_once, AVAILABILITY);
}

/// A create refused because the name is taken is retried under a fresh name (as pods are
/// named), labels unchanged, instead of observing again: a create repeated from a cache that
/// has not yet seen the first one makes a second ReplicaSet with the same hash.
fn create_under_a_fresh_name(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    Box::pin(async move {
        let creates = plan
            .actions
            .iter()
            .any(|a| matches!(a, Action::CreateReplicaSet { .. }));
        if creates {
            let taken: BTreeSet<String> = w
                .list_replica_sets(NS)
                .await?
                .into_iter()
                .filter_map(|rs| rs.metadata.name)
                .collect();
            for a in &mut plan.actions {
                if let Action::CreateReplicaSet { replica_set } = a {
                    let name = replica_set.metadata.name.clone().unwrap_or_default();
                    if taken.contains(&name) {
                        replica_set.metadata.name = Some(format!("{name}-{}", taken.len()));
                    }
                }
            }
        }
        apply_plan(&w, &ro, &plan).await
    })
}

#[test]
fn replica_set_created_again_under_another_name_is_caught() {
    seeds_to_catch("chaos", create_under_a_fresh_name, UNIQUE_REPLICA_SET);
}

/// `rs` as the ReplicaSet of `hash`: named, labelled and selecting by it, at zero replicas,
/// as a controller creates the ReplicaSet of a template it believes new.
fn rehashed(rs: &ReplicaSet, ro: &Rollout, hash: &str) -> Option<ReplicaSet> {
    let mut v = serde_json::to_value(rs).ok()?;
    let meta = v.get_mut("metadata")?.as_object_mut()?;
    for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
        meta.remove(field);
    }
    meta.insert("name".into(), json!(rs_name(ro, hash)));
    for labels in [
        "/metadata/labels",
        "/spec/selector/matchLabels",
        "/spec/template/metadata/labels",
    ] {
        if let Some(l) = v.pointer_mut(labels).and_then(Value::as_object_mut) {
            l.insert(POD_TEMPLATE_HASH.into(), json!(hash));
        }
    }
    v["spec"]["replicas"] = json!(0);
    v.as_object_mut()?.remove("status");
    serde_json::from_value(v).ok()
}

/// Looks for the current template's ReplicaSet by the template's own hash only: after taking
/// over from a controller with another hash table it misses the ReplicaSet that one named
/// (which the engine adopted) and creates a second one for the same template, to roll every
/// pod onto.
fn miss_replica_sets_of_another_hash_table(w: SimWriter, ro: Rollout, plan: Plan) -> Applying {
    Box::pin(async move {
        let own = sluice_engine::pod_hash::template_hash(&ro).ok();
        let adopted = plan.status.current_pod_hash.clone();
        if let (Some(own), Some(adopted)) = (own, adopted)
            && own != adopted
        {
            let all = w.list_replica_sets(NS).await?;
            let found = all.iter().find(|rs| hash_of(rs) == Some(adopted.as_str()));
            let has_own = all.iter().any(|rs| hash_of(rs) == Some(own.as_str()));
            if let Some(second) = found.and_then(|rs| rehashed(rs, &ro, &own))
                && !has_own
            {
                w.create_replica_set(NS, &second).await?;
            }
        }
        apply_plan(&w, &ro, &plan).await
    })
}

#[test]
fn second_replica_set_for_a_taken_over_template_is_caught() {
    seeds_to_catch(
        "takeover-another-hash-table-healthy",
        miss_replica_sets_of_another_hash_table,
        ONE_REPLICA_SET_PER_TEMPLATE,
    );
}

/// Judges the phase by the pods alone: an aborted update whose stable pods are all available
/// again reads Healthy, not Degraded.
fn healthy_once_aborted_pods_are_back(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    let replicas = ro.spec.replicas.unwrap_or(1);
    if plan.status.abort == Some(true)
        && plan.status.phase == Some(RolloutPhase::Degraded)
        && plan.status.available_replicas >= Some(replicas)
    {
        plan.status.phase = Some(RolloutPhase::Healthy);
        plan.status.message = None;
    }
    apply(w, ro, plan)
}

#[test]
fn aborted_update_reported_healthy_is_caught() {
    seeds_to_catch(
        "istio-gradual-abort",
        healthy_once_aborted_pods_are_back,
        FINAL_PHASE,
    );
}

/// Scales down only the stable and the new ReplicaSet: an older one (a canary a newer
/// revision superseded, Argo #3331's case) is left with its pods.
fn forget_older_replica_sets(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    let keep: Vec<String> = [&plan.status.current_pod_hash, &plan.status.stable_rs]
        .into_iter()
        .flatten()
        .map(|h| rs_name(&ro, h))
        .collect();
    plan.actions.retain(|a| match a {
        Action::ScaleReplicaSet { name, from, to, .. } => to >= from || keep.contains(name),
        _ => true,
    });
    apply(w, ro, plan)
}

#[test]
fn superseded_canary_left_up_is_caught() {
    seeds_to_catch("supersede", forget_older_replica_sets, SCALED_DOWN);
}

/// The annotation the controller stamps an idle Rollout with.
const RECONCILED_AT: &str = "rollouts.sluice.dev/reconciled-at";

/// Stamps a Rollout it finds nothing to do for with the resourceVersion it reconciled: the
/// stamp is itself a change, which brings the Rollout back with a new resourceVersion, so the
/// controller never stops writing.
fn stamp_idle_rollouts(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    if plan.actions.is_empty() && plan.status.phase == Some(RolloutPhase::Healthy) {
        plan.actions.push(Action::AnnotateRollout {
            resource_version: ro.metadata.resource_version.clone(),
            annotations: BTreeMap::from([(
                RECONCILED_AT.to_string(),
                ro.metadata.resource_version.clone(),
            )]),
        });
    }
    apply(w, ro, plan)
}

#[test]
fn controller_that_keeps_stamping_an_idle_rollout_is_caught() {
    seeds_to_catch("supersede", stamp_idle_rollouts, QUIET);
}

/// The status patch loses the step index's advances (a merge that keeps the observed field):
/// an update never gets past its first step.
fn lose_step_advances(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    let observed = ro.status.as_ref();
    let seen = observed.and_then(|s| s.current_step_index);
    let same_update =
        observed.and_then(|s| s.current_pod_hash.as_ref()) == plan.status.current_pod_hash.as_ref();
    if let (Some(seen), Some(next)) = (seen, plan.status.current_step_index)
        && next > seen
        && same_update
    {
        plan.status.current_step_index = Some(seen);
    }
    apply(w, ro, plan)
}

#[test]
fn update_stuck_at_its_first_step_is_caught() {
    seeds_to_catch("supersede", lose_step_advances, PROGRESS);
}

fn pause_step(status: &RolloutStatus) -> bool {
    status
        .pause_conditions
        .iter()
        .flatten()
        .any(|c| c.reason == Some(PauseReason::CanaryPauseStep))
}

/// Reads a pause step's duration as absent (a duration string it fails to parse), so a timed
/// pause waits for a user like an indefinite one: the reconcile at the pause's end, which
/// would lift it, changes nothing. A user's resume, an abort and a new revision still end it.
/// (The likelier bug, a forgotten requeue, cannot be planted here: the driver requeues by the
/// engine's plan, not by the one this hook applies.)
fn timed_pause_never_ends(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    let observed = ro.status.clone().unwrap_or_default();
    let lifted_by_time = pause_step(&observed)
        && !pause_step(&plan.status)
        && observed.abort != Some(true)
        && observed.promote_full != Some(true)
        && plan.status.abort != Some(true)
        && observed.current_pod_hash == plan.status.current_pod_hash;
    if lifted_by_time {
        plan.actions.clear();
        plan.events.clear();
        plan.status = observed;
    }
    apply(w, ro, plan)
}

#[test]
fn timed_pause_held_past_its_end_is_caught() {
    seeds_to_catch("crash-mid-canary", timed_pause_never_ends, DEADLINES_MET);
}

/// On abort, scales the canary down first and only then takes its traffic away: the router
/// still sends the canary its weight while its pods go.
fn scale_canary_down_before_the_router(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    let moves_traffic = plan
        .actions
        .iter()
        .any(|a| matches!(a, Action::UpdateRouterObject { .. }));
    if let Some(current) = &plan.status.current_pod_hash
        && plan.status.abort == Some(true)
        && moves_traffic
    {
        let down = Action::ScaleReplicaSet {
            name: rs_name(&ro, current),
            resource_version: None,
            from: ro.spec.replicas.unwrap_or(1),
            to: 0,
            annotations: BTreeMap::new(),
        };
        plan.actions.insert(0, down);
    }
    apply(w, ro, plan)
}

#[test]
fn canary_scaled_down_under_its_traffic_is_caught() {
    seeds_to_catch(
        "istio-gradual-abort",
        scale_canary_down_before_the_router,
        ROUTED_REPLICA_SETS_KEEP_THEIR_PODS,
    );
}

/// Promotes the stable Service as soon as the steps are done: it selects the new ReplicaSet
/// before that is scaled up to full, so the stable traffic lands on the canary's few pods.
fn switch_stable_before_full_scale(w: SimWriter, ro: Rollout, mut plan: Plan) -> Applying {
    let steps = canary(&ro)
        .and_then(|c| c.steps.as_ref())
        .map_or(0, Vec::len);
    let stable_service = canary(&ro).and_then(|c| c.stable_service.clone());
    let done = plan
        .status
        .current_step_index
        .is_some_and(|i| usize::try_from(i).is_ok_and(|i| i >= steps));
    let current = plan.status.current_pod_hash.clone();
    if let (Some(service), Some(current), true) = (stable_service, current, done)
        && plan.status.stable_rs.as_ref() != Some(&current)
    {
        let new_rs = rs_name(&ro, &current);
        let scale_up = plan.actions.iter().position(|a| {
            matches!(a, Action::ScaleReplicaSet { name, from, to, .. } if *name == new_rs && to > from)
        });
        if let Some(at) = scale_up {
            let switch = Action::SwitchService {
                name: service,
                resource_version: None,
                pod_hash: current,
                rollout: ro.metadata.name.clone().unwrap_or_default(),
            };
            plan.actions.insert(at, switch);
        }
    }
    apply(w, ro, plan)
}

#[test]
fn stable_service_switched_before_the_pods_are_there_is_caught() {
    seeds_to_catch(
        "istio-host-split",
        switch_stable_before_full_scale,
        TRAFFIC_WAITS_FOR_PODS,
    );
}

/// Each invariant shown able to fail in this module, and the test that shows it.
pub(crate) const CAUGHT_BY: &[(&str, &str)] = &[
    (
        AVAILABILITY,
        "old_replica_set_scaled_to_zero_before_the_new_pods_are_up_is_caught",
    ),
    (
        UNIQUE_REPLICA_SET,
        "replica_set_created_again_under_another_name_is_caught",
    ),
    (
        ONE_REPLICA_SET_PER_TEMPLATE,
        "second_replica_set_for_a_taken_over_template_is_caught",
    ),
    (FINAL_PHASE, "aborted_update_reported_healthy_is_caught"),
    (SCALED_DOWN, "superseded_canary_left_up_is_caught"),
    (
        QUIET,
        "controller_that_keeps_stamping_an_idle_rollout_is_caught",
    ),
    (PROGRESS, "update_stuck_at_its_first_step_is_caught"),
    (DEADLINES_MET, "timed_pause_held_past_its_end_is_caught"),
    (
        ROUTED_REPLICA_SETS_KEEP_THEIR_PODS,
        "canary_scaled_down_under_its_traffic_is_caught",
    ),
    (
        TRAFFIC_WAITS_FOR_PODS,
        "stable_service_switched_before_the_pods_are_there_is_caught",
    ),
];
