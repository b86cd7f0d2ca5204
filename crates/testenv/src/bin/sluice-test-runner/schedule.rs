//! Which test binaries may run beside which, and in what order: pure, so that the rules are
//! unit-tested apart from the processes.
//!
//! Most binaries share the local control plane safely: each test makes namespaces of its own
//! and runs its controllers scoped to them. The exceptions are listed here with the reason;
//! a new test that changes something cluster-wide, binds a fixed port or holds a timing bound
//! that a loaded machine breaks belongs in this table.

use std::collections::BTreeMap;

/// How a binary shares the machine with others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// One slot, beside anything.
    Slot,
    /// Two slots: heavy on the API server, beside at most one other binary.
    Heavy,
    /// Every slot: nothing else runs while it does.
    Alone,
}

/// A binary's rule: its sharing, and the group of binaries it takes turns with (never two of a
/// group at once), if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub sharing: Sharing,
    pub group: Option<&'static str>,
}

const SLOT: Rule = Rule {
    sharing: Sharing::Slot,
    group: None,
};

const ALONE: Rule = Rule {
    sharing: Sharing::Alone,
    group: None,
};
const HEAVY: Rule = Rule {
    sharing: Sharing::Heavy,
    group: None,
};
/// One slot, in turns with the rest of the group.
const INSTALL: Rule = Rule {
    sharing: Sharing::Slot,
    group: Some("argo-rollouts-install"),
};

/// The exceptions, by test target name (a file of `tests/`, or a crate's unit tests).
#[rustfmt::skip]
const RULES: &[(&str, Rule, &str)] = &[
    ("install_over_argo", ALONE,
     "applies Argo's namespace install, CRDs included: other tests' Rollouts would meet Argo's schemas"),
    ("leader_election", ALONE, "lease timings of seconds, which a loaded machine stretches"),
    ("argo_leases_with_an_instance_id", ALONE,
     "lease timings of seconds, which a loaded machine stretches"),
    ("stops_on_sigterm", ALONE, "times the controller's shutdown in each state"),
    ("control_plane_faults", HEAVY,
     "runs a second control plane of its own and bounds its recovery from each fault"),
    ("changes_a_watch_missed_are_seen_by_its_list", ALONE,
     "Rollouts that must all observe a change within 30 s of a cut: 600 of them beside two others, 87 missed 60 s"),
    ("drop_in", INSTALL,
     "installs the chart's and install.yaml's cluster objects named argo-rollouts"),
    ("documented_install_commands", INSTALL,
     "creates and removes the argo-rollouts namespace and install.yaml's cluster objects"),
    ("analysis_providers", INSTALL, "keeps profile Secrets in the argo-rollouts namespace"),
    ("least_privilege", INSTALL, "binds the install's ClusterRoles"),
];

/// The rule of the test target `name`.
pub fn rule(name: &str) -> Rule {
    RULES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or(SLOT, |(_, r, _)| *r)
}

/// The exceptions with their reasons, for `--rules`.
pub fn exceptions() -> impl Iterator<Item = (&'static str, Rule, &'static str)> {
    RULES.iter().copied()
}

/// Slots a binary takes out of `jobs`.
pub fn slots(sharing: Sharing, jobs: usize) -> usize {
    match sharing {
        Sharing::Slot => 1,
        Sharing::Heavy => 2.min(jobs),
        Sharing::Alone => jobs,
    }
}

/// The order binaries start in: those that run alone first and the heavy ones next (they
/// wait for free slots, which are free at the start), then the longest first by the last
/// run's durations, a binary without one before those with (a new test is likely an
/// end-to-end one), then by name.
pub fn order(names: &[String], last: &BTreeMap<String, f64>) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..names.len()).collect();
    idx.sort_by(|&a, &b| {
        let rank = |i: usize| match rule(&names[i]).sharing {
            Sharing::Alone => 0,
            Sharing::Heavy => 1,
            Sharing::Slot => 2,
        };
        let took = |i: usize| last.get(&names[i]).copied().unwrap_or(f64::INFINITY);
        rank(a)
            .cmp(&rank(b))
            .then(took(b).total_cmp(&took(a)))
            .then(names[a].cmp(&names[b]))
    });
    idx
}

/// The next binary to start out of `pending` (in start order), with `running` the rules of
/// those running: the first that fits in the free slots and whose group is not running. One
/// that needs more than a slot is never overtaken: while it waits for slots to free, nothing
/// starts (otherwise binaries of one slot would keep taking them, and a heavy binary started
/// early for its length would run last).
pub fn next(pending: &[Rule], running: &[Rule], jobs: usize) -> Option<usize> {
    let used: usize = running.iter().map(|r| slots(r.sharing, jobs)).sum();
    let free = jobs.saturating_sub(used);
    for (i, r) in pending.iter().enumerate() {
        let fits = slots(r.sharing, jobs) <= free;
        let turn = r.group.is_none() || running.iter().all(|o| o.group != r.group);
        if fits && turn {
            return Some(i);
        }
        if !fits && r.sharing != Sharing::Slot {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUPED: Rule = Rule {
        sharing: Sharing::Slot,
        group: Some("g"),
    };

    #[test]
    fn slots_fill_up_to_the_jobs() {
        assert_eq!(next(&[SLOT, SLOT], &[SLOT, SLOT], 3), Some(0));
        assert_eq!(next(&[SLOT], &[SLOT, SLOT, SLOT], 3), None);
        assert_eq!(next(&[SLOT, HEAVY], &[SLOT, SLOT], 3), Some(0));
        assert_eq!(next(&[HEAVY], &[SLOT], 3), Some(0));
        assert_eq!(next(&[SLOT], &[HEAVY], 3), Some(0));
        assert_eq!(next(&[HEAVY], &[HEAVY], 3), None);
        // With one job, a heavy binary still runs.
        assert_eq!(next(&[HEAVY], &[], 1), Some(0));
    }

    #[test]
    fn a_binary_of_several_slots_waits_for_them_and_is_not_overtaken() {
        assert_eq!(next(&[HEAVY, SLOT], &[SLOT, SLOT], 3), None);
        assert_eq!(next(&[HEAVY, SLOT], &[SLOT], 3), Some(0));
        assert_eq!(next(&[ALONE, SLOT], &[SLOT], 3), None);
        assert_eq!(next(&[ALONE, SLOT], &[], 3), Some(0));
        assert_eq!(next(&[SLOT], &[ALONE], 3), None);
    }

    #[test]
    fn a_group_takes_turns() {
        assert_eq!(next(&[GROUPED, SLOT], &[GROUPED], 3), Some(1));
        assert_eq!(next(&[GROUPED], &[SLOT], 3), Some(0));
    }

    #[test]
    fn alone_first_heavy_next_then_the_longest_then_unknown_before_known() {
        let names: Vec<String> = [
            "canary",
            "fresh",
            "control_plane_faults",
            "leader_election",
            "analysis",
            "unit",
        ]
        .map(String::from)
        .to_vec();
        let last = BTreeMap::from([
            ("canary".to_string(), 95.0),
            ("analysis".to_string(), 47.0),
            ("unit".to_string(), 0.5),
            ("leader_election".to_string(), 22.0),
        ]);
        let order: Vec<&str> = order(&names, &last)
            .into_iter()
            .map(|i| names[i].as_str())
            .collect();
        assert_eq!(
            order,
            [
                "leader_election",
                "control_plane_faults",
                "fresh",
                "canary",
                "analysis",
                "unit"
            ]
        );
    }

    #[test]
    fn every_exception_names_a_reason() {
        for (name, _, why) in exceptions() {
            assert!(!why.is_empty(), "{name}");
        }
    }
}
