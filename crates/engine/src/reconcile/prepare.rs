//! Spec preparation: validation, the strategy and what this version of Sluice supports of it,
//! the pod-template hash (or the hash of a ReplicaSet adopted for an equal template), the
//! replica count and the surge limits. A spec that fails here is reported as `InvalidSpec`.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::rollout::{BlueGreenStrategy, CanaryStepAction, Rollout};

use super::spec::{Prepared, Strategy};
use crate::observed::Observed;
use crate::replicas;
use crate::{pod_hash, steps};

/// The problem that stops the Rollout: the first one Argo's validation finds too (Argo
/// reports the first problem only). Problems only Sluice looks for do not stop a Rollout that
/// Argo runs; [`spec_warning`] reports them.
pub(super) fn first_problem(ro: &Rollout) -> Option<String> {
    sluice_api::validation::check_rollout(ro)
        .blocking()
        .map(str::to_string)
}

/// The reason of the Warning event that reports the problems only Sluice looks for.
pub const SPEC_WARNING: &str = "SpecWarning";

/// A Warning event with the problems only Sluice finds in the spec, once per generation of
/// the spec (when the generation observed changes), so that a person sees them without the
/// Rollout stopping: Argo runs such a spec, so Sluice does too.
pub(super) fn spec_warning(
    ro: &Rollout,
    observed_generation: Option<&str>,
) -> Option<crate::Event> {
    let generation = ro.metadata.generation.map(|g| g.to_string());
    if generation.is_some() && generation.as_deref() == observed_generation {
        return None;
    }
    let problems = sluice_api::validation::check_rollout(ro);
    if problems.blocking().is_some() || problems.sluice.is_empty() {
        return None;
    }
    Some(crate::Event::warning(
        SPEC_WARNING,
        format!(
            "The spec runs as Argo Rollouts runs it, but Sluice's checks found: {}",
            problems.sluice.join("; ")
        ),
    ))
}

/// Prepares a Rollout that passed validation: with a `workloadRef`, the Rollout as resolved
/// (see [`crate::workload`]), whose template validation never saw.
pub(super) fn prepare_valid(ro: &Rollout) -> Result<Prepared, String> {
    let strategy = ro.spec.strategy.clone().unwrap_or_default();
    if let Some(bg) = strategy.blue_green {
        return prepare_blue_green(ro, bg);
    }
    let Some(canary) = strategy.canary else {
        return Err("a canary or blueGreen strategy is required".into());
    };
    let routed = canary.traffic_routing.is_some();
    let gradual_abort = super::traffic::gradual_abort::hold(ro)?.filter(|_| routed);
    for (i, step) in steps::steps(&canary).iter().enumerate() {
        match step.action() {
            Some(
                CanaryStepAction::SetWeight(_)
                | CanaryStepAction::Pause(_)
                | CanaryStepAction::Analysis(_)
                | CanaryStepAction::Experiment(_)
                | CanaryStepAction::Plugin(_),
            ) => {}
            // Validation has made sure these come with a router that supports them.
            Some(
                CanaryStepAction::SetCanaryScale(_)
                | CanaryStepAction::SetHeaderRoute(_)
                | CanaryStepAction::SetMirrorRoute(_),
            ) if routed => {}
            Some(other) => {
                return Err(format!(
                    "step {i}: {} steps are not supported by this version of Sluice",
                    crate::steps::step_kind(&other)
                ));
            }
            None => return Err(format!("step {i}: no action set")),
        }
    }
    let (pod_hash, replicas) = hash_and_replicas(ro)?;
    let limits = replicas::resolve_surge_limits(
        canary.max_surge.as_ref(),
        canary.max_unavailable.as_ref(),
        replicas,
    )
    .map_err(|e| e.to_string())?;
    Ok(Prepared {
        pod_hash,
        strategy: Strategy::Canary(Box::new(canary)),
        replicas,
        limits,
        gradual_abort,
    })
}

fn prepare_blue_green(ro: &Rollout, bg: BlueGreenStrategy) -> Result<Prepared, String> {
    let (pod_hash, replicas) = hash_and_replicas(ro)?;
    // maxUnavailable only paces restarts in blue-green; nothing surges. A value that is not a
    // number or a percentage reads as 0, as Argo reads it (and runs the Rollout).
    let zero = IntOrString::Int(0);
    let unavailable = bg
        .max_unavailable
        .as_ref()
        .filter(|v| replicas::scaled_value(v, replicas, false).is_ok())
        .unwrap_or(&zero);
    let limits = replicas::resolve_surge_limits(Some(&zero), Some(unavailable), replicas)
        .map_err(|e| e.to_string())?;
    Ok(Prepared {
        pod_hash,
        strategy: Strategy::BlueGreen(Box::new(bg)),
        replicas,
        limits,
        gradual_abort: None,
    })
}

fn hash_and_replicas(ro: &Rollout) -> Result<(String, i32), String> {
    let pod_hash = pod_hash::template_hash(ro)?;
    let replicas = ro
        .spec
        .replicas
        .unwrap_or(sluice_api::rollout::DEFAULT_REPLICAS)
        .max(0);
    Ok((pod_hash, replicas))
}

/// Takes over the hash of a ReplicaSet whose template equals the Rollout's (a rollback), as
/// [`pod_hash::adopted_hash`] explains.
pub(super) fn adopt_equal_template(p: &mut Prepared, observed: &Observed) {
    p.pod_hash = pod_hash::adopted_hash(
        &observed.rollout,
        &observed.replica_sets,
        std::mem::take(&mut p.pod_hash),
    );
}
