//! The routers of one Rollout, as the registry of `sluice_routers` lists them: the objects
//! they reference, found and checked (a missing one is a spec problem, as in Argo's reference
//! validation), read back and edited. Every router's edits in one reconcile are chained on a
//! working copy of each object, so that one object gets at most one write, carrying the
//! resourceVersion it was read at. No router is named here.

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_api::rollout::{Rollout, RolloutStatus};
use sluice_routers::edits::Write;
use sluice_routers::kinds::{ApiVersions, ObjectRef, RouterKind};
use sluice_routers::router::{Calls, Shares};
use sluice_routers::{Desired, Edits, ObservedWeight, REGISTRY, Report, TrafficRouter, View};

use crate::plan::{Action, Event};

/// The registered routers that serve a Rollout, in the registry's order.
fn configured<'v>(view: &'v View<'_>) -> impl Iterator<Item = &'static dyn TrafficRouter> + 'v {
    REGISTRY
        .iter()
        .copied()
        .filter(move |r| r.serves(view.routing, view.versions))
}

fn collect(
    rollout: &Rollout,
    versions: &ApiVersions,
    objects: &BTreeMap<ObjectRef, Value>,
    refs: impl Fn(&dyn TrafficRouter, &View<'_>) -> Vec<ObjectRef>,
) -> Vec<ObjectRef> {
    let Some(view) = View::of(rollout, versions, objects, Default::default()) else {
        return Vec::new();
    };
    let mut all: Vec<ObjectRef> = configured(&view).flat_map(|r| refs(r, &view)).collect();
    all.sort();
    all.dedup();
    all
}

/// The objects a Rollout's routers read, for the controller to fetch before reconciling.
pub fn references(rollout: &Rollout, versions: &ApiVersions) -> Vec<ObjectRef> {
    collect(rollout, versions, &BTreeMap::new(), |r, view| {
        r.references(view)
    })
}

/// Objects that other router objects name, fetched after [`references`].
pub fn dependent_references(
    rollout: &Rollout,
    versions: &ApiVersions,
    objects: &BTreeMap<ObjectRef, Value>,
) -> Vec<ObjectRef> {
    collect(rollout, versions, objects, |r, view| {
        r.dependent_references(view)
    })
}

/// Router objects found by label selector: kind, namespace and selector, for the controller
/// to list before reconciling.
pub fn selections(rollout: &Rollout) -> Vec<(RouterKind, String, String)> {
    let versions = ApiVersions::default();
    let objects = BTreeMap::new();
    let Some(view) = View::of(rollout, &versions, &objects, Default::default()) else {
        return Vec::new();
    };
    configured(&view)
        .flat_map(|r| r.selections(&view))
        .map(|s| {
            let text = crate::selector::format_selector(&s.selector);
            (s.kind, s.namespace, text)
        })
        .collect()
}

/// The configured routers with the objects observed.
pub(crate) struct Routers<'a> {
    view: Option<View<'a>>,
    list: Vec<&'static dyn TrafficRouter>,
}

impl<'a> Routers<'a> {
    /// No routers (a blue-green Rollout, or a canary without traffic routing).
    pub(crate) fn none() -> Self {
        Self {
            view: None,
            list: Vec::new(),
        }
    }

    /// Each configured router's objects, checked in the registry's order: the first problem
    /// is the reconcile's error.
    pub(crate) fn resolve(
        rollout: &'a Rollout,
        versions: &'a ApiVersions,
        objects: &'a BTreeMap<ObjectRef, Value>,
        ping_pong_services: (String, String),
        desired: &Desired,
    ) -> Result<Self, String> {
        let Some(view) = View::of(rollout, versions, objects, ping_pong_services) else {
            return Ok(Self::none());
        };
        let list: Vec<_> = configured(&view).collect();
        for router in &list {
            router.check(&view, desired)?;
        }
        Ok(Self {
            view: Some(view),
            list,
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn each(&self) -> impl Iterator<Item = (&'static dyn TrafficRouter, &View<'a>)> {
        self.view
            .iter()
            .flat_map(|view| self.list.iter().map(move |r| (*r, view)))
    }

    /// What each router routes now, and to which pods.
    pub(crate) fn observed(
        &self,
        desired: &Desired,
    ) -> impl Iterator<Item = (Option<ObservedWeight>, Shares)> {
        self.each()
            .map(move |(r, view)| (r.observed_weight(view, desired), r.shares(view)))
    }

    /// What the routers' objects say of the weight `desired` asks for: not verified when one
    /// says no, verified when one says yes and none no, nothing otherwise. What they found
    /// goes into `status` and `events`.
    pub(crate) fn weight_verified(
        &self,
        desired: &Desired,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
    ) -> Option<bool> {
        let mut report = Report {
            status,
            events: Vec::new(),
        };
        let verdict = self
            .each()
            .filter_map(|(r, view)| r.weight_verified(view, desired, &mut report))
            .reduce(|a, b| a && b);
        events.extend(report.events.into_iter().map(|n| {
            if n.warning {
                Event::warning(n.reason, n.message)
            } else {
                Event::normal(n.reason, n.message)
            }
        }));
        verdict
    }

    /// Every router's edits for one reconcile, as plan actions with their events and the
    /// time to look again; the first router error stops them all.
    pub(crate) fn edit(&self, calls: &Calls<'_>) -> Result<Edited, String> {
        let mut edits = Edits::default();
        for (router, view) in self.each() {
            edits.silence(router.silent_reasons());
            router.edit(view, calls, &mut edits)?;
        }
        let events = std::mem::take(&mut edits.events)
            .into_iter()
            .map(|(reason, message)| Event::normal(reason, message))
            .collect();
        let requeue = edits.requeue;
        let actions = edits
            .into_writes()
            .into_iter()
            .map(|(target, write)| match write {
                Write::Create(object) => Action::CreateRouterObject {
                    target,
                    object: Box::new(object),
                },
                Write::Update(object) => Action::UpdateRouterObject {
                    target,
                    object: Box::new(object),
                },
                Write::Delete { uid } => Action::DeleteRouterObject { target, uid },
            })
            .collect();
        Ok(Edited {
            actions,
            events,
            requeue,
        })
    }
}

/// One reconcile's router writes.
pub(crate) struct Edited {
    pub actions: Vec<Action>,
    pub events: Vec<Event>,
    pub requeue: Option<std::time::Duration>,
}
