//! What a Rollout with a `workloadRef` owes the workload it takes its template from:
//!
//! - the generation of the workload it has seen, in the annotation
//!   `rollout.argoproj.io/workload-generation` and in `status.workloadObservedGeneration`
//!   (Argo CD's health check waits while the two differ);
//! - the migration from a Deployment (`scaleDown`), once, while the Rollout's first revision
//!   comes up: `never` leaves the Deployment alone, `onsuccess` scales it to 0 once the
//!   Rollout is Healthy, `progressively` gives it back one pod for each pod of the Rollout
//!   that is ready (R − ready), and 0 once Healthy. Pods are never restarted for it: the
//!   Deployment's pods go only as the Rollout's are ready to take their place.

use sluice_api::rollout::{Rollout, RolloutPhase, RolloutStatus, WorkloadRefScaleDown};

use super::world::World;
use crate::observed::Observed;
use crate::plan::{Action, Plan};
use crate::workload::{WORKLOAD_GENERATION, WorkloadKind};

/// `original` is the Rollout as written, `world` the reconcile of it resolved.
pub(super) fn decide(
    original: &Rollout,
    world: &World<'_>,
    observed: &Observed,
    old: &RolloutStatus,
    plan: &mut Plan,
) {
    let (Some(target), Some(object)) = (
        crate::workload::target(original),
        observed.workload.as_ref(),
    ) else {
        return;
    };
    let generation = crate::workload::generation(object);
    let recorded = original
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(WORKLOAD_GENERATION));
    if recorded != Some(&generation) {
        plan.annotate_rollout(
            original.metadata.resource_version.clone(),
            WORKLOAD_GENERATION,
            Some(generation.clone()),
        );
    }
    plan.status.workload_observed_generation = Some(generation);

    // Only a Deployment is scaled down, and only while the first revision is the new one: a
    // one-time migration.
    if target.kind != WorkloadKind::Deployment || world.revision != 1 {
        return;
    }
    let mode = original
        .spec
        .workload_ref
        .as_ref()
        .and_then(|w| w.scale_down.clone());
    let healthy = old.phase == Some(RolloutPhase::Healthy);
    let promoted = plan.status.stable_rs.is_some()
        && plan.status.stable_rs.as_deref() == Some(world.spec.pod_hash.as_str());
    let desired = match mode {
        Some(WorkloadRefScaleDown::OnSuccess) => (healthy && promoted).then_some(0),
        Some(WorkloadRefScaleDown::Progressively) => {
            let ready = old.ready_replicas.unwrap_or(0);
            if healthy {
                Some(0)
            } else {
                original
                    .spec
                    .replicas
                    .filter(|_| ready > 0)
                    .map(|r| r - ready)
            }
        }
        _ => None,
    };
    let Some(to) = desired.map(|d| d.max(0)) else {
        return;
    };
    // Kubernetes defaults a Deployment's replicas to 1.
    let from = object["spec"]["replicas"]
        .as_i64()
        .map_or(1, |r| i32::try_from(r).unwrap_or(i32::MAX));
    if from != to {
        let mut object = object.clone();
        object["spec"]["replicas"] = to.into();
        plan.actions.push(Action::ScaleDeployment {
            name: target.name,
            object: Box::new(object),
            from,
            to,
        });
    }
}
