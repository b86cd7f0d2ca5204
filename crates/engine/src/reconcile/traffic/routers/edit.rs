//! One reconcile's edits of the router objects, in Argo's call order, collected on working
//! copies so that each object gets one write (or one delete) carrying the resourceVersion it
//! was read at.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_routers::kinds::ObjectRef;
use sluice_routers::{
    Change, ChangeResult, Edit, EditResult, alb, ambassador, apisix, appmesh, gateway, istio,
    nginx, smi, traefik,
};

use super::{Calls, Router, with_services};
use crate::plan::{Action, Event};

/// How long an Ambassador canary Mapping stays at weight 0 before it is deleted, so that
/// Ambassador has stopped sending it requests (Argo waits as long inside its reconcile).
const AMBASSADOR_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// When an Ambassador canary Mapping was set to weight 0: the delete waits on it, without a
/// clock or a sleep in the engine.
const ZERO_WEIGHT_SINCE: &str = "rollouts.sluice.dev/zero-weight-since";

/// Reasons of router updates Argo publishes no event for (it writes those objects silently).
const SILENT: [&str; 7] = [
    smi::UPDATED_REASON,
    traefik::UPDATED_REASON,
    apisix::UPDATED_REASON,
    apisix::CREATED_REASON,
    apisix::DELETED_REASON,
    appmesh::ROUTER_UPDATED_REASON,
    appmesh::NODE_UPDATED_REASON,
];

enum Pending {
    Write { object: Value, create: bool },
    Delete { uid: Option<String> },
}

/// Working copies of the objects being edited.
#[derive(Default)]
pub(crate) struct Edits {
    objects: BTreeMap<ObjectRef, Pending>,
    order: Vec<ObjectRef>,
    pub events: Vec<Event>,
    /// When to look again (an edit that waits for time to pass).
    pub requeue: Option<std::time::Duration>,
}

impl Edits {
    fn current<'v>(&'v self, key: &ObjectRef, observed: &'v Value) -> &'v Value {
        match self.objects.get(key) {
            Some(Pending::Write { object, .. }) => object,
            _ => observed,
        }
    }

    fn remember(&mut self, key: &ObjectRef, pending: Pending) {
        if !self.objects.contains_key(key) {
            self.order.push(key.clone());
        }
        self.objects.insert(key.clone(), pending);
    }

    fn publish(&mut self, event: (&'static str, String)) {
        if !SILENT.contains(&event.0) {
            self.events.push(Event::normal(event.0, event.1));
        }
    }

    /// An edit that may also delete the object; `existing` is the object as observed.
    fn change(
        &mut self,
        key: &ObjectRef,
        existing: Option<&Value>,
        result: ChangeResult,
    ) -> Result<(), String> {
        match result.map_err(|e| e.to_string())? {
            None => {}
            Some(Change::Write(edit)) => self.apply(key, existing.is_none(), Ok(Some(edit)))?,
            Some(Change::Delete { event }) => {
                let uid = existing
                    .and_then(|o| o.pointer("/metadata/uid"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.remember(key, Pending::Delete { uid });
                self.publish(event);
            }
        }
        Ok(())
    }

    /// An Ambassador canary Mapping's change: a Mapping set to weight 0 is stamped with the
    /// time, and deleted only once it has been at 0 for [`AMBASSADOR_DRAIN`].
    fn ambassador_change(
        &mut self,
        key: &ObjectRef,
        existing: Option<&Value>,
        result: ChangeResult,
        now: jiff::Timestamp,
    ) -> Result<(), String> {
        match result.map_err(|e| e.to_string())? {
            Some(Change::Write(mut edit)) => {
                if edit.object.pointer("/spec/weight").and_then(Value::as_i64) == Some(0)
                    && let Some(meta) = edit.object["metadata"].as_object_mut()
                {
                    let annotations = meta
                        .entry("annotations")
                        .or_insert_with(|| Value::Object(Default::default()));
                    annotations[ZERO_WEIGHT_SINCE] = Value::String(now.to_string());
                    self.requeue = Some(AMBASSADOR_DRAIN);
                }
                self.apply(key, existing.is_none(), Ok(Some(edit)))
            }
            Some(Change::Delete { event }) => {
                let since = existing
                    .and_then(|o| o.pointer("/metadata/annotations"))
                    .and_then(|a| a.get(ZERO_WEIGHT_SINCE))
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok());
                let waited = since.map(|s| now.duration_since(s));
                let drain = jiff::SignedDuration::try_from(AMBASSADOR_DRAIN).unwrap_or_default();
                match (since, waited) {
                    // Times are whole seconds: strictly more than the drain in whole
                    // seconds is at least the drain in real time.
                    (Some(_), Some(w)) if w > drain => {
                        self.change(key, existing, Ok(Some(Change::Delete { event })))
                    }
                    (Some(_), Some(w)) => {
                        let left = (drain - w).unsigned_abs() + std::time::Duration::from_secs(1);
                        self.requeue = Some(left.max(std::time::Duration::from_secs(1)));
                        Ok(())
                    }
                    // At 0 since an unknown time (set by another controller): stamp it now.
                    _ => {
                        let Some(mut object) = existing.cloned() else {
                            return Ok(());
                        };
                        object["metadata"]["annotations"][ZERO_WEIGHT_SINCE] =
                            Value::String(now.to_string());
                        self.requeue = Some(AMBASSADOR_DRAIN);
                        self.remember(
                            key,
                            Pending::Write {
                                object,
                                create: false,
                            },
                        );
                        Ok(())
                    }
                }
            }
            other => self.change(key, existing, Ok(other)),
        }
    }

    fn apply(&mut self, key: &ObjectRef, create: bool, result: EditResult) -> Result<(), String> {
        match result.map_err(|e| e.to_string())? {
            None => {}
            Some(Edit { object, event }) => {
                let create = create
                    && match self.objects.get(key) {
                        None => true,
                        Some(Pending::Write { create, .. }) => *create,
                        Some(Pending::Delete { .. }) => false,
                    };
                self.remember(key, Pending::Write { object, create });
                self.publish(event);
            }
        }
        Ok(())
    }

    /// The writes, one per changed object, in the order first changed.
    pub(crate) fn into_actions(self) -> Vec<Action> {
        let mut objects = self.objects;
        self.order
            .into_iter()
            .filter_map(|key| {
                Some(match objects.remove(&key)? {
                    Pending::Write {
                        object,
                        create: true,
                    } => Action::CreateRouterObject {
                        target: key,
                        object: Box::new(object),
                    },
                    Pending::Write { object, .. } => Action::UpdateRouterObject {
                        target: key,
                        object: Box::new(object),
                    },
                    Pending::Delete { uid } => Action::DeleteRouterObject { target: key, uid },
                })
            })
            .collect()
    }
}

impl Router<'_> {
    /// Every edit of this router for one reconcile, in Argo's call order: managed routes
    /// removed, the current step's header or mirror route, subset hashes, the weight.
    pub(crate) fn edit(&self, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let d = calls.desired;
        match self {
            Router::Istio {
                virtual_services,
                destination_rule,
            } => {
                let dr_ref = destination_rule.as_ref().map(|(_, r, _)| *r);
                let dr_host = destination_rule
                    .as_ref()
                    .and_then(|(_, _, v)| v.pointer("/spec/host"))
                    .and_then(Value::as_str);
                for (key, _, observed) in virtual_services {
                    let name = key.name.as_str();
                    if calls.remove_managed_routes {
                        let vs = edits.current(key, observed).clone();
                        let r = istio::remove_managed_routes(&vs, name, &calls.step_route_names);
                        edits.apply(key, false, r)?;
                    }
                    if let Some(step) = calls.header_route {
                        let vs = edits.current(key, observed).clone();
                        let r = istio::set_header_route(&vs, name, step, dr_host, dr_ref, d);
                        edits.apply(key, false, r)?;
                    }
                    if let Some(step) = calls.mirror_route {
                        let vs = edits.current(key, observed).clone();
                        let r = istio::set_mirror_route(&vs, name, step, dr_host, dr_ref, d);
                        edits.apply(key, false, r)?;
                    }
                }
                if let Some((key, dr_ref, observed)) = destination_rule {
                    let dr = edits.current(key, observed).clone();
                    let r = istio::update_hash(&dr, dr_ref, calls.rollout_name, d);
                    edits.apply(key, false, r)?;
                }
                for (key, vs_ref, observed) in virtual_services {
                    let vs = edits.current(key, observed).clone();
                    let r = istio::set_weight(&vs, vs_ref, dr_ref, d);
                    edits.apply(key, false, r)?;
                }
            }
            Router::Nginx {
                cfg,
                max_weight,
                ingresses,
            } => {
                for (stable, canary_key, canary) in ingresses {
                    let r = nginx::set_weight(stable, *canary, cfg, *max_weight, d);
                    edits.apply(canary_key, canary.is_none(), r)?;
                }
            }
            Router::Alb {
                cfg,
                ingresses,
                services,
            } => {
                let d = &with_services(d, services);
                for (key, observed) in ingresses {
                    if calls.remove_managed_routes {
                        let ingress = edits.current(key, observed).clone();
                        let r = alb::remove_managed_routes(&ingress, cfg, d);
                        edits.apply(key, false, r)?;
                    }
                    if let Some(step) = calls.header_route {
                        let ingress = edits.current(key, observed).clone();
                        let r = alb::set_header_route(&ingress, cfg, step, d);
                        edits.apply(key, false, r)?;
                    }
                    let ingress = edits.current(key, observed).clone();
                    edits.apply(key, false, alb::set_weight(&ingress, cfg, d))?;
                }
            }
            Router::Traefik { key, object } => {
                let ts = edits.current(key, object).clone();
                edits.apply(key, false, traefik::set_weight(&ts, d))?;
            }
            Router::Ambassador { mappings } => {
                for (base, canary_key, canary) in mappings {
                    let api_version = canary_key.kind.api_version(calls.versions);
                    let r = ambassador::set_weight(base, *canary, canary_key.kind, &api_version, d);
                    edits.ambassador_change(canary_key, *canary, r, calls.now)?;
                }
            }
            Router::Apisix {
                cfg,
                key,
                route,
                header_routes,
            } => {
                if calls.remove_managed_routes {
                    for (k, existing) in header_routes {
                        if let Some(existing) = existing {
                            let r = apisix::remove_managed_route(existing, d);
                            edits.change(k, Some(existing), r)?;
                        }
                    }
                }
                if let Some(step) = calls.header_route
                    && let Some((k, existing)) = header_routes
                        .iter()
                        .find(|(k, _)| step.name.as_deref() == Some(k.name.as_str()))
                {
                    let main = edits.current(key, route).clone();
                    let r = apisix::set_header_route(&main, *existing, cfg, step, d);
                    edits.change(k, *existing, r)?;
                }
                let current = edits.current(key, route).clone();
                edits.apply(key, false, apisix::set_weight(&current, cfg, d))?;
            }
            Router::AppMesh {
                cfg,
                namespace,
                router,
                canary_node,
                stable_node,
            } => {
                for (node, role) in [
                    (stable_node, appmesh::NodeRole::Stable),
                    (canary_node, appmesh::NodeRole::Canary),
                ] {
                    let current = edits.current(&node.0, node.1).clone();
                    edits.apply(&node.0, false, appmesh::update_hash(&current, role, d))?;
                }
                let current = edits.current(&router.0, router.1).clone();
                let r = appmesh::set_weight(&current, cfg, namespace, d);
                edits.apply(&router.0, false, r)?;
            }
            Router::Smi { cfg, key, existing } => {
                let r = smi::set_weight(*existing, cfg, &calls.versions.smi, d);
                edits.apply(key, existing.is_none(), r)?;
            }
            Router::Gateway { cfg, routes } => {
                for (key, kind, use_header_routes, observed) in routes {
                    if calls.remove_managed_routes && *use_header_routes {
                        let route = edits.current(key, observed).clone();
                        let r = gateway::remove_managed_routes(&route, *kind, d);
                        edits.apply(key, false, r)?;
                    }
                    if let (Some(step), true) = (calls.header_route, *use_header_routes) {
                        let route = edits.current(key, observed).clone();
                        let step_name = step.name.as_deref().unwrap_or_default();
                        let r = gateway::set_header_route(&route, *kind, step_name, step, d);
                        edits.apply(key, false, r)?;
                    }
                    let route = edits.current(key, observed).clone();
                    let experiments = gateway::Experiments {
                        active: false,
                        previous_additional: calls.previous_additional.clone(),
                        ports: BTreeMap::new(),
                    };
                    let r = gateway::set_weight(&route, *kind, cfg, &experiments, d);
                    edits.apply(key, false, r)?;
                }
            }
        }
        Ok(())
    }
}
