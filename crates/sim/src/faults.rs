//! The random faults a run may inject, and how a seed picks them. Each seed switches a random
//! subset of fault kinds on ("swarm" testing): a schedule with only watch reordering finds
//! different bugs than one where everything fails at once.

use crate::rng::Rng;

#[derive(Debug, Clone)]
pub struct Faults {
    /// One-way network delay between a controller and the API server.
    pub net_latency_ms: (u64, u64),
    /// Delay of a watch event to one controller.
    pub watch_delay_ms: (u64, u64),
    /// Chance an event is delivered twice.
    pub watch_duplicate: f64,
    /// Chance, per event, that a watch breaks (events in flight lost, re-list follows).
    pub watch_break: f64,
    pub relist_backoff_ms: (u64, u64),
    /// Chance that somebody else writes a ReplicaSet (or a router object) just before a
    /// controller's patch (or update) of it lands, so the write meets a genuine 409.
    pub conflict_before_patch: f64,
    /// Chance a write is applied but its reply is lost (the client sees a timeout).
    pub lost_reply: f64,
    /// Third-party writes to ReplicaSets and router objects (as kubectl or Argo CD would):
    /// every so often.
    pub meddle_every_ms: Option<(u64, u64)>,
    /// Controller process crashes: every so often, and how long until it is back.
    pub crash_every_ms: Option<(u64, u64)>,
    pub restart_after_ms: (u64, u64),
    /// Network partitions of one controller from the API server.
    pub partition_every_ms: Option<(u64, u64)>,
    pub partition_ms: (u64, u64),
    /// How long the ReplicaSet controller takes to notice a change.
    pub rs_controller_delay_ms: (u64, u64),
}

impl Faults {
    /// A well-behaved cluster: small delays, nothing fails.
    pub fn calm() -> Self {
        Self {
            net_latency_ms: (1, 20),
            watch_delay_ms: (1, 50),
            watch_duplicate: 0.0,
            watch_break: 0.0,
            relist_backoff_ms: (500, 3_000),
            conflict_before_patch: 0.0,
            lost_reply: 0.0,
            meddle_every_ms: None,
            crash_every_ms: None,
            restart_after_ms: (1_000, 10_000),
            partition_every_ms: None,
            partition_ms: (2_000, 20_000),
            rs_controller_delay_ms: (5, 300),
        }
    }

    /// A random subset of every fault kind, at random intensities.
    pub fn swarm(rng: &mut Rng) -> Self {
        let mut f = Self::calm();
        f.net_latency_ms = (1, rng.range((5, 200)));
        if rng.chance(0.7) {
            f.watch_delay_ms = (1, rng.range((100, 5_000)));
        }
        if rng.chance(0.5) {
            f.watch_duplicate = 0.05;
        }
        if rng.chance(0.4) {
            f.watch_break = 0.01 * rng.range((1, 5)) as f64;
        }
        if rng.chance(0.5) {
            f.conflict_before_patch = 0.05 * rng.range((1, 6)) as f64;
        }
        if rng.chance(0.3) {
            f.lost_reply = 0.05;
        }
        if rng.chance(0.4) {
            f.meddle_every_ms = Some((2_000, 30_000));
        }
        if rng.chance(0.4) {
            f.crash_every_ms = Some((20_000, 120_000));
        }
        if rng.chance(0.3) {
            f.partition_every_ms = Some((30_000, 120_000));
        }
        f.rs_controller_delay_ms = (5, rng.range((50, 2_000)));
        f
    }
}
