//! NGINX ingress: for every stable Ingress, a canary Ingress the Rollout owns, cloned from the
//! stable one with its paths pointed at the canary Service and the `canary-weight` annotations
//! that make ingress-nginx split traffic.
//!
//! Header routes (`setHeaderRoute`, which Argo refuses for NGINX) are annotations of the canary
//! Ingress ([`set_header_route`]); NGINX has no mirror or hash operations (no-ops in Argo), and
//! the canary Ingress is never deleted: after promotion it stays at weight 0 until the Rollout is
//! garbage-collected with it.

mod adapter;
mod desired;
mod header_route;
mod names;
mod observed;
pub(crate) mod owner;
mod set_weight;

pub use adapter::Nginx;
pub use desired::desired_canary_ingress;
pub use header_route::{
    HEADER_ANNOTATIONS, HEADER_ROUTE_ANNOTATION, remove_header_route, set_header_route,
};
pub use names::{canary_ingress_name, stable_ingresses};
pub use observed::observed_weight;
pub use set_weight::set_weight;

use sluice_api::rollout::NginxTrafficRouting;

/// Prefix of the ingress-nginx annotations when `nginx.annotationPrefix` is unset.
pub const DEFAULT_ANNOTATION_PREFIX: &str = "nginx.ingress.kubernetes.io";

/// `nginx.annotationPrefix`, or the ingress-nginx default. An empty prefix counts as unset,
/// as in Argo.
pub fn annotation_prefix(cfg: &NginxTrafficRouting) -> &str {
    cfg.annotation_prefix
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_ANNOTATION_PREFIX)
}

#[cfg(test)]
pub(crate) mod fixtures {
    use serde_json::{Value, json};
    use sluice_api::rollout::NginxTrafficRouting;

    use crate::Desired;

    /// `nginx.stableIngress: web-ingress`, the rest unset.
    pub fn cfg() -> NginxTrafficRouting {
        NginxTrafficRouting {
            stable_ingress: Some("web-ingress".into()),
            ..NginxTrafficRouting::default()
        }
    }

    /// The Rollout of the corpus' `nginx-template.yaml`, at a 10% canary step.
    pub fn desired() -> Desired {
        Desired {
            rollout: "web".into(),
            namespace: "shop".into(),
            rollout_uid: "uid-web".into(),
            canary_service: "web-canary".into(),
            stable_service: "web-stable".into(),
            canary_hash: "c4n4ry".into(),
            stable_hash: "5t4b1e".into(),
            weight: 10,
            max_weight: 100,
            ..Desired::default()
        }
    }

    /// The stable Ingress of `test/e2e/functional/nginx-template.yaml` (v1.9.1 corpus).
    pub fn stable_ingress() -> Value {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "web-ingress",
                "namespace": "shop",
                "resourceVersion": "41",
                "annotations": {"kubernetes.io/ingress.class": "nginx"}
            },
            "spec": {
                "rules": [{
                    "http": {"paths": [{
                        "path": "/*",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": "web-stable", "port": {"number": 80}}}
                    }]}
                }]
            }
        })
    }
}
