//! `spec.rollbackWindow`: going back to one of the last few revisions is an emergency, not an
//! update to verify, so it skips the steps, the pauses and the analyses and promotes as soon
//! as the old pods are up again.
//!
//! The window is counted in ReplicaSets, by creation time, as Argo counts it: the update goes
//! back when the new ReplicaSet is older than the stable one, and it is within the window when
//! fewer than `revisions` ReplicaSets were created after the new one and before the stable one.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;

use super::World;

impl World<'_> {
    /// Whether this update goes back to a ReplicaSet within the rollback window.
    pub(super) fn rollback_within_window(&self) -> bool {
        let Some(revisions) = self
            .ro
            .spec
            .rollback_window
            .as_ref()
            .and_then(|w| w.revisions)
        else {
            return false;
        };
        let (Some(new_rs), Some(stable_rs)) = (self.new_rs, self.stable_rs) else {
            return false;
        };
        within_window(revisions, new_rs, stable_rs, &self.all)
    }
}

/// The rule itself. ReplicaSets without a creation time (never the case for objects read
/// from the API server) are never in a window.
fn within_window(
    revisions: i32,
    new_rs: &ReplicaSet,
    stable_rs: &ReplicaSet,
    all: &[&ReplicaSet],
) -> bool {
    if revisions <= 0 {
        return false;
    }
    let (Some(new_created), Some(stable_created)) = (created(new_rs), created(stable_rs)) else {
        return false;
    };
    if new_created >= stable_created {
        return false;
    }
    let between = all
        .iter()
        .filter_map(|rs| created(rs))
        .filter(|&t| new_created < t && t < stable_created)
        .count();
    between < revisions as usize
}

fn created(rs: &ReplicaSet) -> Option<Timestamp> {
    rs.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn rs(second: i64) -> ReplicaSet {
        let mut rs = ReplicaSet::default();
        rs.metadata.creation_timestamp = Some(Time(
            Timestamp::from_second(1_700_000_000 + second).unwrap(),
        ));
        rs
    }

    /// Revisions created at seconds 1, 2, 3, ...; `new` and `stable` index into them.
    fn window(revisions: i32, created: &[i64], new: usize, stable: usize) -> bool {
        let all: Vec<ReplicaSet> = created.iter().map(|&s| rs(s)).collect();
        let refs: Vec<&ReplicaSet> = all.iter().collect();
        within_window(revisions, &all[new], &all[stable], &refs)
    }

    #[test]
    fn back_to_the_previous_revision_is_within_a_window_of_one() {
        assert!(window(1, &[1, 2], 0, 1));
    }

    #[test]
    fn counts_the_replica_sets_created_in_between() {
        // two (1), three (2), four (3): back from four to two skips one ReplicaSet.
        assert!(window(2, &[1, 2, 3], 0, 2));
        // two .. five: back from five to two skips two, not fewer than 2.
        assert!(!window(2, &[1, 2, 3, 4], 0, 3));
        assert!(window(3, &[1, 2, 3, 4], 0, 3));
    }

    #[test]
    fn forward_or_same_age_is_never_a_rollback() {
        assert!(!window(5, &[1, 2], 1, 0));
        assert!(!window(5, &[1, 1], 0, 1));
    }

    #[test]
    fn no_window_without_positive_revisions() {
        assert!(!window(0, &[1, 2], 0, 1));
        assert!(!window(-1, &[1, 2], 0, 1));
    }

    #[test]
    fn replica_sets_without_creation_time_are_not_in_a_window() {
        let (a, b) = (ReplicaSet::default(), rs(2));
        assert!(!within_window(3, &a, &b, &[&a, &b]));
    }
}
