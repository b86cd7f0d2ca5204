//! Replica arithmetic for canary rollouts.
//!
//! Pure integer functions: given the desired weight and what the ReplicaSets have now, how many
//! replicas should the canary (new) and stable ReplicaSets be scaled to in this reconcile? The
//! numbers must be those Argo Rollouts computes, because users read replica counts off
//! dashboards and tests; the table tests at the bottom hold Argo's published cases.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::rollout::CanaryStrategy;

use crate::steps;

/// Default for `maxSurge` and `maxUnavailable`: the string "25", which Kubernetes reads as 25%.
pub const DEFAULT_MAX_SURGE: &str = "25%";
pub const DEFAULT_MAX_UNAVAILABLE: &str = "25%";

/// Spec and available replicas of one ReplicaSet, as the arithmetic sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RsCounts {
    pub spec: i32,
    pub available: i32,
}

impl RsCounts {
    pub fn new(spec: i32, available: i32) -> Self {
        Self { spec, available }
    }

    /// Replicas that count towards availability when deciding how far we may scale down.
    /// With `ignore_availability` the spec count is taken (pods we are about to remove anyway).
    fn for_scale_down(self, ignore_availability: bool) -> i32 {
        if ignore_availability {
            self.spec
        } else {
            self.available.min(self.spec)
        }
    }
}

/// Error for an int-or-percent value that is not a number or a percentage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?}: must be an integer or a percentage like \"25%\"")]
pub struct InvalidIntOrPercent {
    pub value: String,
}

/// Resolves an int-or-percent against `total`, like Kubernetes' `GetScaledValueFromIntOrPercent`:
/// any string is a percentage (with or without the `%`), rounded up or down as asked.
pub fn scaled_value(
    value: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, InvalidIntOrPercent> {
    match value {
        IntOrString::Int(v) => Ok(*v),
        IntOrString::String(s) => {
            let digits = s.trim().trim_end_matches('%');
            let pct: i64 = digits
                .parse()
                .map_err(|_| InvalidIntOrPercent { value: s.clone() })?;
            let product = pct * i64::from(total);
            let v = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            i32::try_from(v).map_err(|_| InvalidIntOrPercent { value: s.clone() })
        }
    }
}

/// Resolved surge and unavailability limits for a given replica count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SurgeLimits {
    pub max_surge: i32,
    pub max_unavailable: i32,
}

/// Resolves `maxSurge` (rounded up) and `maxUnavailable` (rounded down). If both come out 0,
/// unavailability is forced to 1 so that a rollout can always make progress; it never exceeds
/// the replica count.
pub fn resolve_surge_limits(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    replicas: i32,
) -> Result<SurgeLimits, InvalidIntOrPercent> {
    let default_surge = IntOrString::String(DEFAULT_MAX_SURGE.into());
    let default_unavailable = IntOrString::String(DEFAULT_MAX_UNAVAILABLE.into());
    let surge = scaled_value(max_surge.unwrap_or(&default_surge), replicas, true)?.max(0);
    let mut unavailable = scaled_value(
        max_unavailable.unwrap_or(&default_unavailable),
        replicas,
        false,
    )?
    .max(0);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok(SurgeLimits {
        max_surge: surge,
        max_unavailable: unavailable.min(replicas.max(0)),
    })
}

/// The canary/stable split closest to `weight` (out of `max_weight`) using `replicas` pods, or
/// `replicas + 1` when surge allows one extra pod, chosen as Argo chooses it: the candidates
/// are the weighted count rounded up and down (both computed for `replicas`) over `replicas`,
/// then over `replicas + 1`, in that order, and the first one closest to the weight wins (so a
/// tie goes to the split without surge, and between the two roundings of one total, which tie
/// only when the fraction is one half, to the larger canary). For a weight strictly between 0
/// and max, neither side may be 0 once there are at least two pods to share. The distances are
/// computed in floating point as Argo computes them, so that near-ties fall the same way.
/// Returns `(canary, stable)`.
pub fn approximate_weighted_counts(
    replicas: i32,
    weight: i32,
    max_weight: i32,
    max_surge: i32,
) -> (i32, i32) {
    if replicas <= 0 {
        return (0, 0);
    }
    let max_weight = max_weight.max(1);
    let weight = weight.clamp(0, max_weight);
    let exact = f64::from(replicas.saturating_mul(weight)) / f64::from(max_weight);
    let (ceil, floor) = (exact.ceil() as i32, exact.floor() as i32);
    // The weighted count over `total` lies exactly half-way between two counts.
    let tied = |total: i32| {
        (f64::from(total) * (f64::from(weight) / f64::from(max_weight))).fract() == 0.5
    };
    let zero_allowed = weight == max_weight || weight == 0 || (replicas == 1 && max_surge == 0);
    let mut options = Vec::with_capacity(4);
    if ceil < replicas || zero_allowed {
        options.push((ceil, replicas));
    }
    if !tied(replicas) && (floor != 0 || zero_allowed) {
        options.push((floor, replicas));
    }
    if max_surge > 0 {
        options.push((ceil, replicas + 1));
        if !tied(replicas + 1) && (floor != 0 || zero_allowed) {
            options.push((floor, replicas + 1));
        }
    }
    let delta = |(canary, total): (i32, i32)| {
        (f64::from(canary.saturating_mul(max_weight)) / f64::from(total) - f64::from(weight)).abs()
    };
    let mut best = match options.first() {
        Some(first) => *first,
        None => return (0, replicas),
    };
    for option in options.into_iter().skip(1) {
        if delta(option) < delta(best) {
            best = option;
        }
    }
    (best.0, best.1 - best.0)
}

/// Inputs of the basic (replica-weighted, no traffic router) canary calculation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BasicCanaryInputs {
    pub replicas: i32,
    /// Desired canary weight 0..=100 (100 when fully promoted).
    pub weight: i32,
    pub limits: SurgeLimits,
    pub new_rs: Option<RsCounts>,
    pub stable_rs: Option<RsCounts>,
    /// The new ReplicaSet is the stable one (nothing to roll).
    pub new_is_stable: bool,
    /// Sum of spec replicas of all other (older) ReplicaSets.
    pub other_spec_total: i32,
}

/// Target spec replicas for this reconcile: `(canary, stable)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanaryCounts {
    pub canary: i32,
    pub stable: i32,
}

/// Basic canary: move towards the weighted split one safe step at a time.
///
/// Scale-up spends the surge headroom (stable first, so capacity is never lost, then canary).
/// Scale-down is allowed only once older ReplicaSets are gone and only as far as availability
/// above `replicas - maxUnavailable` permits. While the canary grows, the stable's availability is
/// not relied upon (it is going away); while it shrinks (abort), the canary's is not.
pub fn basic_canary_counts(i: BasicCanaryInputs) -> CanaryCounts {
    let r = i.replicas.max(0);
    let stable_rs = match (i.stable_rs, i.new_rs) {
        (Some(stable_rs), _) if !i.new_is_stable => stable_rs,
        // Nothing to share the pods with: the new ReplicaSet heads for all of them, within
        // the surge and after older ReplicaSets are gone.
        (_, Some(new_rs)) => return sole_counts(&i, new_rs),
        (_, None) => {
            return CanaryCounts {
                canary: r,
                stable: 0,
            };
        }
    };
    let new_rs = i.new_rs.unwrap_or_default();
    let (desired_canary, desired_stable) =
        approximate_weighted_counts(r, i.weight, 100, i.limits.max_surge);

    let mut canary = new_rs.spec;
    let mut stable = stable_rs.spec;
    let max_total = r + i.limits.max_surge;

    let mut headroom = max_total - (canary + stable + i.other_spec_total);
    if headroom > 0 {
        if stable < desired_stable {
            let add = headroom.min(desired_stable - stable);
            stable += add;
            headroom -= add;
        }
        if canary < desired_canary {
            canary = desired_canary.min(canary + headroom);
        }
    }

    if i.other_spec_total > 0 {
        // Older ReplicaSets go first; keep canary and stable where they are.
        return CanaryCounts { canary, stable };
    }

    let min_available = r - i.limits.max_unavailable;
    let increasing = desired_canary >= new_rs.spec;
    let counted = new_rs.for_scale_down(!increasing) + stable_rs.for_scale_down(increasing);
    if counted <= min_available {
        return CanaryCounts { canary, stable };
    }
    let scale_down = counted - min_available;

    if increasing {
        let (s, c) = scale_down_then_fit(
            Side {
                rs: stable_rs,
                target: stable,
                desired: desired_stable,
            },
            Side {
                rs: new_rs,
                target: canary,
                desired: desired_canary,
            },
            scale_down,
            max_total,
            min_available,
        );
        CanaryCounts {
            canary: c,
            stable: s,
        }
    } else {
        let (c, s) = scale_down_then_fit(
            Side {
                rs: new_rs,
                target: canary,
                desired: desired_canary,
            },
            Side {
                rs: stable_rs,
                target: stable,
                desired: desired_stable,
            },
            scale_down,
            max_total,
            min_available,
        );
        CanaryCounts {
            canary: c,
            stable: s,
        }
    }
}

/// The new ReplicaSet alone: there is no stable one, or it is the stable one. It grows into
/// the surge headroom that older ReplicaSets leave; once they are gone it shrinks (to a lower
/// `spec.replicas`) no faster than availability allows. When it is the stable one, Argo counts
/// its pods on both sides of the availability sum, and so does this, for the same numbers.
fn sole_counts(i: &BasicCanaryInputs, new_rs: RsCounts) -> CanaryCounts {
    let r = i.replicas.max(0);
    let max_total = r + i.limits.max_surge;
    let mut canary = new_rs.spec;
    let headroom = max_total - (new_rs.spec + i.other_spec_total);
    if headroom > 0 && canary < r {
        canary = r.min(canary + headroom);
    }
    let done = CanaryCounts { canary, stable: 0 };
    if i.other_spec_total > 0 {
        return done;
    }
    let min_available = r - i.limits.max_unavailable;
    let increasing = r >= new_rs.spec;
    let mut counted = new_rs.for_scale_down(!increasing);
    if i.new_is_stable {
        counted += new_rs.for_scale_down(increasing);
    }
    if increasing || counted <= min_available {
        return done;
    }
    let scale_down = counted - min_available;
    if new_rs.spec > r {
        canary = r.max(new_rs.spec - scale_down);
    }
    if i.new_is_stable {
        // The pair (new, stable) is the same ReplicaSet: the stable side starts at nothing,
        // gives back what surges, and the new side gives up what still does.
        let over = (canary - max_total).max(0);
        let mut other = -over;
        let available = new_rs.available.min(canary) + new_rs.available.min(other);
        let lost = (new_rs.available - other).max(0);
        other += lost.min((min_available - available).max(0));
        canary -= (other + canary - max_total).max(0);
    }
    CanaryCounts { canary, stable: 0 }
}

#[derive(Debug, Clone, Copy)]
struct Side {
    rs: RsCounts,
    target: i32,
    desired: i32,
}

/// Scales `shrinking` down towards its desired count within `budget`, then brings the pair
/// within the surge limit: `other` gives up the excess first, but keeps back the available pods
/// that `min_available` needs; whatever excess remains comes off `shrinking` (whose
/// availability the budget did not count on). The pair never stays above `max_total`, also
/// after `spec.replicas` was lowered in the middle of an update. Returns `(shrinking, other)`.
fn scale_down_then_fit(
    shrinking: Side,
    other: Side,
    budget: i32,
    max_total: i32,
    min_available: i32,
) -> (i32, i32) {
    let mut a = shrinking.target;
    if shrinking.rs.spec > shrinking.desired {
        a = (shrinking.rs.spec - budget).max(shrinking.desired);
    }
    let over = (a + other.target - max_total).max(0);
    let mut b = other.target - over;
    let available = shrinking.rs.available.min(a) + other.rs.available.min(b);
    // The available pods of `other` that trimming it took away, as far as availability needs
    // them back.
    let lost = (other.rs.available - b).max(0);
    let needed = (min_available - available).max(0);
    b += lost.min(needed);
    let still_over = (a + b - max_total).max(0);
    a -= still_over;
    (a.max(0), b.max(0))
}

/// Inputs of the traffic-routed canary calculation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutedCanaryInputs {
    pub replicas: i32,
    /// The canary weight the counts follow: the current step's `setWeight`, or while aborted
    /// with dynamicStableScale the weight traffic is stepping down through.
    pub weight: i32,
    pub max_weight: i32,
    /// `setCanaryScale.replicas` in force, if any.
    pub canary_scale_replicas: Option<i32>,
    /// `setCanaryScale.weight` in force, if any (not capped: 200% of 4 is 8).
    pub canary_scale_weight: Option<i32>,
    /// `setCanaryScale.matchTrafficWeight: true` cancels the explicit scale.
    pub match_traffic_weight: bool,
    pub promote_full: bool,
    pub aborted: bool,
    /// `abortScaleDownDelaySeconds` is explicitly 0: keep the canary up after an abort.
    pub keep_canary_on_abort: bool,
    pub min_pods_per_replica_set: Option<i32>,
    /// `dynamicStableScale`: the stable shrinks as traffic leaves it.
    pub dynamic_stable_scale: bool,
    /// `status.canary.weights` (canary, stable) as last recorded: with dynamicStableScale the
    /// stable keeps what its recorded weight needs, and an aborted canary what its weight
    /// still needs, until the router has moved the traffic.
    pub previous_weights: Option<(i32, i32)>,
}

/// Traffic-routed canary. Without dynamicStableScale the stable stays at full size and the
/// canary is sized to the weight (or the explicit `setCanaryScale`); with it, the stable is
/// sized to the larger of its new and its recorded weight. Non-zero counts are raised to
/// `minPodsPerReplicaSet`, except an explicit replica count and the stable count without
/// dynamicStableScale.
pub fn routed_canary_counts(i: RoutedCanaryInputs) -> CanaryCounts {
    let r = i.replicas.max(0);
    let max = i64::from(i.max_weight.max(1));
    let count = |w: i32| ceil_div(i64::from(w.max(0)) * i64::from(r), max);
    // The minimum is capped at the Rollout's replicas, as in Argo 1.10 (1.9 was not, and
    // went on resizing such a canary).
    let floor = |n: i32| match i.min_pods_per_replica_set {
        Some(min) if n > 0 => n.max(min.min(r)),
        _ => n,
    };
    let explicit = !i.match_traffic_weight && (!i.aborted || i.keep_canary_on_abort);
    let mut canary = if i.promote_full {
        floor(r)
    } else if let (true, Some(n)) = (explicit, i.canary_scale_replicas) {
        if i.dynamic_stable_scale {
            floor(n.max(0))
        } else {
            n.max(0)
        }
    } else if let (true, Some(w)) = (explicit, i.canary_scale_weight) {
        floor(count(w))
    } else if i.aborted && !i.dynamic_stable_scale {
        0
    } else {
        floor(count(i.weight))
    };
    // Without dynamicStableScale the stable stays at the Rollout's replicas, minimum or not.
    let mut stable = if i.dynamic_stable_scale { floor(r) } else { r };
    if i.dynamic_stable_scale {
        if i.aborted {
            // Back to stable: the stable grows to full at once (growing is always safe), the
            // canary keeps what its recorded weight needs until the router has moved it.
            if let Some((c, _)) = i.previous_weights {
                canary = canary.max(floor(count(c)));
            }
        } else {
            // The weight the canary is sized for, as Argo takes it: all of it on a full
            // promotion, none under an explicit replica count (the stable stays whole), an
            // explicit scale weight, or the step's weight.
            let sized_for = if i.promote_full {
                i.max_weight
            } else if let (true, Some(_)) = (explicit, i.canary_scale_replicas) {
                0
            } else if let (true, Some(w)) = (explicit, i.canary_scale_weight) {
                w
            } else {
                i.weight
            };
            let left = i.max_weight - sized_for;
            // A scale weight above the maximum leaves the stable less than no weight: as in
            // Argo, the count is rounded up toward zero, the recorded weight's count replaces
            // it when larger, and a count below zero is raised to the minimum when there is
            // one; never below zero here (Argo's write of it would be refused).
            let wanted = i64::from(left) * i64::from(r);
            let mut n = i32::try_from(-((-wanted).div_euclid(max))).unwrap_or(0);
            if let Some((_, s)) = i.previous_weights {
                n = n.max(count(s));
            }
            stable = match n {
                0 => 0,
                n if n < 0 => i
                    .min_pods_per_replica_set
                    .map_or(0, |min| min.min(r).max(0)),
                n => floor(n),
            };
        }
    }
    CanaryCounts { canary, stable }
}

/// Where a traffic-routed canary stands, as its counts need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutedPosition {
    pub replicas: i32,
    /// `status.currentStepIndex` (0 when unset).
    pub step_index: i32,
    pub aborted: bool,
    /// The weight while aborted (with dynamicStableScale, the one traffic is stepping down
    /// through; see `reconcile/traffic/weight.rs`).
    pub abort_weight: i32,
    /// All of the new pods are wanted: `promote --full`, a rollback within the window, the
    /// new pods already stable, or no stable ReplicaSet yet.
    pub promote_full: bool,
    /// `status.canary.weights` (canary, stable) as last recorded.
    pub previous_weights: Option<(i32, i32)>,
}

/// [`routed_canary_counts`] of `canary` at position `p`: the weight of the current step (the
/// router's maximum once past the steps), the `setCanaryScale` in force within the steps.
pub fn routed_canary_counts_at(canary: &CanaryStrategy, p: RoutedPosition) -> CanaryCounts {
    let max = canary
        .traffic_routing
        .clone()
        .unwrap_or_default()
        .max_traffic_weight();
    let all_steps = steps::steps(canary);
    let upto = usize::try_from(p.step_index.saturating_add(1))
        .unwrap_or(0)
        .min(all_steps.len());
    let scale = all_steps[..upto]
        .iter()
        .rev()
        .find_map(|s| s.set_canary_scale.clone());
    let in_steps = p.step_index < all_steps.len() as i32;
    let weight = if p.aborted {
        p.abort_weight
    } else if !in_steps {
        max
    } else {
        steps::set_weight_at(all_steps, p.step_index)
    };
    routed_canary_counts(RoutedCanaryInputs {
        replicas: p.replicas,
        weight,
        max_weight: max,
        canary_scale_replicas: scale.as_ref().filter(|_| in_steps).and_then(|s| s.replicas),
        canary_scale_weight: scale.as_ref().filter(|_| in_steps).and_then(|s| s.weight),
        match_traffic_weight: scale
            .as_ref()
            .is_some_and(|s| s.match_traffic_weight == Some(true)),
        promote_full: p.promote_full,
        aborted: p.aborted,
        keep_canary_on_abort: canary.abort_scale_down_delay_seconds == Some(0),
        min_pods_per_replica_set: canary.min_pods_per_replica_set,
        dynamic_stable_scale: canary.dynamic_stable_scale == Some(true),
        previous_weights: p.previous_weights,
    })
}

fn ceil_div(num: i64, den: i64) -> i32 {
    let v = (num + den - 1).div_euclid(den);
    i32::try_from(v).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
