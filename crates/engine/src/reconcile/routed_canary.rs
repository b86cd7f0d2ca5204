//! ReplicaSet sizes of a traffic-routed canary (Argo's arithmetic with a router):
//!
//! - the canary is sized to the current step's weight (or `setCanaryScale`) before the router
//!   sends it that weight; the stable stays full, or with dynamicStableScale shrinks only
//!   after the router recorded its lower weight;
//! - after an abort the canary keeps its pods for `abortScaleDownDelaySeconds` (30 s) once
//!   the stable is fully available, as traffic is already back on stable;
//! - after promotion the previous stable keeps its pods for `scaleDownDelaySeconds` (30 s),
//!   so that clients and proxies still holding it drain; a superseded intermediate canary
//!   goes at once.
//!
//! On top of all that, `World::scale_with` never takes a ReplicaSet below what the weight
//! read back from the router objects gives it (see `traffic`), and a gradual abort keeps the
//! canary whole until the routers give it nothing.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use sluice_api::rollout::RolloutStatus;

use super::{Update, World};
use crate::labels::SCALE_DOWN_DEADLINE;
use crate::observed::ReplicaSetExt;
use crate::plan::{Event, Plan};
use crate::replicas::{self, CanaryCounts, RoutedPosition};

/// Default `scaleDownDelaySeconds` and `abortScaleDownDelaySeconds` with a router.
const DEFAULT_DELAY: i32 = 30;

impl World<'_> {
    /// The counts the canary and stable ReplicaSets are to have in this reconcile.
    pub(super) fn routed_counts(
        &self,
        status: &RolloutStatus,
        u: &Update,
        abort_weight: i32,
        previous_weights: Option<(i32, i32)>,
    ) -> CanaryCounts {
        let promote_full = status.promote_full == Some(true)
            || u.rollback_window
            || u.new_is_stable
            || status.stable_rs.is_none();
        replicas::routed_canary_counts_at(
            self.spec.canary(),
            RoutedPosition {
                replicas: self.spec.replicas,
                step_index: status.current_step_index.unwrap_or(0),
                aborted: u.aborted,
                abort_weight,
                promote_full,
                previous_weights,
            },
        )
    }

    /// Whether the ReplicaSets have the counts the current step asks for: the new one its
    /// desired pods available (by `replicaProgressThreshold`), and without dynamicStableScale
    /// the stable one settled at its size.
    pub(super) fn routed_at_desired(&self, counts: &CanaryCounts) -> bool {
        let dynamic = self.spec.canary().dynamic_stable_scale == Some(true);
        let new_ok = self.new_rs.is_some_and(|rs| {
            rs.status_is_current()
                && rs.spec_replicas() == counts.canary
                && rs.available_replicas() >= self.progress_threshold(counts.canary)
        });
        let stable_ok = dynamic
            || self.stable_rs.is_none_or(|rs| {
                rs.spec_replicas() == counts.stable && rs.status_replicas() == counts.stable
            });
        new_ok && stable_ok
    }

    /// Sizes the ReplicaSets of a routed canary: stable first, then new, then the others.
    /// Returns whether it scaled.
    pub(super) fn size_routed_canary(
        &mut self,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        counts: &CanaryCounts,
    ) -> bool {
        let canary = self.spec.canary();
        let abort_delay = canary
            .abort_scale_down_delay_seconds
            .unwrap_or(DEFAULT_DELAY);
        let dynamic = canary.dynamic_stable_scale == Some(true);
        // Argo holds an aborted canary for the delay only without dynamic scaling (which
        // drains it step by step instead).
        let delay_abort = u.aborted && self.stable_rs.is_some() && abort_delay != 0 && !dynamic;
        let mut scaled = false;
        if let Some(stable) = self.stable_rs
            && !u.new_is_stable
        {
            let rev = stable.revision().unwrap_or(0);
            let extra = clear_deadline(stable);
            scaled |= self.scale_with(plan, events, stable, counts.stable, rev, extra);
        }
        match self.new_rs {
            None => {
                let anti = canary.anti_affinity.as_ref().zip(self.stable_hash());
                let scale_up = self.create_new_replica_set(
                    plan,
                    events,
                    u.revision,
                    counts.canary,
                    anti,
                    u.new_is_stable,
                );
                // Created at 0 (a first step at weight 0) is no scaling, as in Argo.
                events.extend((counts.canary > 0).then_some(scale_up));
                scaled = true;
            }
            // A gradual abort keeps every canary pod until the router reads back weight 0.
            Some(_)
                if u.aborted
                    && self.spec.gradual_abort.is_some()
                    && self.routed_canary_weight > 0 => {}
            Some(rs) if delay_abort => {
                let stable_full = self
                    .stable_rs
                    .is_some_and(|s| s.available_replicas() >= self.spec.replicas);
                if rs.spec_replicas() > 0
                    && (rs.annotation(SCALE_DOWN_DEADLINE).is_some() || stable_full)
                {
                    scaled |= self.scale_down_after(plan, events, rs, abort_delay);
                }
            }
            Some(rs) => {
                let extra = clear_deadline(rs);
                scaled |= self.scale_with(plan, events, rs, counts.canary, u.revision, extra);
            }
        }
        scaled |= self.scale_down_older_routed(status, plan, events, u);
        self.clean_up_history(plan);
        if !u.aborted {
            scaled |= self.restart(status, plan);
        }
        scaled
    }

    /// ReplicaSets that are neither new nor stable: a superseded intermediate canary goes at
    /// once (as fast as availability allows); the previous stable, once the new one is
    /// promoted, after `scaleDownDelaySeconds` (at most `scaleDownDelayRevisionLimit` of them
    /// waiting, newest first), or at once with dynamicStableScale. Anything still selected by
    /// a Service, a DestinationRule subset or the recorded weights waits another reconcile.
    fn scale_down_older_routed(
        &self,
        status: &RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
    ) -> bool {
        if !self.targets_registered(plan, events) {
            return false;
        }
        let canary = self.spec.canary();
        let delay = canary.scale_down_delay_seconds.unwrap_or(DEFAULT_DELAY);
        let dynamic = canary.dynamic_stable_scale == Some(true);
        let referenced = self.referenced_hashes(status);
        let mut older: Vec<&ReplicaSet> = self.older.clone();
        older.sort_by_key(|rs| std::cmp::Reverse(rs.revision().unwrap_or(0)));
        let mut intermediate = Vec::new();
        let mut scaled = false;
        let mut waiting = 0;
        for rs in older {
            if rs.spec_replicas() == 0 {
                continue;
            }
            if rs
                .pod_hash()
                .is_some_and(|h| referenced.iter().any(|r| r == h))
            {
                continue;
            }
            let delayed = u.new_is_stable || rs.annotation(SCALE_DOWN_DEADLINE).is_some();
            if !delayed {
                intermediate.push(rs);
                continue;
            }
            let may_wait = canary
                .scale_down_delay_revision_limit
                .is_none_or(|limit| waiting < limit);
            if dynamic || delay <= 0 || !may_wait {
                let rev = rs.revision().unwrap_or(0);
                let extra = clear_deadline(rs);
                scaled |= self.scale_with(plan, events, rs, 0, rev, extra);
            } else {
                waiting += 1;
                scaled |= self.scale_down_after(plan, events, rs, delay);
            }
        }
        if !intermediate.is_empty() {
            scaled |= self.scale_down_older(plan, events);
        }
        scaled
    }

    /// Pod-template hashes something may still route to: the Services' selectors, the
    /// recorded weights, and DestinationRule subsets.
    fn referenced_hashes(&self, status: &RolloutStatus) -> Vec<String> {
        let mut hashes: Vec<String> = self.routed_hashes.keys().cloned().collect();
        if let Some(w) = status.canary.as_ref().and_then(|c| c.weights.as_ref()) {
            for d in [&w.canary, &w.stable].into_iter().flatten() {
                hashes.extend(d.pod_template_hash.clone());
            }
        }
        hashes.extend(self.service_hashes());
        hashes
    }
}

/// Removes a pending `scale-down-deadline` in the same write (the ReplicaSet is needed again).
fn clear_deadline(rs: &ReplicaSet) -> BTreeMap<String, Option<String>> {
    let mut extra = BTreeMap::new();
    if rs.annotation(SCALE_DOWN_DEADLINE).is_some() {
        extra.insert(SCALE_DOWN_DEADLINE.to_string(), None);
    }
    extra
}
