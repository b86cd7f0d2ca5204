//! Traffic routers as pure functions: from a router object as observed (a VirtualService, an
//! Ingress, a TrafficSplit, an HTTPRoute, ...) and the weights the engine wants, to the object
//! as it should be written. No client, no clock: every edit is table-tested without a cluster,
//! and the engine puts the result in its plan like any other write.
//!
//! Each router module offers the operations of one reconcile (set the weight, point
//! subsets at pod hashes, add or remove header and mirror routes) as functions returning
//! `Ok(None)` when the object is already as wanted, so that nothing is written, and
//! `observed_weight`, which reads the canary weight back out of an object: the scale-down
//! safety rule trusts what the router object says, never what was last written.
//!
//! Each router is one [`TrafficRouter`] implementation in its folder, listed once in
//! [`REGISTRY`]; the engine walks the registry and names no router.

mod cautious;
pub mod edits;
mod ingress;
pub mod kinds;
pub mod router;

pub use edits::Edits;
pub use router::{Notice, Report, TrafficRouter, View};

/// Declares each router's module (its folder) and lists its [`TrafficRouter`] in
/// [`REGISTRY`], from one line per router: `<folder>::<type>`.
macro_rules! registry {
    ($($module:ident :: $router:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every traffic router Sluice runs. A Rollout's routers are checked and edited in
        /// this order, so the order decides which problem is reported first and the order of
        /// the writes in a plan.
        pub static REGISTRY: &[&dyn TrafficRouter] = &[$(&$module::$router),*];
    };
}

registry! {
    istio::Istio,
    nginx::Nginx,
    alb::Alb,
    smi::Smi,
    traefik::Traefik,
    ambassador::Ambassador,
    apisix::Apisix,
    appmesh::AppMesh,
    gateway::GatewayApi,
    rpc_plugin::RpcPlugins,
}

use serde_json::Value;

/// A destination besides canary and stable (an experiment's Service).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Destination {
    pub service_name: String,
    pub pod_template_hash: String,
    pub weight: i32,
}

/// What the engine wants the routers to do in this reconcile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Desired {
    /// Name, namespace and uid of the Rollout (owner of created objects, default names).
    pub rollout: String,
    pub namespace: String,
    pub rollout_uid: String,
    pub canary_service: String,
    pub stable_service: String,
    /// Pod-template hashes of the canary and stable ReplicaSets (subset labels).
    pub canary_hash: String,
    pub stable_hash: String,
    /// Weight for the canary; stable gets `max_weight - weight - Σ additional`.
    pub weight: i32,
    pub additional: Vec<Destination>,
    /// `trafficRouting.maxTrafficWeight`, 100 when unset.
    pub max_weight: i32,
    /// `trafficRouting.managedRoutes` names, highest precedence first.
    pub managed_routes: Vec<String>,
}

impl Desired {
    /// The stable weight: what is left after canary and the additional destinations, never
    /// below zero.
    pub fn stable_weight(&self) -> i32 {
        let additional: i32 = self.additional.iter().map(|d| d.weight).sum();
        (self.max_weight - self.weight - additional).max(0)
    }

    /// The stable weight of a router that, as in Argo, ignores experiment destinations and
    /// splits 100 between canary and stable (Traefik, APISIX, App Mesh): validation forbids
    /// `maxTrafficWeight` and experiment weights with them, so `max_weight` and `additional`
    /// are not consulted, and the canary gets exactly its weight even when another router of
    /// the same Rollout weights an experiment.
    pub fn stable_weight_of_100(&self) -> i32 {
        100i32.saturating_sub(self.weight).max(0)
    }
}

/// Canary and stable weights as a router object routes them right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObservedWeight {
    pub canary: i32,
    pub stable: i32,
}

/// A router object that cannot be edited as asked; the message is Argo's where Argo has one,
/// and becomes the reconcile error (and a `TrafficRoutingError` event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterError(pub String);

impl std::fmt::Display for RouterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RouterError {}

impl RouterError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// The result of an edit: the object to write, and the event to publish once it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    pub object: Value,
    /// `(reason, message)` of the Normal event Argo publishes for this change.
    pub event: (&'static str, String),
}

pub type EditResult = Result<Option<Edit>, RouterError>;

/// An edit of a router object that Sluice may also remove: an Ambassador canary Mapping once
/// its weight is 0, an APISIX header route when its step ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Create the object (when it does not exist) or replace it.
    Write(Edit),
    /// Delete the object, publishing the event once it is gone.
    Delete { event: (&'static str, String) },
}

pub type ChangeResult = Result<Option<Change>, RouterError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each registered router answers to its own key under `trafficRouting` (or under
    /// `plugins` for a plugin) and to no other router's.
    #[test]
    fn each_router_is_registered_once_and_reads_its_own_key() {
        let mut keys: Vec<&str> = REGISTRY.iter().map(|r| r.key()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(
            keys.len(),
            REGISTRY.len(),
            "a key registered twice: {keys:?}"
        );
        for router in REGISTRY {
            let settings = serde_json::json!({ router.key(): {} });
            let routing = if router.is_plugin() {
                serde_json::json!({ "plugins": settings })
            } else if router.key() == "plugins" {
                // The plugin routers: any plugin name no built-in router answers to.
                serde_json::json!({ "plugins": { "acme/router": {} } })
            } else {
                settings
            };
            let routing: sluice_api::rollout::RolloutTrafficRouting =
                serde_json::from_value(routing).unwrap();
            let configured: Vec<&str> = REGISTRY
                .iter()
                .filter(|r| r.configured(&routing))
                .map(|r| r.key())
                .collect();
            assert_eq!(configured, [router.key()], "{}", router.key());
        }
    }

    #[test]
    fn stable_weights() {
        let desired = |weight, max_weight, additional: &[i32]| Desired {
            weight,
            max_weight,
            additional: additional
                .iter()
                .map(|&weight| Destination {
                    weight,
                    ..Destination::default()
                })
                .collect(),
            ..Desired::default()
        };
        let cases = [
            (desired(10, 100, &[]), 90, 90),
            (desired(10, 100, &[5]), 85, 90),
            (desired(10, 200, &[]), 190, 90),
            (desired(100, 100, &[]), 0, 0),
            (desired(120, 100, &[]), 0, 0),
        ];
        for (d, stable, of_100) in cases {
            assert_eq!(d.stable_weight(), stable, "{d:?}");
            assert_eq!(d.stable_weight_of_100(), of_100, "{d:?}");
        }
        assert_eq!(desired(i32::MIN, 100, &[]).stable_weight_of_100(), i32::MAX);
    }
}
