//! Traffic routing of a canary: which weight the routers give the new pods in this reconcile,
//! the router objects' edits that put it there (in the plan, like any other write), and
//! `status.canary.weights` with its `TrafficWeightUpdated` event.
//!
//! Argo's order within one reconcile is kept: Service selectors, then the routers (managed
//! routes, header and mirror routes, subset hashes, weights), then analysis, then scaling.

pub(crate) mod gradual_abort;
mod read_back;
mod routers;
mod weight;

use sluice_api::rollout::{CanaryStatus, RolloutStatus, TrafficWeights, WeightDestination};
use sluice_routers::{Desired, Destination};

pub(super) use read_back::{routed_canary_weight, routed_hashes};
pub(super) use routers::Routers;
pub use routers::{dependent_references, references, selections};

use super::{Update, World};
use crate::labels::POD_TEMPLATE_HASH;
use crate::plan::{Action, Event, Plan};
use crate::steps;
use sluice_routers::router::Calls;

/// How soon a weight a router has not confirmed is looked at again (Argo's
/// `ROLLOUT_VERIFY_RETRY_INTERVAL` default).
const VERIFY_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// What the routers were told in this reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TrafficDecision {
    /// The canary weight decided (also while aborted: the weight traffic steps down through).
    pub weight: i32,
    /// `weights.verified` as the routers report it (`None`: nothing to verify, or not routed
    /// in this reconcile).
    pub verified: Option<bool>,
    /// The (canary, stable) weights the router objects hold once this plan's router writes
    /// have landed (`None`: nothing was sent to the routers in this reconcile).
    pub routed: Option<(i32, i32)>,
}

impl World<'_> {
    /// The router writes of this reconcile, and `status.canary.weights` with its event.
    /// Nothing is sent to a router before the stable pods can carry the stable share (on a
    /// first deploy there is no stable yet, so routers are first touched by the first update).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn route_traffic(
        &mut self,
        routers: &Routers<'_>,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        at_desired_counts: bool,
    ) -> TrafficDecision {
        let canary = self.spec.canary();
        let routing = canary.traffic_routing.clone().unwrap_or_default();
        let max = routing.max_traffic_weight();
        let previous = status.canary.as_ref().and_then(|c| c.weights.clone());
        let previous_canary = previous.as_ref().and_then(|w| w.canary.as_ref());
        let step_index = status.current_step_index.unwrap_or(0);
        let facts = weight::Facts {
            replicas: self.spec.replicas,
            max,
            steps: canary.steps.as_deref(),
            step_index,
            new_is_stable: u.new_is_stable,
            aborted: u.aborted,
            promote_full: status.promote_full == Some(true) || u.rollback_window,
            dynamic_stable_scale: canary.dynamic_stable_scale == Some(true),
            new_available: self.new_rs.map(up),
            stable_available: self.stable_rs.map(up),
            at_desired_counts,
            previous_canary: previous_canary
                .map(|c| (c.weight.unwrap_or(0), c.pod_template_hash.as_deref())),
            pod_hash: &self.spec.pod_hash,
            gradual_abort: self.gradual_abort(plan, u, previous_canary),
        };
        let decided = weight::desired(&facts);
        let mut decision = TrafficDecision {
            weight: decided.weight,
            verified: previous.as_ref().and_then(|w| w.verified),
            routed: None,
        };
        // The stable pods must be able to take what is left to them.
        let Some(stable) = self.stable_rs else {
            return decision;
        };
        let stable_available = up(stable);
        let stable_needs = ((i64::from(max - decided.weight).max(0)
            * i64::from(self.spec.replicas))
            / i64::from(max.max(1))) as i32;
        if stable_available < stable_needs
            && stable_available < self.progress_threshold(stable_needs)
        {
            return decision;
        }
        let canary_hash = if decided.for_previous_canary {
            previous_canary
                .and_then(|c| c.pod_template_hash.clone())
                .unwrap_or_default()
        } else {
            self.spec.pod_hash.clone()
        };
        let stable_hash = crate::observed::ReplicaSetExt::pod_hash(stable)
            .unwrap_or_default()
            .to_string();
        let mut desired = self.router_desired(&canary_hash, &stable_hash, decided.weight);
        if !u.aborted && !u.new_is_stable {
            desired.additional = self.experiment_destinations(status, u.revision);
        }
        // Header and mirror routes: only for the current step, never on a first revision. Each
        // field of a step counts on its own, as in Argo (a step may pause and set a header
        // route at once).
        let current = steps::current_step(canary, step_index);
        let routes_now = u.revision > 1 && !u.aborted;
        let header_route = current
            .and_then(|s| s.set_header_route.as_ref())
            .filter(|_| routes_now);
        let mirror_route = current
            .and_then(|s| s.set_mirror_route.as_ref())
            .filter(|_| routes_now);
        let versions = self.router_versions.clone();
        let calls = Calls {
            desired: &desired,
            remove_managed_routes: decided.remove_managed_routes,
            step_route_names: step_route_names(canary, &desired.managed_routes),
            header_route,
            mirror_route,
            previous_additional: previous
                .as_ref()
                .and_then(|w| w.additional.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|d| d.service_name.clone())
                .collect(),
            versions: &versions,
            rollout_name: self.rollout_name(),
            now: self.now,
        };
        let edited = match routers.edit(&calls) {
            Ok(edited) => edited,
            Err(message) => {
                // Argo fails the reconcile with this warning; nothing of this pass's routing
                // is written, and the next reconcile tries again.
                events.push(Event::warning("TrafficRoutingError", message));
                return decision;
            }
        };
        events.extend(edited.events);
        if let Some(after) = edited.requeue {
            crate::plan::set_requeue(&mut plan.requeue_after, after);
        }
        plan.actions.extend(edited.actions);
        decision.verified = routers.weight_verified(&desired, status, events);
        if decision.verified == Some(false) {
            // Argo looks again after ROLLOUT_VERIFY_RETRY_INTERVAL (10 s): nothing the
            // controller watches changes when the load balancer catches up.
            crate::plan::set_requeue(&mut plan.requeue_after, VERIFY_RETRY);
        }
        decision.routed = Some((desired.weight, desired.stable_weight()));
        self.count_written_weights(plan, &desired);
        self.record_weights(status, events, &desired, previous, decision.verified);
        decision
    }

    /// The scale-down safety rule looks at the weight the router objects hold when a
    /// ReplicaSet write lands. The plan's router writes come before its ReplicaSet writes, and
    /// a refused write stops the plan, so every later write lands on the weights written here:
    /// each ReplicaSet keeps the larger of what the objects were read with and what this plan
    /// gives it, through the Services as this plan leaves them and by the hashes it names.
    fn count_written_weights(&mut self, plan: &Plan, desired: &Desired) {
        let selected_after = |service: &str| -> Option<String> {
            for action in plan.actions.iter().rev() {
                match action {
                    Action::SwitchService { name, pod_hash, .. } if name == service => {
                        return Some(pod_hash.clone());
                    }
                    Action::ReleaseService { name, .. } if name == service => return None,
                    _ => {}
                }
            }
            self.services
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(service))?
                .spec
                .as_ref()?
                .selector
                .as_ref()?
                .get(POD_TEMPLATE_HASH)
                .cloned()
        };
        let mut written: Vec<(Option<String>, i32)> = vec![
            (Some(desired.canary_hash.clone()), desired.weight),
            (selected_after(&desired.canary_service), desired.weight),
            (Some(desired.stable_hash.clone()), desired.stable_weight()),
            (
                selected_after(&desired.stable_service),
                desired.stable_weight(),
            ),
        ];
        for d in &desired.additional {
            written.push((Some(d.pod_template_hash.clone()), d.weight));
        }
        for (hash, weight) in written {
            let Some(hash) = hash.filter(|h| !h.is_empty()) else {
                continue;
            };
            // A hash that gets nothing is not named: it stays free to go as before.
            if weight > 0 || self.routed_hashes.contains_key(&hash) {
                let held = self.routed_hashes.entry(hash).or_default();
                *held = (*held).max(weight);
            }
        }
        self.routed_canary_weight = self.routed_canary_weight.max(desired.weight);
    }

    /// The weight a gradual abort routes in this reconcile, writing its record first when it
    /// starts or steps down; a record left from an abort that is over is removed.
    fn gradual_abort(
        &self,
        plan: &mut Plan,
        u: &Update,
        previous_canary: Option<&WeightDestination>,
    ) -> Option<i32> {
        use gradual_abort::{GRADUAL_ABORT_AT, decide, record, recorded};
        let rv = self.ro.metadata.resource_version.clone();
        let recorded = recorded(self.ro);
        let has_record = self
            .ro
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(GRADUAL_ABORT_AT));
        let (Some(hold), true) = (self.spec.gradual_abort, u.aborted) else {
            if has_record {
                plan.annotate_rollout(rv, GRADUAL_ABORT_AT, None);
            }
            return None;
        };
        let current = previous_canary.and_then(|c| c.weight).unwrap_or(0);
        let steps = self.spec.canary().steps.as_deref().unwrap_or_default();
        let step = decide(steps, hold, recorded, current, self.now);
        if let Some((weight, at)) = step.record {
            plan.annotate_rollout(rv, GRADUAL_ABORT_AT, Some(record(weight, at)));
        }
        if let Some(after) = step.requeue {
            crate::plan::set_requeue(&mut plan.requeue_after, after);
        }
        Some(step.weight)
    }

    pub(super) fn router_desired(
        &self,
        canary_hash: &str,
        stable_hash: &str,
        weight: i32,
    ) -> Desired {
        let canary = self.spec.canary();
        let routing = canary.traffic_routing.clone().unwrap_or_default();
        let (canary_service, stable_service) = self.service_roles(false);
        Desired {
            rollout: self.rollout_name().to_string(),
            namespace: self.ro.metadata.namespace.clone().unwrap_or_default(),
            rollout_uid: self.ro.metadata.uid.clone().unwrap_or_default(),
            canary_service,
            stable_service,
            canary_hash: canary_hash.to_string(),
            stable_hash: stable_hash.to_string(),
            weight,
            additional: Vec::<Destination>::new(),
            max_weight: routing.max_traffic_weight(),
            managed_routes: routing
                .managed_routes
                .iter()
                .flatten()
                .filter_map(|r| r.name.clone())
                .collect(),
        }
    }

    /// `status.canary.weights` and, when they changed, `TrafficWeightUpdated`.
    fn record_weights(
        &self,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        desired: &Desired,
        previous: Option<TrafficWeights>,
        verified: Option<bool>,
    ) {
        let destination = |weight: i32, service: &str, hash: &str| WeightDestination {
            weight: Some(weight),
            service_name: (!service.is_empty()).then(|| service.to_string()),
            pod_template_hash: (!hash.is_empty()).then(|| hash.to_string()),
        };
        let additional: Vec<WeightDestination> = desired
            .additional
            .iter()
            .map(|d| destination(d.weight, &d.service_name, &d.pod_template_hash))
            .collect();
        let weights = TrafficWeights {
            canary: Some(destination(
                desired.weight,
                &desired.canary_service,
                &desired.canary_hash,
            )),
            stable: Some(destination(
                desired.stable_weight(),
                &desired.stable_service,
                &desired.stable_hash,
            )),
            additional: (!additional.is_empty()).then_some(additional),
            verified,
        };
        let changed = previous.as_ref().is_none_or(|p| {
            p.canary != weights.canary
                || p.stable != weights.stable
                || p.additional != weights.additional
        });
        if changed {
            let mut details = match previous.as_ref().and_then(|p| p.canary.as_ref()) {
                None => format!("to {}", desired.weight),
                Some(p) if p.weight != Some(desired.weight) => {
                    format!("from {} to {}", p.weight.unwrap_or(0), desired.weight)
                }
                Some(_) => String::new(),
            };
            if previous.as_ref().and_then(|p| p.additional.clone()) != weights.additional {
                let list: Vec<String> = desired
                    .additional
                    .iter()
                    .map(|d| format!("{}: {}", d.service_name, d.weight))
                    .collect();
                details.push_str(&format!(", additional: [{}]", list.join(", ")));
            }
            events.push(Event::normal(
                "TrafficWeightUpdated",
                format!("Traffic weight updated {details}"),
            ));
        }
        status
            .canary
            .get_or_insert_with(CanaryStatus::default)
            .weights = Some(weights);
    }
}

/// Pods of a ReplicaSet that can take traffic: available, and not about to go (a ReplicaSet
/// just scaled down still counts its terminating pods as available for a moment).
fn up(rs: &k8s_openapi::api::apps::v1::ReplicaSet) -> i32 {
    use crate::observed::ReplicaSetExt;
    rs.available_replicas().min(rs.spec_replicas())
}

/// The names of every route a header or mirror step manages, then `managedRoutes`: removed
/// together when the update ends.
fn step_route_names(
    canary: &sluice_api::rollout::CanaryStrategy,
    managed: &[String],
) -> Vec<String> {
    let mut names: Vec<String> = steps::steps(canary)
        .iter()
        .flat_map(|s| {
            let header = s.set_header_route.as_ref().and_then(|h| h.name.clone());
            let mirror = s.set_mirror_route.as_ref().and_then(|m| m.name.clone());
            header.into_iter().chain(mirror)
        })
        .collect();
    for m in managed {
        if !names.contains(m) {
            names.push(m.clone());
        }
    }
    names
}
