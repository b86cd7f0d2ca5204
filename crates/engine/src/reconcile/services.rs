//! The Services a Rollout manages besides blue-green's active and preview ones:
//!
//! - a canary's `canaryService` and `stableService` select the new and the stable pods, with
//!   or without a traffic router, because analyses and users address the two versions through
//!   them;
//! - a Service that carries the Rollout's managed-by annotation but that the Rollout no longer
//!   names (its strategy changed, or the field was renamed) gets its pod-template-hash
//!   selector and the annotation removed. Left alone, it would keep selecting the pods of one
//!   ReplicaSet and, once that is scaled down, no pod at all.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;

use super::spec::Strategy;
use super::world::World;
use crate::labels::{MANAGED_BY, POD_TEMPLATE_HASH};
use crate::observed::{Observed, ReplicaSetExt};
use crate::plan::{Action, Event, Plan};

/// The Services a canary names, as found.
pub(super) struct CanaryServices<'a> {
    canary: Option<&'a Service>,
    stable: Option<&'a Service>,
    /// The ping-pong pair in its current roles: (canary's, stable's).
    ping_pong: Option<(&'a Service, &'a Service)>,
}

/// The hash a Service's selector picks pods by, if any.
fn selected_hash(svc: &Service) -> Option<&str> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.get(POD_TEMPLATE_HASH))
        .map(String::as_str)
}

fn managed_by(svc: &Service) -> Option<&str> {
    svc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MANAGED_BY))
        .map(String::as_str)
}

/// All of a ReplicaSet's pods are available (and it has some).
fn fully_available(rs: &ReplicaSet) -> bool {
    let spec = rs.spec_replicas();
    let available = rs.available_replicas();
    spec != 0 && available != 0 && spec <= available
}

impl<'a> World<'a> {
    /// Looks up the canary and stable Services of a canary. A named Service that does not
    /// exist is a spec problem, reported with Argo's field error (canary Service first).
    pub(super) fn canary_services(&self) -> Result<CanaryServices<'a>, String> {
        let Strategy::Canary(c) = &self.spec.strategy else {
            return Ok(CanaryServices {
                canary: None,
                stable: None,
                ping_pong: None,
            });
        };
        let services = self.services;
        let find = |field: &str, name: Option<&str>| -> Result<Option<&'a Service>, String> {
            let Some(name) = name.filter(|n| !n.is_empty()) else {
                return Ok(None);
            };
            services
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name))
                .map(Some)
                .ok_or_else(|| {
                    format!(
                        "spec.strategy.canary.{field}: Invalid value: \"{name}\": services \"{name}\" not found"
                    )
                })
        };
        let canary = find("canaryService", c.canary_service.as_deref())?;
        let stable = find("stableService", c.stable_service.as_deref())?;
        let ping_pong = match (
            &c.ping_pong,
            super::ping_pong::roles(c, self.ro.status.as_ref()),
        ) {
            (Some(pp), Some((canary_role, stable_role))) => {
                find("pingPong.pingService", pp.ping_service.as_deref())?;
                find("pingPong.pongService", pp.pong_service.as_deref())?;
                let by_name = |n: &str| {
                    services
                        .iter()
                        .find(|s| s.metadata.name.as_deref() == Some(n))
                };
                by_name(&canary_role).zip(by_name(&stable_role))
            }
            _ => None,
        };
        Ok(CanaryServices {
            canary,
            stable,
            ping_pong,
        })
    }

    /// Points the stable Service at the stable pods and the canary Service at the new pods
    /// (at the stable pods once aborted). Each switch waits until the target has an available
    /// pod, and a Service not yet managed (being adopted) until all of its pods are available,
    /// so that traffic never lands on pods that cannot take it.
    pub(super) fn route_canary_services(
        &self,
        services: &CanaryServices<'_>,
        aborted: bool,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) {
        if let Some(svc) = services.stable {
            self.ensure_selects(svc, self.stable_rs, 1, plan, events);
        }
        if let Some(svc) = services.canary {
            let target = if aborted { self.stable_rs } else { self.new_rs };
            // With a router, the canary Service moves only to pods that can carry the canary
            // weight routed now (a newer revision supersedes a canary at 50%: the router
            // first takes the weight to 0, then the Service moves).
            let needed = self.pods_for_weight(self.routed_canary_weight).max(1);
            self.ensure_selects(svc, target, needed, plan, events);
        }
        // Ping-pong: the stable's Service follows the stable pods (after a promotion it
        // already does); the canary's moves to the new pods while an update is under way and
        // stays there on abort, where the router has taken its weight to 0 (as in Argo).
        if let Some((canary_svc, stable_svc)) = services.ping_pong {
            self.ensure_selects(stable_svc, self.stable_rs, 1, plan, events);
            let updating = self
                .new_rs
                .is_some_and(|rs| rs.pod_hash() != self.stable_hash());
            if updating {
                let needed = self.pods_for_weight(self.routed_canary_weight).max(1);
                self.ensure_selects(canary_svc, self.new_rs, needed, plan, events);
            }
        }
    }

    fn ensure_selects(
        &self,
        svc: &Service,
        rs: Option<&ReplicaSet>,
        needed: i32,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) {
        let Some(rs) = rs else { return };
        let Some(hash) = rs.pod_hash() else { return };
        let current = selected_hash(svc);
        if current == Some(hash) {
            return;
        }
        if managed_by(svc).is_none() && !fully_available(rs) {
            return;
        }
        if rs.available_replicas().min(rs.spec_replicas()) < needed {
            return;
        }
        let name = svc.metadata.name.clone().unwrap_or_default();
        plan.actions.push(Action::SwitchService {
            name: name.clone(),
            resource_version: svc.metadata.resource_version.clone(),
            pod_hash: hash.to_string(),
            rollout: self.rollout_name().to_string(),
        });
        events.push(Event::normal(
            "SwitchService",
            format!(
                "Switched selector for service '{name}' from '{}' to '{hash}'",
                current.unwrap_or_default()
            ),
        ));
    }

    /// Releases the Services that carry this Rollout's managed-by annotation and a
    /// pod-template-hash selector but are no longer named by it.
    pub(super) fn release_unnamed_services(&self, plan: &mut Plan) {
        let named = Observed::service_names(self.ro);
        for svc in self.services {
            let name = svc.metadata.name.as_deref().unwrap_or_default();
            if managed_by(svc) == Some(self.rollout_name())
                && selected_hash(svc).is_some()
                && !named.iter().any(|n| n == name)
            {
                plan.actions.push(Action::ReleaseService {
                    name: name.to_string(),
                    resource_version: svc.metadata.resource_version.clone(),
                });
            }
        }
    }
}
