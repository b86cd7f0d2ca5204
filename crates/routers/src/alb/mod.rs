//! AWS Application Load Balancer: the AWS Load Balancer Controller turns annotations of an
//! Ingress into listener rules, so the Rollout steers traffic by writing them.
//!
//! - The weights live in `<prefix>/actions.<actionService>`: a forward action splitting the
//!   action Service's path between the canary, the experiment Services and the stable Service.
//!   The action Service is `rootService`, else the stable Service; a path of the Ingress must
//!   send its traffic there (port name `use-annotation`).
//! - A header route is `<prefix>/actions.<route>` (forward to the canary) plus
//!   `<prefix>/conditions.<route>` (the header matches), and a `/*` path with backend
//!   `<route>` at the top of each rule, managed routes first in `managedRoutes` order.
//! - `rollouts.argoproj.io/managed-alb-annotations` records, per Rollout, the annotation keys
//!   it owns, so that those can be reset once the Rollout is gone.
//!
//! The annotation values are written byte for byte as Argo writes them (Go's `encoding/json`:
//! fields in declaration order, compact, `<`, `>` and `&` escaped), so that the Ingress does
//! not change hands between the two controllers and dashboards reading it see the same text.
//!
//! Every function edits one Ingress; the engine calls it once per Ingress of `ingress` or
//! `ingresses[]`. Where Argo differs, deliberately:
//! - Argo stops at the first Ingress that needs no change, so later Ingresses of
//!   `ingresses[]` are not updated in that reconcile; here each Ingress is handled on its own.
//! - The stable weight is never written below 0 (Argo writes `100 − canary − Σexperiments`
//!   even when negative, which the load balancer controller rejects).
//! - The header-route event names the route (Argo's message formats the step as a Go
//!   pointer).
//! - A header route with an empty `match: []` is an error: Argo writes conditions `null`,
//!   a rule without conditions that would send all of the path's traffic to the canary.
//! - Removing routes leaves `managed-alb-annotations` alone when it has no entry for the
//!   Rollout (Argo adds an empty one), removes every path of a removed route rather than the
//!   first of each rule, and rules without `http` are skipped (Argo would crash on them).
//!
//! Verification (`--aws-verify-target-group`): the controller asks AWS which weights the load
//! balancer routes, and [`verify`] judges them as Argo does; without the flag `weights.verified`
//! is never claimed and `status.alb`/`status.albs` are cleared, as in Argo.

mod action;
mod adapter;
#[cfg(test)]
mod corpus_tests;
mod go_json;
mod header_route;
mod ingress;
mod managed;
mod observed;
mod remove;
mod set_weight;
pub mod verify;
#[cfg(test)]
mod verify_tests;

pub use adapter::Alb;
pub use header_route::set_header_route;

/// Argo's reference validation of an ALB Ingress: some rule path must have the action Service
/// (`rootService`, else the stable Service) as its backend, else the Ingress cannot carry the
/// weights. The detail of the field error, for the engine to place.
pub fn check_ingress(
    ingress: &Value,
    cfg: &AlbTrafficRouting,
    desired: &Desired,
) -> Result<(), RouterError> {
    let service = action_service(cfg, desired);
    if ingress::has_backend(ingress, service) {
        return Ok(());
    }
    Err(RouterError::new(format!(
        "ingress `{}` has no rules using service {service} backend",
        ingress::name(ingress)
    )))
}
pub use managed::MANAGED_ANNOTATIONS;
pub use observed::observed_weight;
pub use remove::remove_managed_routes;
pub use set_weight::set_weight;

use sluice_api::rollout::AlbTrafficRouting;

use serde_json::Value;

use crate::{Desired, RouterError};

/// Prefix of the AWS Load Balancer Controller annotations when `alb.annotationPrefix` is
/// unset.
pub const DEFAULT_ANNOTATION_PREFIX: &str = "alb.ingress.kubernetes.io";

/// Reason of every event for an ALB Ingress change.
pub const PATCHING_REASON: &str = "PatchingALBIngress";

/// `alb.annotationPrefix`, or the load balancer controller's default. An empty prefix counts
/// as unset, as in Argo.
pub fn annotation_prefix(cfg: &AlbTrafficRouting) -> &str {
    cfg.annotation_prefix
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_ANNOTATION_PREFIX)
}

/// The Ingresses the Rollout routes through: `alb.ingresses[]` when given (Argo's
/// precedence), else `alb.ingress`. Validation lets exactly one of them through.
pub fn ingresses(cfg: &AlbTrafficRouting) -> Vec<String> {
    match (&cfg.ingresses, &cfg.ingress) {
        (Some(list), _) if !list.is_empty() => list.clone(),
        (_, Some(one)) if !one.is_empty() => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// The Service whose action annotation carries the weights: `rootService`, else the stable
/// Service. With ping-pong `rootService` is required, so the name never flips with the
/// ping-pong Services.
pub fn action_service<'a>(cfg: &'a AlbTrafficRouting, desired: &'a Desired) -> &'a str {
    cfg.root_service
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(&desired.stable_service)
}

/// `<prefix>/actions.<name>`: the action of the weights (named after the action Service) or of
/// a header route (named after the route).
pub fn action_key(cfg: &AlbTrafficRouting, name: &str) -> String {
    format!("{}/actions.{name}", annotation_prefix(cfg))
}

/// `<prefix>/conditions.<route>`: the header conditions of a header route.
pub fn condition_key(cfg: &AlbTrafficRouting, route: &str) -> String {
    format!("{}/conditions.{route}", annotation_prefix(cfg))
}

#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::{Value, json};
    use sluice_api::rollout::AlbTrafficRouting;

    use crate::Desired;

    /// The Rollout of the corpus' `test/e2e/functional/alb-canary-rollout.yaml` at its 10%
    /// step.
    pub fn desired() -> Desired {
        Desired {
            rollout: "alb-canary".into(),
            namespace: "shop".into(),
            rollout_uid: "uid-alb-canary".into(),
            canary_service: "alb-canary-desired".into(),
            stable_service: "alb-canary-stable".into(),
            weight: 10,
            max_weight: 100,
            ..Desired::default()
        }
    }

    /// Its `trafficRouting.alb`.
    pub fn cfg() -> AlbTrafficRouting {
        AlbTrafficRouting {
            ingress: Some("alb-canary-ingress".into()),
            root_service: Some("alb-canary-root".into()),
            service_port: Some(80),
            ..AlbTrafficRouting::default()
        }
    }

    /// Its Ingress, as the API server returns it.
    pub fn ingress() -> Value {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "alb-canary-ingress",
                "namespace": "shop",
                "resourceVersion": "12",
                "annotations": {"kubernetes.io/ingress.class": "alb"}
            },
            "spec": {
                "rules": [{
                    "http": {"paths": [{
                        "path": "/*",
                        "pathType": "ImplementationSpecific",
                        "backend": {"service": {
                            "name": "alb-canary-root",
                            "port": {"name": "use-annotation"}
                        }}
                    }]}
                }]
            }
        })
    }

    /// A path of a rule, in the `networking.k8s.io/v1` shape.
    pub fn path(path: &str, service: &str, port: Value) -> Value {
        json!({
            "path": path,
            "pathType": "ImplementationSpecific",
            "backend": {"service": {"name": service, "port": port}}
        })
    }

    /// The annotation path of a header route, as `set_header_route` inserts it.
    pub fn route_path(route: &str) -> Value {
        path("/*", route, json!({"name": "use-annotation"}))
    }

    /// An annotation of `ingress`.
    pub fn annotation<'a>(ingress: &'a Value, key: &str) -> Option<&'a str> {
        ingress
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{cfg, desired};
    use super::*;

    #[test]
    fn prefix_defaults() {
        let with = |prefix: Option<&str>| AlbTrafficRouting {
            annotation_prefix: prefix.map(str::to_string),
            ..AlbTrafficRouting::default()
        };
        let cases = [
            (None, "alb.ingress.kubernetes.io"),
            (Some(""), "alb.ingress.kubernetes.io"),
            (Some("custom.alb.io"), "custom.alb.io"),
        ];
        for (prefix, want) in cases {
            assert_eq!(annotation_prefix(&with(prefix)), want, "{prefix:?}");
        }
        assert_eq!(
            action_key(&with(Some("custom.alb.io")), "root"),
            "custom.alb.io/actions.root"
        );
        assert_eq!(
            condition_key(&with(None), "header-route"),
            "alb.ingress.kubernetes.io/conditions.header-route"
        );
    }

    #[test]
    fn ingress_names() {
        let with = |one: Option<&str>, many: Option<Vec<&str>>| AlbTrafficRouting {
            ingress: one.map(str::to_string),
            ingresses: many.map(|l| l.into_iter().map(str::to_string).collect()),
            ..AlbTrafficRouting::default()
        };
        let cases = [
            (with(Some("a"), None), vec!["a"]),
            (with(None, Some(vec!["a", "b"])), vec!["a", "b"]),
            (with(Some(""), Some(vec!["b"])), vec!["b"]),
            (with(Some("a"), Some(vec![])), vec!["a"]),
            (with(Some(""), None), vec![]),
            (with(None, None), vec![]),
        ];
        for (cfg, want) in cases {
            assert_eq!(ingresses(&cfg), want, "{cfg:?}");
        }
    }

    #[test]
    fn action_service_is_root_else_stable() {
        let d = desired();
        assert_eq!(action_service(&cfg(), &d), "alb-canary-root");
        let no_root = AlbTrafficRouting {
            root_service: None,
            ..cfg()
        };
        assert_eq!(action_service(&no_root, &d), "alb-canary-stable");
        let empty_root = AlbTrafficRouting {
            root_service: Some(String::new()),
            ..cfg()
        };
        assert_eq!(action_service(&empty_root, &d), "alb-canary-stable");
    }
}
