//! The canary weight a router is to give in this reconcile, as Argo decides it (first matching
//! case wins):
//!
//! 1. rolling back to stable with dynamicStableScale while the stable pods come back: the abort
//!    formula, for the previous canary;
//! 2. fully promoted: 0 (both Services now select the same pods);
//! 3. aborted: the abort formula, which is 0 without dynamicStableScale;
//! 4. no new pods available yet: 0;
//! 5. promoted in full: with dynamicStableScale the share of the new pods that is up, otherwise
//!    the weight as it was;
//! 6. the pods of the current step (or, past the last step, of all of it) not up yet: the
//!    weight of the step before, so that traffic never goes ahead of the pods (a lower weight
//!    goes at once: it needs no new pods);
//! 7. during the steps: the current step's `setWeight`;
//! 8. after the last step: all of it (`maxTrafficWeight`);
//! 9. no steps at all: 0 (traffic moves with the Service switch at promotion).

use sluice_api::rollout::CanaryStep;

use crate::steps::set_weight_at;

/// What the decision looks at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts<'a> {
    pub replicas: i32,
    pub max: i32,
    pub steps: Option<&'a [CanaryStep]>,
    pub step_index: i32,
    pub new_is_stable: bool,
    pub aborted: bool,
    pub promote_full: bool,
    pub dynamic_stable_scale: bool,
    /// Available pods of the new and the stable ReplicaSet, `None` when there is none.
    pub new_available: Option<i32>,
    pub stable_available: Option<i32>,
    /// The canary and stable ReplicaSets have the counts the current step asks for.
    pub at_desired_counts: bool,
    /// `status.canary.weights` as observed: canary weight and the hash it went to.
    pub previous_canary: Option<(i32, Option<&'a str>)>,
    pub pod_hash: &'a str,
    /// The weight a gradual abort routes now (see `gradual_abort`).
    pub gradual_abort: Option<i32>,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Desired {
    pub weight: i32,
    /// Managed (header and mirror) routes go: the update is over, aborted or starting afresh.
    pub remove_managed_routes: bool,
    /// Case 1: the weight is for the pods the previous canary ran, not the new ones.
    pub for_previous_canary: bool,
}

pub(crate) fn desired(f: &Facts<'_>) -> Desired {
    let plain = |weight| Desired {
        weight,
        remove_managed_routes: false,
        for_previous_canary: false,
    };
    let removing = |weight| Desired {
        weight,
        remove_managed_routes: true,
        for_previous_canary: false,
    };
    let previous_hash = f.previous_canary.and_then(|(_, h)| h);
    if f.new_is_stable
        && f.dynamic_stable_scale
        && previous_hash.is_some_and(|h| h != f.pod_hash)
        && f.new_available.unwrap_or(0) < f.replicas
    {
        return Desired {
            weight: abort_weight(f),
            remove_managed_routes: false,
            for_previous_canary: true,
        };
    }
    if f.new_is_stable {
        return removing(0);
    }
    if f.aborted {
        // A gradual abort holds the canary at least at its step (dynamicStableScale may hold
        // it higher while the stable pods come back).
        let gradual = f.gradual_abort.unwrap_or(0);
        return removing(gradual.max(abort_weight(f)));
    }
    if f.new_available.unwrap_or(0) == 0 {
        return removing(0);
    }
    if f.promote_full {
        let weight = if f.dynamic_stable_scale && f.replicas > 0 {
            share(f.max, f.new_available.unwrap_or(0), f.replicas).min(f.max)
        } else {
            f.previous_canary.map_or(0, |(w, _)| w)
        };
        return removing(weight);
    }
    // An empty list is no steps, as in Argo (there is no step index to be past).
    let Some(steps) = f.steps.filter(|s| !s.is_empty()) else {
        return plain(0);
    };
    let len = steps.len() as i32;
    let target = if f.step_index >= len {
        f.max
    } else {
        set_weight_at(steps, f.step_index)
    };
    if !f.at_desired_counts {
        // The pods for the new weight are not all up: traffic stays where it was. A lower
        // weight needs no new pods and goes at once (the canary keeps its pods until the
        // router has taken it, and only then shrinks to the lower count).
        return plain(set_weight_before(steps, f.step_index).min(target));
    }
    plain(target)
}

/// floor(max × available / replicas).
fn share(max: i32, available: i32, replicas: i32) -> i32 {
    (i64::from(max) * i64::from(available.max(0)) / i64::from(replicas.max(1))) as i32
}

fn ceil_count(weight: i32, replicas: i32, max: i32) -> i32 {
    let num = i64::from(weight.max(0)) * i64::from(replicas.max(0));
    let den = i64::from(max.max(1));
    ((num + den - 1) / den) as i32
}

/// The last `setWeight` strictly before `index` (0 if none).
fn set_weight_before(steps: &[CanaryStep], index: i32) -> i32 {
    if index <= 0 {
        return 0;
    }
    set_weight_at(steps, index.min(steps.len() as i32) - 1)
}

/// The weight while aborted (or rolling back) with dynamicStableScale: traffic leaves the
/// canary only as fast as the stable pods come back, and never rises again. 0 without
/// dynamicStableScale.
fn abort_weight(f: &Facts<'_>) -> i32 {
    let (Some(new_available), Some(stable_available)) = (f.new_available, f.stable_available)
    else {
        return 0;
    };
    if !f.dynamic_stable_scale || f.replicas <= 0 {
        return 0;
    }
    // The step weight the canary pods still up can carry.
    let expected_canary = f.replicas - stable_available;
    let canary_pods = expected_canary.max(new_available);
    let steps = f.steps.unwrap_or_default();
    let desired = steps
        .iter()
        .rev()
        .filter_map(|s| s.set_weight)
        .find(|&w| ceil_count(w, f.replicas, f.max) < canary_pods)
        .unwrap_or(0);
    let stable_share = share(f.max, stable_available, f.replicas);
    let expected = (f.max - stable_share).max(0);
    let Some((current, _)) = f.previous_canary else {
        return expected.max(desired);
    };
    if desired <= 0 {
        return expected.min(current);
    }
    if stable_share < f.max - desired {
        // The stable pods are still coming back: hold.
        return current;
    }
    desired.min(current)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn steps(v: serde_json::Value) -> Vec<CanaryStep> {
        serde_json::from_value(v).unwrap()
    }

    fn facts(steps: &[CanaryStep]) -> Facts<'_> {
        Facts {
            replicas: 10,
            max: 100,
            steps: Some(steps),
            step_index: 0,
            new_is_stable: false,
            aborted: false,
            promote_full: false,
            dynamic_stable_scale: false,
            new_available: Some(2),
            stable_available: Some(10),
            at_desired_counts: true,
            previous_canary: Some((0, Some("new"))),
            pod_hash: "new",
            gradual_abort: None,
        }
    }

    fn weight(f: Facts<'_>) -> i32 {
        desired(&f).weight
    }

    #[test]
    fn steps_set_the_weight_once_the_pods_are_up() {
        let s = steps(json!([{"setWeight": 20}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]));
        assert_eq!(weight(facts(&s)), 20);
        assert_eq!(
            weight(Facts {
                step_index: 1,
                ..facts(&s)
            }),
            20
        );
        // Step 3 asks for 50 but its pods are not up: the weight stays at step 1's.
        let f = Facts {
            step_index: 2,
            at_desired_counts: false,
            ..facts(&s)
        };
        assert_eq!(weight(f), 20);
        assert_eq!(
            weight(Facts {
                step_index: 2,
                ..facts(&s)
            }),
            50
        );
        assert_eq!(
            weight(Facts {
                step_index: 4,
                ..facts(&s)
            }),
            100
        );
        let f = Facts {
            step_index: 4,
            max: 1000,
            ..facts(&s)
        };
        assert_eq!(weight(f), 1000);
    }

    #[test]
    fn a_lower_weight_goes_at_once() {
        let s = steps(json!([{"setWeight": 50}, {"pause": {}}, {"setWeight": 20}, {"pause": {}}]));
        let f = Facts {
            step_index: 2,
            at_desired_counts: false,
            ..facts(&s)
        };
        assert_eq!(weight(f), 20);
    }

    #[test]
    fn before_any_set_weight_and_without_steps_it_is_zero() {
        let s = steps(json!([{"pause": {}}, {"setWeight": 50}]));
        assert_eq!(weight(facts(&s)), 0);
        assert_eq!(
            weight(Facts {
                steps: None,
                ..facts(&s)
            }),
            0
        );
        // `steps: []` written out is no steps too (live scenario seed 117): no weight before
        // the promotion's Service switch.
        assert_eq!(
            weight(Facts {
                steps: Some(&[]),
                ..facts(&s)
            }),
            0
        );
    }

    #[test]
    fn stable_aborted_and_unavailable_canary_take_traffic_away_and_remove_routes() {
        let s = steps(json!([{"setWeight": 20}]));
        for f in [
            Facts {
                new_is_stable: true,
                ..facts(&s)
            },
            Facts {
                aborted: true,
                ..facts(&s)
            },
            Facts {
                new_available: Some(0),
                ..facts(&s)
            },
            Facts {
                new_available: None,
                ..facts(&s)
            },
        ] {
            assert_eq!(
                desired(&f),
                Desired {
                    weight: 0,
                    remove_managed_routes: true,
                    for_previous_canary: false,
                },
                "{f:?}"
            );
        }
    }

    #[test]
    fn promote_full_keeps_the_weight_or_follows_the_new_pods_with_dynamic_scale() {
        let s = steps(json!([{"setWeight": 20}]));
        let f = Facts {
            promote_full: true,
            previous_canary: Some((20, Some("new"))),
            ..facts(&s)
        };
        assert_eq!(weight(f), 20);
        let f = Facts {
            dynamic_stable_scale: true,
            new_available: Some(7),
            ..f
        };
        assert_eq!(weight(f), 70);
    }

    #[test]
    fn dynamic_abort_steps_the_weight_down_as_stable_pods_return() {
        let s = steps(json!([{"setWeight": 20}, {"pause": {}}, {"setWeight": 60}, {"pause": {}}]));
        // At 60% with 6 canary pods and the stable shrunk to 4: traffic holds until stable
        // pods come back.
        let base = Facts {
            aborted: true,
            dynamic_stable_scale: true,
            step_index: 0,
            new_available: Some(6),
            stable_available: Some(4),
            previous_canary: Some((60, Some("new"))),
            ..facts(&s)
        };
        assert_eq!(weight(base), 60);
        // Stable back to 8 of 10: down to the step the remaining canary share carries.
        let f = Facts {
            stable_available: Some(8),
            ..base
        };
        assert_eq!(weight(f), 20);
        // Stable fully back: 0.
        let f = Facts {
            stable_available: Some(10),
            new_available: Some(2),
            previous_canary: Some((20, Some("new"))),
            ..f
        };
        assert_eq!(weight(f), 0);
        // Without dynamicStableScale: 0 at once.
        assert_eq!(
            weight(Facts {
                dynamic_stable_scale: false,
                ..base
            }),
            0
        );
    }

    #[test]
    fn rolling_back_to_stable_with_dynamic_scale_drains_the_previous_canary() {
        let s = steps(json!([{"setWeight": 50}]));
        let f = Facts {
            new_is_stable: true,
            dynamic_stable_scale: true,
            new_available: Some(5),
            stable_available: Some(5),
            previous_canary: Some((50, Some("old-canary"))),
            pod_hash: "stable",
            ..facts(&s)
        };
        let d = desired(&f);
        assert!(d.for_previous_canary);
        assert_eq!(d.weight, 50);
    }

    #[test]
    fn a_gradual_abort_keeps_the_weight_of_its_step() {
        let s = steps(json!([{"setWeight": 10}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]));
        let aborted = |gradual| {
            desired(&Facts {
                aborted: true,
                previous_canary: Some((50, Some("new"))),
                gradual_abort: gradual,
                ..facts(&s)
            })
        };
        assert_eq!(aborted(Some(50)).weight, 50);
        assert_eq!(aborted(Some(10)).weight, 10);
        assert!(aborted(Some(10)).remove_managed_routes);
        // Without the annotation the weight goes to 0 at once, as in Argo.
        assert_eq!(aborted(None).weight, 0);
    }
}
