//! Gateway API routes (HTTPRoute, GRPCRoute, TCPRoute, TLSRoute), as the traffic-router
//! plugin `argoproj-labs/gatewayAPI` v0.15.0 edits them. Sluice builds the plugin in: a
//! Rollout with `trafficRouting.plugins["argoproj-labs/gatewayAPI"]` works without a plugin
//! binary, and the configuration under that key is read by [`parse_config`].
//!
//! **Managed rules.** On HTTP and GRPC routes a rule is Sluice's (a header route) when its
//! `name` is a `managedRoutes` entry or such an entry followed by `-<n>`, or when its only
//! backendRef is the canary Service. Weights are never set on managed rules; route removal
//! deletes them.
//!
//! **Events.** The plugin publishes none. Sluice publishes, on each write, a Normal event
//! with reason `Updated<Kind>` (`UpdatedHTTPRoute`, `UpdatedGRPCRoute`, `UpdatedTCPRoute`,
//! `UpdatedTLSRoute`) and one of these messages:
//! - ``<Kind> `<route>` set to desiredWeight '<N>'`` (weights),
//! - ``<Kind> `<route>` set headerRoute '<name>'`` (header route),
//! - ``<Kind> `<route>` removed all managed routes.`` (removal).
//!
//! The plugin's other operations (UpdateHash, SetMirrorRoute) do nothing, and its weight
//! verification always answers "verified".

mod adapter;
mod config;
mod experiment;
mod header_route;
mod kind;
mod label;
mod managed;
mod rules;
mod weights;

pub use adapter::GatewayApi;
pub use config::{
    Config, DEFAULT_IN_PROGRESS_LABEL_KEY, DEFAULT_IN_PROGRESS_LABEL_VALUE, RouteReference,
    RouteSelector, parse_config,
};
pub use experiment::{Experiments, experiment_port};
pub use header_route::set_header_route;
pub use kind::RouteKind;
pub use managed::remove_managed_routes;
pub use weights::{observed_weight, set_weight};

/// Key of the plugin under `trafficRouting.plugins`.
pub const PLUGIN_NAME: &str = "argoproj-labs/gatewayAPI";

#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::{Value, json};

    use super::{Config, parse_config};
    use crate::Desired;

    /// The plugin's example Rollout at a 30% step, with one managed route.
    pub fn desired() -> Desired {
        Desired {
            rollout: "rollouts-demo".into(),
            namespace: "default".into(),
            rollout_uid: "uid-demo".into(),
            canary_service: "argo-rollouts-canary-service".into(),
            stable_service: "argo-rollouts-stable-service".into(),
            weight: 30,
            max_weight: 100,
            managed_routes: vec!["header-route".into()],
            ..Desired::default()
        }
    }

    pub fn config() -> Config {
        parse_config(&json!({"httpRoute": "argo-rollouts-http-route", "namespace": "default"}))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The plugin's example HTTPRoute, grown to three user rules: the split one, an /api rule
    /// with a filter and a query match, and one to an unrelated Service.
    pub fn http_route() -> Value {
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "argo-rollouts-http-route", "namespace": "default", "resourceVersion": "9"},
            "spec": {
                "parentRefs": [{"name": "traefik-gateway", "namespace": "default"}],
                "hostnames": ["demo.example.com"],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                        "backendRefs": [
                            {"name": "argo-rollouts-stable-service", "kind": "Service", "port": 80, "weight": 100},
                            {"name": "argo-rollouts-canary-service", "kind": "Service", "port": 80, "weight": 0}
                        ]
                    },
                    {
                        "name": "api",
                        "matches": [
                            {"path": {"type": "PathPrefix", "value": "/api"}, "method": "GET",
                             "queryParams": [{"type": "Exact", "name": "v", "value": "2"}],
                             "headers": [{"type": "Exact", "name": "x-tenant", "value": "a"}]},
                            {"path": {"type": "Exact", "value": "/api/health"}}
                        ],
                        "filters": [{"type": "RequestHeaderModifier",
                                     "requestHeaderModifier": {"add": [{"name": "x-via", "value": "gw"}]}}],
                        "backendRefs": [
                            {"name": "argo-rollouts-stable-service", "port": 8080},
                            {"name": "argo-rollouts-canary-service", "port": 8080}
                        ]
                    },
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/static"}}],
                        "backendRefs": [{"name": "assets", "port": 80}]
                    }
                ]
            }
        })
    }
}
