//! Sizing ReplicaSets: one scale write with its annotations, older ReplicaSets down as fast as
//! availability allows, the confirmation that guards a scale-down against a stale cache, and
//! the replica counts of the status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use sluice_api::rollout::RolloutStatus;

use super::World;
use crate::labels::DESIRED_REPLICAS;
use crate::observed::ReplicaSetExt;
use crate::plan::{Action, Event, Plan};
use crate::replicas::RsCounts;
use crate::selector::format_selector;

/// How soon a scale-down held by the weight a router still sends is looked at again.
pub(super) const HELD_BY_TRAFFIC_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

impl World<'_> {
    /// Scales `rs` to `to` if it is not there; returns whether it wrote.
    pub(super) fn scale(
        &self,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        rs: &ReplicaSet,
        to: i32,
        revision: i64,
    ) -> bool {
        self.scale_with(plan, events, rs, to, revision, BTreeMap::new())
    }

    /// Scales `rs` to `to`, also setting (or, with `None`, removing) `extra` annotations in the
    /// same write. Writes nothing when all is already so.
    pub(super) fn scale_with(
        &self,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        rs: &ReplicaSet,
        to: i32,
        revision: i64,
        extra: BTreeMap<String, Option<String>>,
    ) -> bool {
        let from = rs.spec_replicas();
        // Never below what the router objects still send it (traffic routing only); look
        // again soon, as the router's change may not touch anything this controller watches.
        let to = if to < from {
            let held = to.max(self.traffic_floor(rs).min(from));
            if held != to {
                crate::plan::set_requeue(&mut plan.requeue_after, HELD_BY_TRAFFIC_RETRY);
            }
            held
        } else {
            to
        };
        let desired = self.spec.replicas.to_string();
        let extra_pending = extra.iter().any(|(k, v)| rs.annotation(k) != v.as_deref());
        if from == to && rs.annotation(DESIRED_REPLICAS) == Some(desired.as_str()) && !extra_pending
        {
            return false;
        }
        let mut annotations = extra;
        annotations.insert(DESIRED_REPLICAS.to_string(), Some(desired));
        plan.actions.push(Action::ScaleReplicaSet {
            name: rs.name().to_string(),
            resource_version: rs.metadata.resource_version.clone(),
            from,
            to,
            annotations,
        });
        if from != to {
            events.push(Event::normal(
                "ScalingReplicaSet",
                format!(
                    "Scaled {} ReplicaSet {} (revision {revision}) from {from} to {to}",
                    if to > from { "up" } else { "down" },
                    rs.name()
                ),
            ));
        }
        from != to
    }

    /// Whether the pods the Services moved away from may go: with `--aws-verify-target-group`,
    /// only once the AWS target groups of the Service now selecting the new pods have every one
    /// of them registered (Argo's events each time it looks; again in 10 s when not yet).
    pub(super) fn targets_registered(&self, plan: &mut Plan, events: &mut Vec<Event>) -> bool {
        let Some(registration) = self.target_registration else {
            return true;
        };
        let (registered, said) = crate::target_registration::judge(registration);
        events.extend(said);
        if !registered {
            crate::plan::set_requeue(&mut plan.requeue_after, Duration::from_secs(10));
            plan.waits.push(crate::Wait::TargetsNotRegistered {
                service: registration.service.clone(),
            });
        }
        registered
    }

    /// Older ReplicaSets (neither new nor stable) go to zero, oldest first, as fast as
    /// availability allows. Pods that are not available can always go: removing them never
    /// costs availability, and it is what unsticks a superseded bad revision.
    pub(super) fn scale_down_older(&self, plan: &mut Plan, events: &mut Vec<Event>) -> bool {
        let total_available: i32 = self
            .all
            .iter()
            .map(|rs| rs.available_replicas().min(rs.spec_replicas()))
            .sum();
        let min_available = self.spec.replicas - self.spec.limits.max_unavailable;
        let mut budget = (total_available - min_available).max(0);
        let mut wrote = false;
        for rs in &self.older {
            let spec = rs.spec_replicas();
            if spec == 0 {
                continue;
            }
            let available = rs.available_replicas().clamp(0, spec);
            let unavailable = spec - available;
            let from_available = available.min(budget);
            budget -= from_available;
            let reduce = unavailable + from_available;
            if reduce > 0 {
                let rev = rs.revision().unwrap_or(0);
                wrote |= self.scale(plan, events, rs, spec - reduce, rev);
            }
        }
        wrote
    }

    /// A scale-down spends availability counted on other ReplicaSets, and a router write sends
    /// traffic by those counts. They may come from a cache that has not yet seen this
    /// controller's last write, so the plan first confirms that every ReplicaSet it counted is
    /// still at the observed resourceVersion.
    pub(super) fn confirm_counted_replica_sets(&self, plan: &mut Plan) {
        // A router's weights are decided on the same counts: traffic must not move onto pods
        // a stale cache still shows.
        let spends = |a: &Action| {
            matches!(a, Action::ScaleReplicaSet { from, to, .. } if to < from)
                || matches!(
                    a,
                    Action::UpdateRouterObject { .. }
                        | Action::CreateRouterObject { .. }
                        | Action::DeleteRouterObject { .. }
                )
        };
        let Some(first_spender) = plan.actions.iter().find(|a| spends(a)) else {
            return;
        };
        // The first scale-down carries its own ReplicaSet's resourceVersion, so that one needs
        // no separate confirmation: it is checked by the write itself, after every other
        // counted ReplicaSet has been confirmed and before anything is spent.
        let checked_by_itself = match first_spender {
            Action::ScaleReplicaSet {
                name,
                resource_version: Some(rv),
                ..
            } => Some((name.as_str(), rv.as_str())),
            _ => None,
        };
        let confirms: Vec<Action> = self
            .all
            .iter()
            .filter(|rs| rs.available_replicas() > 0)
            .filter(|rs| {
                checked_by_itself
                    != Some((
                        rs.name(),
                        rs.metadata.resource_version.as_deref().unwrap_or(""),
                    ))
            })
            .map(|rs| Action::ConfirmReplicaSet {
                name: rs.name().to_string(),
                resource_version: rs.metadata.resource_version.clone(),
            })
            .collect();
        plan.actions.splice(0..0, confirms);
    }

    /// Status counts. Canary: ready, available and HPA replicas and the selector cover every
    /// ReplicaSet; blue-green (`active` given): ready, available and HPA replicas and the
    /// selector are the active ReplicaSet's (the pods that serve, and what an HPA should
    /// scale), as in Argo; the preview's pods never count as available capacity.
    pub(super) fn fill_counts(&self, status: &mut RolloutStatus, active: Option<&ReplicaSet>) {
        let sum = |f: fn(&ReplicaSet) -> i32| self.all.iter().map(|rs| f(rs)).sum::<i32>();
        let replicas = sum(ReplicaSetExt::status_replicas);
        status.replicas = Some(replicas);
        status.updated_replicas = Some(self.new_rs.map(|rs| rs.status_replicas()).unwrap_or(0));
        status.ready_replicas = Some(sum(ReplicaSetExt::ready_replicas));
        status.available_replicas = Some(sum(ReplicaSetExt::available_replicas));
        match active {
            None => {
                status.hpa_replicas = Some(replicas);
                status.selector = self.ro.spec.selector.as_ref().map(format_selector);
            }
            Some(rs) => {
                status.ready_replicas = Some(rs.ready_replicas());
                status.available_replicas = Some(rs.available_replicas());
                status.hpa_replicas = Some(rs.status_replicas());
                status.selector = rs.spec.as_ref().map(|spec| format_selector(&spec.selector));
            }
        }
    }
}

/// The replica counts of a ReplicaSet, as the replica arithmetic takes them.
pub(super) fn counts_of(rs: &ReplicaSet) -> RsCounts {
    RsCounts::new(rs.spec_replicas(), rs.available_replicas())
}
