//! The observe step: gather one Rollout's world into an [`Observed`] value for the engine.
//! Shared by the controller and the simulator, so both decide on the same inputs.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use sluice_api::Rollout;
use sluice_engine::Observed;

use crate::writer::{ClusterWriter, WriteError};

/// Builds the engine's input from cached ReplicaSets plus what is read on demand: pods only
/// while a restart is pending, and the Services a blue-green Rollout names.
pub async fn observe<W: ClusterWriter>(
    writer: &W,
    rollout: &Rollout,
    replica_sets: Vec<ReplicaSet>,
    now: Timestamp,
) -> Result<Observed, WriteError> {
    let ns = rollout.metadata.namespace.clone().unwrap_or_default();
    let pods = if Observed::needs_pods(rollout, now) {
        let selector = rollout
            .spec
            .selector
            .as_ref()
            .map(sluice_engine::reconcile::format_selector)
            .unwrap_or_default();
        writer.list_pods(&ns, &selector).await?
    } else {
        Vec::new()
    };
    let mut services = Vec::new();
    for name in Observed::service_names(rollout) {
        if let Some(svc) = writer.get_service(&ns, &name).await? {
            services.push(svc);
        }
    }
    Ok(Observed {
        rollout: rollout.clone(),
        replica_sets,
        pods,
        services,
        now,
    })
}
