//! What preparation established about a Rollout's spec: the strategy, the pod-template hash,
//! the replica count and the surge limits, read by every part of a reconcile.

use sluice_api::rollout::{BlueGreenStrategy, CanaryStrategy};

use crate::replicas::SurgeLimits;

/// What validation and hashing established about the spec.
pub(super) struct Prepared {
    pub(super) pod_hash: String,
    pub(super) strategy: Strategy,
    pub(super) replicas: i32,
    pub(super) limits: SurgeLimits,
    /// `rollouts.sluice.dev/gradual-abort`: how long each weight is held on the way back.
    pub(super) gradual_abort: Option<std::time::Duration>,
}

pub(super) enum Strategy {
    Canary(Box<CanaryStrategy>),
    BlueGreen(Box<BlueGreenStrategy>),
}

impl Prepared {
    /// The canary strategy; an empty one for blue-green (no steps).
    pub(super) fn canary(&self) -> &CanaryStrategy {
        static NONE: std::sync::OnceLock<CanaryStrategy> = std::sync::OnceLock::new();
        match &self.strategy {
            Strategy::Canary(c) => c,
            Strategy::BlueGreen(_) => NONE.get_or_init(CanaryStrategy::default),
        }
    }
}
