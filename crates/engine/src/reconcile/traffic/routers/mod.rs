//! The router objects of one Rollout: found (a missing one is a spec problem, as in Argo's
//! reference validation) and edited. Every router's edits in one reconcile are chained on a
//! working copy of each object, so that one object gets at most one write, carrying the
//! resourceVersion it was read at: a concurrent change makes the write fail with a conflict
//! and the next reconcile decides afresh.
//!
//! - `references`: which objects the controller fetches before reconciling;
//! - `resolve`: the objects found, per configured router;
//! - `edit`: one reconcile's edits, in Argo's call order, as plan actions;
//! - `read`: what the objects route now (the scale-down safety rule).

mod edit;
mod read;
mod references;
mod resolve;

use serde_json::Value;
use sluice_api::rollout::{
    AlbTrafficRouting, ApisixTrafficRouting, AppMeshTrafficRouting, IstioDestinationRule,
    IstioTrafficRouting, IstioVirtualService, NginxTrafficRouting, Rollout, RolloutTrafficRouting,
    SetHeaderRoute, SetMirrorRoute, SmiTrafficRouting,
};
use sluice_routers::Desired;
use sluice_routers::gateway;
use sluice_routers::kinds::{ApiVersions, ObjectRef};

use super::GATEWAY_API_PLUGIN;

pub(crate) use edit::Edits;
pub use references::{dependent_references, references, selections};
pub(crate) use resolve::resolve;

/// One configured router with its objects as observed.
pub(crate) enum Router<'a> {
    Istio {
        virtual_services: Vec<(ObjectRef, &'a IstioVirtualService, &'a Value)>,
        destination_rule: Option<(ObjectRef, &'a IstioDestinationRule, &'a Value)>,
    },
    Nginx {
        cfg: &'a NginxTrafficRouting,
        max_weight: Option<i32>,
        /// (stable Ingress, the canary Ingress's key, the canary Ingress if it exists)
        ingresses: Vec<(&'a Value, ObjectRef, Option<&'a Value>)>,
    },
    Alb {
        cfg: &'a AlbTrafficRouting,
        ingresses: Vec<(ObjectRef, &'a Value)>,
        /// ALB's (canary, stable) Services: the ping-pong pair when there is one.
        services: (String, String),
    },
    Smi {
        cfg: &'a SmiTrafficRouting,
        key: ObjectRef,
        existing: Option<&'a Value>,
    },
    Traefik {
        key: ObjectRef,
        object: &'a Value,
    },
    Ambassador {
        /// (base Mapping, the canary Mapping's key, the canary Mapping if it exists)
        mappings: Vec<(&'a Value, ObjectRef, Option<&'a Value>)>,
    },
    Apisix {
        cfg: &'a ApisixTrafficRouting,
        key: ObjectRef,
        route: &'a Value,
        /// Header routes of the steps and managedRoutes: key and the object if it exists.
        header_routes: Vec<(ObjectRef, Option<&'a Value>)>,
    },
    AppMesh {
        cfg: &'a AppMeshTrafficRouting,
        namespace: String,
        router: (ObjectRef, &'a Value),
        canary_node: (ObjectRef, &'a Value),
        stable_node: (ObjectRef, &'a Value),
    },
    Gateway {
        cfg: gateway::Config,
        routes: Vec<(ObjectRef, gateway::RouteKind, bool, &'a Value)>,
    },
}

/// What one reconcile asks of the routers.
pub(crate) struct Calls<'a> {
    pub desired: &'a Desired,
    pub remove_managed_routes: bool,
    /// Names of every route a header or mirror step manages (for removal).
    pub step_route_names: Vec<String>,
    pub header_route: Option<&'a SetHeaderRoute>,
    pub mirror_route: Option<&'a SetMirrorRoute>,
    /// Experiment destinations recorded in the status last time (the Gateway API removes
    /// them once the experiment is over).
    pub previous_additional: Vec<String>,
    pub versions: &'a ApiVersions,
    pub rollout_name: &'a str,
    /// The time, for edits that wait (an Ambassador canary Mapping is deleted only a while
    /// after its weight went to 0).
    pub now: jiff::Timestamp,
}

fn virtual_services(i: &IstioTrafficRouting) -> Vec<&IstioVirtualService> {
    i.virtual_service
        .iter()
        .chain(i.virtual_services.iter().flatten())
        .collect()
}

fn gateway_config(routing: &RolloutTrafficRouting) -> Option<Result<gateway::Config, String>> {
    let v = routing.plugins.as_ref()?.get(GATEWAY_API_PLUGIN)?;
    Some(gateway::parse_config(v).map_err(|e| e.to_string()))
}

/// The names of the header routes of a Rollout's `setHeaderRoute` steps and its
/// `managedRoutes` (APISIX keeps each in an ApisixRoute of that name).
fn header_route_names(rollout: &Rollout) -> Vec<String> {
    let Some(canary) = rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
    else {
        return Vec::new();
    };
    let mut names: Vec<String> = crate::steps::steps(canary)
        .iter()
        .filter_map(|s| s.set_header_route.as_ref()?.name.clone())
        .collect();
    let managed = canary
        .traffic_routing
        .as_ref()
        .and_then(|r| r.managed_routes.as_ref());
    for m in managed.into_iter().flatten() {
        if let Some(name) = &m.name
            && !names.contains(name)
        {
            names.push(name.clone());
        }
    }
    names
}

/// `desired` with another pair of canary and stable Services (ALB's ping-pong pair).
fn with_services(desired: &Desired, services: &(String, String)) -> Desired {
    Desired {
        canary_service: services.0.clone(),
        stable_service: services.1.clone(),
        ..desired.clone()
    }
}

impl Router<'_> {
    /// The Services this router weighs, when they differ from the Rollout's usual pair.
    pub(crate) fn own_services(&self) -> Option<&(String, String)> {
        match self {
            Router::Alb { services, .. } => Some(services),
            _ => None,
        }
    }

    /// Whether this router confirms the weights it was given (`weights.verified`): the Gateway
    /// API plugin always says so. The other built-in routers have nothing to verify, and ALB
    /// verification needs the AWS API, which Sluice does not call: it never claims it.
    pub(crate) fn verifies(&self) -> bool {
        matches!(self, Router::Gateway { .. })
    }
}
