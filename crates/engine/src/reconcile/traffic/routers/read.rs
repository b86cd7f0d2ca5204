//! What the router objects route right now: the canary and stable weights read back, and the
//! pod hashes that DestinationRule subsets and App Mesh VirtualNodes select. The scale-down
//! safety rule trusts these, never what was last written.

use serde_json::Value;
use sluice_routers::{
    Desired, ObservedWeight, alb, ambassador, apisix, appmesh, gateway, istio, nginx, smi, traefik,
};

use super::{Router, with_services};

impl Router<'_> {
    /// The canary and stable weights as this router's objects route them now.
    pub(crate) fn observed_weight(&self, desired: &Desired) -> Option<ObservedWeight> {
        let combine = |a: Option<ObservedWeight>, b: Option<ObservedWeight>| match (a, b) {
            (Some(a), Some(b)) => Some(ObservedWeight {
                canary: a.canary.max(b.canary),
                stable: a.stable.max(b.stable),
            }),
            (a, b) => a.or(b),
        };
        match self {
            Router::Istio {
                virtual_services,
                destination_rule,
            } => {
                let dr_ref = destination_rule.as_ref().map(|(_, r, _)| *r);
                virtual_services
                    .iter()
                    .map(|(_, vs_ref, vs)| istio::observed_weight(vs, vs_ref, dr_ref, desired))
                    .fold(None, combine)
            }
            Router::Nginx {
                cfg,
                max_weight,
                ingresses,
            } => ingresses
                .iter()
                .map(|(_, _, canary)| match canary {
                    Some(c) => nginx::observed_weight(c, cfg, *max_weight),
                    // No canary Ingress: all traffic goes the stable way.
                    None => Some(ObservedWeight {
                        canary: 0,
                        stable: max_weight.unwrap_or(100),
                    }),
                })
                .fold(None, combine),
            Router::Alb {
                cfg,
                ingresses,
                services,
            } => {
                let d = with_services(desired, services);
                ingresses
                    .iter()
                    .map(|(_, ingress)| alb::observed_weight(ingress, cfg, &d))
                    .fold(None, combine)
            }
            Router::Traefik { object, .. } => traefik::observed_weight(object, desired),
            Router::Ambassador { mappings } => mappings
                .iter()
                .map(|(_, _, canary)| Some(ambassador::observed_weight(*canary)))
                .fold(None, combine),
            Router::Apisix { cfg, route, .. } => apisix::observed_weight(route, cfg, desired),
            Router::AppMesh {
                cfg,
                namespace,
                router,
                ..
            } => appmesh::observed_weight(router.1, cfg, namespace, desired),
            Router::Smi { existing, .. } => match existing {
                Some(ts) => smi::observed_weight(ts, desired),
                None => Some(ObservedWeight {
                    canary: 0,
                    stable: desired.max_weight,
                }),
            },
            Router::Gateway { routes, .. } => routes
                .iter()
                .map(|(_, kind, _, route)| gateway::observed_weight(route, *kind, desired))
                .fold(None, combine),
        }
    }

    /// Hashes a DestinationRule's subsets still select (those pods may get traffic).
    pub(crate) fn subset_hashes(&self) -> Vec<String> {
        match self {
            Router::Istio {
                destination_rule: Some((_, _, dr)),
                ..
            } => istio::subset_hashes(dr),
            _ => Vec::new(),
        }
    }

    /// Pure subset mode (no canary or stable Service): the DestinationRule's subsets decide
    /// where traffic goes.
    pub(crate) fn subset_mode(&self) -> bool {
        matches!(
            self,
            Router::Istio {
                destination_rule: Some(_),
                ..
            }
        )
    }

    /// The pod hashes App Mesh's canary and stable VirtualNodes select now: they, not the
    /// Services, decide which pods get each share.
    pub(crate) fn node_hashes(&self) -> Option<(Option<String>, Option<String>)> {
        let Router::AppMesh {
            canary_node,
            stable_node,
            ..
        } = self
        else {
            return None;
        };
        let hash = |node: &Value| {
            node.pointer("/spec/podSelector/matchLabels/rollouts-pod-template-hash")
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Some((hash(canary_node.1), hash(stable_node.1)))
    }

    /// The pod hash a DestinationRule subset selects now.
    pub(crate) fn subset_hash(&self, subset: &str) -> Option<String> {
        let Router::Istio {
            destination_rule: Some((_, _, dr)),
            ..
        } = self
        else {
            return None;
        };
        dr.pointer("/spec/subsets")?
            .as_array()?
            .iter()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(subset))?
            .pointer("/labels/rollouts-pod-template-hash")?
            .as_str()
            .map(str::to_string)
    }
}
