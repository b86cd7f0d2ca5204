//! What every traffic router offers the engine, as one trait: the objects it references, the
//! checks of those objects (Argo's reference validation), the weights they route now, and one
//! reconcile's edits of weights, header routes and mirror routes. The engine walks
//! [`crate::REGISTRY`] and never names a router.
//!
//! A router keeps no state between calls: every method looks its objects up again in the
//! [`View`], so that the engine can hold the routers as plain `&'static dyn TrafficRouter`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use sluice_api::rollout::{
    Rollout, RolloutStatus, RolloutTrafficRouting, SetHeaderRoute, SetMirrorRoute,
};

use crate::edits::Edits;
use crate::kinds::{ApiVersions, ObjectRef, RouterKind};
use crate::{Desired, ObservedWeight};

/// The field path of the routers' settings, for error messages.
pub const PATH: &str = "spec.strategy.canary.trafficRouting";

/// What a router sees of one Rollout: its settings and the router objects observed.
pub struct View<'a> {
    pub rollout: &'a Rollout,
    pub routing: &'a RolloutTrafficRouting,
    pub namespace: &'a str,
    pub name: &'a str,
    pub versions: &'a ApiVersions,
    /// The router objects fetched (empty while the references are being worked out).
    pub objects: &'a BTreeMap<ObjectRef, Value>,
    /// The (canary, stable) Services of the ping-pong pair when the Rollout has one, else its
    /// canary and stable Services: a router that weighs the ping-pong pair itself uses these.
    pub ping_pong_services: (String, String),
}

impl<'a> View<'a> {
    /// The view of a Rollout with traffic routing; `None` without.
    pub fn of(
        rollout: &'a Rollout,
        versions: &'a ApiVersions,
        objects: &'a BTreeMap<ObjectRef, Value>,
        ping_pong_services: (String, String),
    ) -> Option<Self> {
        let routing = rollout
            .spec
            .strategy
            .as_ref()
            .and_then(|s| s.canary.as_ref())
            .and_then(|c| c.traffic_routing.as_ref())?;
        Some(Self {
            rollout,
            routing,
            namespace: rollout.metadata.namespace.as_deref().unwrap_or_default(),
            name: rollout.metadata.name.as_deref().unwrap_or_default(),
            versions,
            objects,
            ping_pong_services,
        })
    }

    /// An object of the Rollout's namespace.
    pub fn named(&self, kind: RouterKind, name: &str) -> ObjectRef {
        ObjectRef::new(kind, self.namespace, name)
    }

    /// The object observed under `key`, or Argo's reference-validation error at `path`
    /// (relative to `trafficRouting`).
    pub fn find(&self, path: &str, key: &ObjectRef) -> Result<&'a Value, String> {
        self.objects.get(key).ok_or_else(|| not_found(path, key))
    }

    /// The names of the header routes of the Rollout's `setHeaderRoute` steps and its
    /// `managedRoutes`, each once, steps first.
    pub fn header_route_names(&self) -> Vec<String> {
        let Some(canary) = self
            .rollout
            .spec
            .strategy
            .as_ref()
            .and_then(|s| s.canary.as_ref())
        else {
            return Vec::new();
        };
        let mut names: Vec<String> = canary
            .steps
            .iter()
            .flatten()
            .filter_map(|s| s.set_header_route.as_ref()?.name.clone())
            .collect();
        for m in self.routing.managed_routes.iter().flatten() {
            if let Some(name) = &m.name
                && !names.contains(name)
            {
                names.push(name.clone());
            }
        }
        names
    }
}

/// A missing object, in the Kubernetes wording Argo's reference validation uses; `path` is
/// relative to `trafficRouting`.
/// Where a router's verification leaves what it found: the Rollout's status (for fields only
/// that router writes, like `status.alb`) and events.
pub struct Report<'s> {
    pub status: &'s mut RolloutStatus,
    pub events: Vec<Notice>,
}

/// One event a router asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Notice {
    pub fn normal(reason: &'static str, message: String) -> Self {
        Self {
            warning: false,
            reason,
            message,
        }
    }

    pub fn warning(reason: &'static str, message: String) -> Self {
        Self {
            warning: true,
            reason,
            message,
        }
    }
}

fn not_found(path: &str, key: &ObjectRef) -> String {
    format!(
        "{PATH}.{path}: Invalid value: \"{name}\": {plural}.{group} \"{name}\" not found",
        name = key.name,
        plural = key.kind.plural(),
        group = key.kind.group(),
    )
}

/// Router objects found by label selector, for the controller to list before reconciling.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    pub kind: RouterKind,
    pub namespace: String,
    pub selector: LabelSelector,
}

/// Which pods get the canary and stable shares a router routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SharesBy {
    /// The pods the Rollout's canary and stable Services select.
    #[default]
    RolloutServices,
    /// The pods these (canary, stable) Services select: the router weighs the ping-pong pair.
    PingPongServices(String, String),
    /// Pods by hash, as the router's own objects select them.
    Hashes {
        canary: Option<String>,
        stable: Option<String>,
    },
    /// Pods by hash where the router's objects name one, else by the Rollout's Services.
    HashesOrServices {
        canary: Option<String>,
        stable: Option<String>,
    },
}

/// Which pods a router's weights reach: the scale-down safety rule keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shares {
    pub by: SharesBy,
    /// Hashes the router's objects still name besides: those pods may get traffic.
    pub also_named: Vec<String>,
}

/// What one reconcile asks of the routers.
pub struct Calls<'a> {
    pub desired: &'a Desired,
    pub remove_managed_routes: bool,
    /// Names of every route a header or mirror step manages (for removal).
    pub step_route_names: Vec<String>,
    pub header_route: Option<&'a SetHeaderRoute>,
    pub mirror_route: Option<&'a SetMirrorRoute>,
    /// Experiment destinations recorded in the status last time (a router removes them once
    /// the experiment is over).
    pub previous_additional: Vec<String>,
    pub versions: &'a ApiVersions,
    pub rollout_name: &'a str,
    /// The time, for edits that wait (a canary object deleted only a while after its weight
    /// went to 0).
    pub now: jiff::Timestamp,
}

/// One traffic router. An implementation lives in the router's folder and is listed once in
/// [`crate::REGISTRY`].
pub trait TrafficRouter: Sync {
    /// The router's key under `trafficRouting` (Argo's field name), or the plugin's name under
    /// `trafficRouting.plugins` for a router Argo runs as a plugin.
    fn key(&self) -> &'static str;

    /// Whether the router runs as a plugin of Argo's (configured under `plugins`).
    fn is_plugin(&self) -> bool {
        false
    }

    /// Whether the Rollout configures this router.
    fn configured(&self, routing: &RolloutTrafficRouting) -> bool;

    /// Whether this router serves the Rollout in an installation that runs `versions`: a
    /// built-in plugin router that `argo-rollouts-config` points at a binary does not (the
    /// binary does, through the plugin routers).
    fn serves(&self, routing: &RolloutTrafficRouting, versions: &ApiVersions) -> bool {
        self.configured(routing)
            && !(self.is_plugin() && versions.plugin_binaries.contains(self.key()))
    }

    /// The objects the router reads, for the controller to fetch before reconciling.
    fn references(&self, view: &View<'_>) -> Vec<ObjectRef>;

    /// Objects other router objects name, fetched after [`Self::references`] (they are in
    /// `view.objects`).
    fn dependent_references(&self, _view: &View<'_>) -> Vec<ObjectRef> {
        Vec::new()
    }

    /// Objects found by label selector, listed before reconciling.
    fn selections(&self, _view: &View<'_>) -> Vec<Selection> {
        Vec::new()
    }

    /// Argo's reference validation: every object the router needs is there and can be routed
    /// as configured. The error is the InvalidSpec message.
    fn check(&self, view: &View<'_>, desired: &Desired) -> Result<(), String>;

    /// The canary and stable weights the router's objects route now (`None`: nothing to say).
    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight>;

    /// Which pods the weights reach.
    fn shares(&self, _view: &View<'_>) -> Shares {
        Shares::default()
    }

    /// Whether the router's objects confirm the weight `desired` asks for
    /// (`weights.verified`): `Some(false)` holds the step until they do; `None` when the
    /// router has nothing to say. A router may record what it found in the status and say so
    /// in events, through `report`.
    fn weight_verified(
        &self,
        _view: &View<'_>,
        _desired: &Desired,
        _report: &mut Report<'_>,
    ) -> Option<bool> {
        None
    }

    /// Reasons of this router's updates Argo publishes no event for (it writes those objects
    /// silently).
    fn silent_reasons(&self) -> &'static [&'static str] {
        &[]
    }

    /// Every edit of this router for one reconcile, in Argo's call order: managed routes
    /// removed, the current step's header or mirror route, subset hashes, the weight.
    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String>;
}

/// The weights of several objects of one router: the largest canary and the largest stable
/// weight any of them routes.
pub fn widest(weights: impl IntoIterator<Item = Option<ObservedWeight>>) -> Option<ObservedWeight> {
    weights.into_iter().fold(None, |a, b| match (a, b) {
        (Some(a), Some(b)) => Some(ObservedWeight {
            canary: a.canary.max(b.canary),
            stable: a.stable.max(b.stable),
        }),
        (a, b) => a.or(b),
    })
}

/// The route name of a header or mirror step. An unnamed step is refused by every router: for
/// Istio, removing "the route named ''" would remove the user's unnamed primary route.
pub(crate) fn step_name<'a>(
    name: Option<&'a str>,
    step: &str,
) -> Result<&'a str, crate::RouterError> {
    name.filter(|n| !n.is_empty())
        .ok_or_else(|| crate::RouterError::new(format!("{step} step has no route name")))
}
