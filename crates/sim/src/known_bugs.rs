//! Bugs the simulation found in the engine or controller that are not fixed yet. The CI suite
//! tolerates exactly these (scenario and invariant), prints every occurrence, and a separate
//! test checks that the recorded seeds still reproduce them, so the fix is noticed: then the
//! entry is deleted and its seeds run under the strict suite like any other.

use crate::invariants::{
    AVAILABILITY, FINAL_PHASE, SCALED_DOWN, TRAFFIC_WAITS_FOR_PODS, Violation,
};

#[derive(Debug, Clone, Copy)]
pub struct KnownBug {
    pub scenario: &'static str,
    pub invariant: &'static str,
    /// The bug fires so often that the scenario is left out of the CI suite altogether;
    /// otherwise only violations of `invariant` are tolerated there.
    pub whole_scenario: bool,
    /// Seeds that reproduce it.
    pub seeds: &'static [u64],
    pub summary: &'static str,
}

/// Fixed bugs leave this list; their seeds become regression tests in `tests/known_bugs.rs`.
pub const KNOWN: &[KnownBug] = &[
    KnownBug {
        scenario: "istio-host-split",
        invariant: TRAFFIC_WAITS_FOR_PODS,
        whole_scenario: false,
        seeds: &[1, 2, 4],
        summary: "past the last step the router is given maxTrafficWeight while the canary \
                  ReplicaSet is still sized for the last setWeight: the engine's weight decision \
                  (`reconcile/traffic/weight.rs`) returns `max` for a step index past the steps \
                  before it looks at `at_desired_counts`; Argo keeps the last setWeight until the \
                  canary has its desired count",
    },
    KnownBug {
        scenario: "istio-host-split-dynamic-stable-scale",
        invariant: TRAFFIC_WAITS_FOR_PODS,
        whole_scenario: false,
        seeds: &[1, 14, 38],
        summary: "as in istio-host-split past the last step (seed 1); after an abort the stable's \
                  weight is raised from the availableReplicas of a stable ReplicaSet whose \
                  spec.replicas was just lowered (seed 14); when a newer revision supersedes the \
                  canary, the canary Service is switched to the new ReplicaSet while the \
                  VirtualService still gives the canary the previous revision's weight (seed 38)",
    },
    KnownBug {
        scenario: "istio-host-split-dynamic-stable-scale",
        invariant: AVAILABILITY,
        whole_scenario: false,
        seeds: &[2, 4, 7],
        summary: "with dynamicStableScale the stable is scaled to 0 as soon as the router takes \
                  100% past the last step, before the canary's pods for 100% are up (a \
                  consequence of the weight decision of istio-host-split's entry)",
    },
    KnownBug {
        scenario: "istio-weight-steps-down",
        invariant: FINAL_PHASE,
        whole_scenario: false,
        seeds: &[2, 4, 7],
        summary: "a setWeight below the weight routed now (50% then 20%) never completes: the \
                  scale-down floor keeps the canary at the pods 50% needs, the step waits for the \
                  canary to be at its 20% count before the router is given 20%, and the update \
                  times out (ProgressDeadlineExceeded)",
    },
    KnownBug {
        scenario: "istio-weight-steps-down",
        invariant: SCALED_DOWN,
        whole_scenario: false,
        seeds: &[2, 4, 7],
        summary: "the canary ReplicaSet of the update stuck at the lower setWeight (see the \
                  final-phase entry) keeps its pods",
    },
    KnownBug {
        scenario: "istio-weight-steps-down",
        invariant: TRAFFIC_WAITS_FOR_PODS,
        whole_scenario: false,
        seeds: &[1, 11, 16],
        summary: "as in istio-host-split: past the last step the router is given \
                  maxTrafficWeight before the canary has its pods",
    },
];

/// A known bug that keeps a whole scenario out of the CI suite.
pub fn excluded(scenario: &str) -> Option<&'static KnownBug> {
    KNOWN
        .iter()
        .find(|b| b.scenario == scenario && b.whole_scenario)
}

/// The known bug a violation is an instance of, if any.
pub fn known(scenario: &str, v: &Violation) -> Option<&'static KnownBug> {
    KNOWN
        .iter()
        .find(|b| b.scenario == scenario && !b.whole_scenario && b.invariant == v.invariant)
}
