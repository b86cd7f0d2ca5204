//! Bugs the simulation found in the engine or controller that are not fixed yet. The CI suite
//! tolerates exactly these (scenario and invariant), prints every occurrence, and a separate
//! test checks that the recorded seeds still reproduce them, so the fix is noticed: then the
//! entry is deleted and its seeds run under the strict suite like any other.

use crate::invariants::Violation;

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
pub const KNOWN: &[KnownBug] = &[];

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
