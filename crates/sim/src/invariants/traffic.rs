//! What must hold of a canary with traffic routing: no ReplicaSet is scaled below what the
//! traffic routed to it needs. The weights are read from the VirtualServices as the API server
//! stores them, whatever the controller last wrote or believes, and reach a ReplicaSet through
//! the Service whose `rollouts-pod-template-hash` selector selects it: the canary Service's
//! destination weight for the one the canary Service selects, the stable Service's for the one
//! the stable Service selects (the sum when both select the same). `weight` percent of the
//! Rollout's replicas, rounded up, is what that traffic needs.
//!
//! The rule is on `spec.replicas`, the controller's decision. Whether those pods are available
//! is the kubelet's business and, in the simulation, random in time (a first deploy is routed
//! to before any of its pods is up); so availability of routed ReplicaSets is not an invariant
//! here, the overall availability floor is (`availability-within-max-unavailable`).
//!
//! Covered: Istio host splits over the http routes the Rollout names (destinations with a
//! subset, i.e. a DestinationRule split, are not read).

use std::collections::BTreeMap;

use serde_json::Value;
use sluice_engine::labels::POD_TEMPLATE_HASH;
use sluice_routers::kinds::RouterKind;

use super::analysis::Found;
use crate::api_model::{ApiServer, Kind, name_of};
use crate::kubelet::owner_name;
use crate::net::NAMESPACE;

/// A ReplicaSet is not scaled below what the traffic routed to it needs.
pub const ROUTED_REPLICA_SETS_KEEP_THEIR_PODS: &str = "routed-replicasets-keep-their-pods";
/// No router or Service change sends a ReplicaSet more traffic than its replicas can carry.
pub const TRAFFIC_WAITS_FOR_PODS: &str = "traffic-waits-for-pods";

/// The traffic one pod-template hash gets: the largest weight any route gives it, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub weight: i64,
    pub via: String,
}

/// Per pod-template hash, the weight a Rollout's VirtualServices route to it now.
pub fn routed_weights(api: &ApiServer, rollout: &Value) -> BTreeMap<String, Routed> {
    let mut out: BTreeMap<String, Routed> = BTreeMap::new();
    let Some(canary) = rollout.pointer("/spec/strategy/canary") else {
        return out;
    };
    let Some(istio) = canary.pointer("/trafficRouting/istio") else {
        return out;
    };
    let service_hash = |field: &str| -> Option<(String, String)> {
        let name = canary.get(field)?.as_str().filter(|n| !n.is_empty())?;
        let hash = api
            .get(Kind::Service, name)?
            .pointer("/spec/selector")?
            .get(POD_TEMPLATE_HASH)?
            .as_str()?;
        Some((name.to_string(), hash.to_string()))
    };
    let services: Vec<(String, String)> = ["canaryService", "stableService"]
        .into_iter()
        .filter_map(service_hash)
        .collect();
    let refs = istio.get("virtualService").into_iter().chain(
        istio
            .get("virtualServices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten(),
    );
    for vs_ref in refs {
        let full = vs_ref
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // `name` or `name.namespace`; the simulated cluster has one namespace.
        let (name, namespace) = full.split_once('.').unwrap_or((full, NAMESPACE));
        if namespace != NAMESPACE {
            continue;
        }
        let Some(vs) = api.get(Kind::Router(RouterKind::VirtualService), name) else {
            continue;
        };
        let wanted: Vec<&str> = vs_ref
            .get("routes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let routes = vs
            .pointer("/spec/http")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| {
                wanted.is_empty()
                    || r.get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| wanted.contains(&n))
            });
        for route in routes {
            let route_name = route.get("name").and_then(Value::as_str).unwrap_or("");
            let destinations: Vec<&Value> = route
                .get("route")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .collect();
            let lone = destinations.len() == 1;
            let mut mine: BTreeMap<&str, (i64, Vec<&str>)> = BTreeMap::new();
            for d in destinations {
                if d.pointer("/destination/subset").is_some() {
                    continue;
                }
                let host = d
                    .pointer("/destination/host")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // A short name or a cluster-local FQDN: the first label names the Service.
                let service = host.split('.').next().unwrap_or_default();
                // Istio: a lone destination without a weight takes all the traffic.
                let weight =
                    d.get("weight")
                        .and_then(Value::as_i64)
                        .unwrap_or(if lone { 100 } else { 0 });
                for (svc, hash) in services.iter().filter(|(svc, _)| svc == service) {
                    let e = mine.entry(hash.as_str()).or_default();
                    e.0 += weight.max(0);
                    e.1.push(svc.as_str());
                }
            }
            for (hash, (weight, via)) in mine {
                let via = format!(
                    "VirtualService {name} route {route_name:?} through Service {}",
                    via.join(" and ")
                );
                let e = out.entry(hash.to_string()).or_insert(Routed {
                    weight: 0,
                    via: String::new(),
                });
                if weight > e.weight || e.via.is_empty() {
                    *e = Routed { weight, via };
                }
            }
        }
    }
    out
}

/// What was last seen of each routed ReplicaSet: its spec and what its traffic needs.
#[derive(Debug, Default)]
pub struct TrafficChecks {
    last: BTreeMap<String, (i64, i64)>,
}

impl TrafficChecks {
    /// Every ReplicaSet has at least the pods the traffic routed to it now needs. A shortfall
    /// is reported when it starts or grows, under the name of the side that made it: the
    /// ReplicaSet scaled down under its traffic, or the traffic (a router or Service change)
    /// sent ahead of its pods.
    pub fn after_change(&mut self, api: &ApiServer) -> Found {
        let mut found = Found::new();
        let mut seen = BTreeMap::new();
        let replica_sets = api.list(Kind::ReplicaSet);
        for ro in api.list(Kind::Rollout) {
            let routed = routed_weights(api, &ro);
            if routed.is_empty() {
                continue;
            }
            let rollout = name_of(&ro);
            let replicas = ro
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let max = ro
                .pointer("/spec/strategy/canary/trafficRouting/maxTrafficWeight")
                .and_then(Value::as_i64)
                .unwrap_or(100)
                .max(1);
            for rs in &replica_sets {
                if owner_name(rs) != Some(rollout) {
                    continue;
                }
                let Some(hash) = rs
                    .pointer("/metadata/labels")
                    .and_then(|l| l.get(POD_TEMPLATE_HASH))
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                let Some(r) = routed.get(hash) else {
                    continue;
                };
                let name = name_of(rs).to_string();
                let needs = (r.weight * replicas + max - 1) / max;
                let spec = rs
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                seen.insert(name.clone(), (spec, needs));
                if spec >= needs {
                    continue;
                }
                let (before_spec, before_needs) =
                    self.last.get(&name).copied().unwrap_or((spec, 0));
                let short_before = before_spec < before_needs;
                let invariant = if spec < before_spec {
                    ROUTED_REPLICA_SETS_KEEP_THEIR_PODS
                } else if needs > before_needs || !short_before {
                    TRAFFIC_WAITS_FOR_PODS
                } else {
                    // The same shortfall as at the last change: reported already.
                    continue;
                };
                found.push((
                    invariant,
                    format!(
                        "rs/{name} has spec.replicas {spec}, but {} sends it {} of {max} (of {replicas} replicas: needs {needs}; before: spec {before_spec}, needs {before_needs})",
                        r.via, r.weight
                    ),
                ));
            }
        }
        self.last = seen;
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_model::Endpoint;
    use jiff::Timestamp;
    use serde_json::json;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn world(
        canary_hash: &str,
        stable_hash: &str,
        weights: (i64, i64),
        specs: &[(&str, i64)],
    ) -> ApiServer {
        let mut api = ApiServer::new();
        let ro = json!({
            "metadata": {"name": "demo"},
            "spec": {"replicas": 3, "strategy": {"canary": {
                "canaryService": "canary", "stableService": "stable",
                "trafficRouting": {"istio": {"virtualService": {"name": "vs", "routes": ["primary"]}}}
            }}}
        });
        api.create(Kind::Rollout, ro, now()).unwrap();
        for (svc, hash) in [("canary", canary_hash), ("stable", stable_hash)] {
            let s = json!({"metadata": {"name": svc},
                           "spec": {"selector": {"app": "demo", POD_TEMPLATE_HASH: hash}}});
            api.create(Kind::Service, s, now()).unwrap();
        }
        let vs = json!({"metadata": {"name": "vs"}, "spec": {"http": [
            {"name": "primary", "route": [
                {"destination": {"host": "stable.default.svc.cluster.local"}, "weight": weights.1},
                {"destination": {"host": "canary"}, "weight": weights.0}
            ]},
            {"name": "other", "route": [{"destination": {"host": "canary"}}]}
        ]}});
        api.create(Kind::Router(RouterKind::VirtualService), vs, now())
            .unwrap();
        for (hash, spec) in specs {
            let rs = json!({
                "metadata": {"name": format!("demo-{hash}"),
                             "labels": {POD_TEMPLATE_HASH: hash},
                             "ownerReferences": [{"name": "demo", "controller": true, "kind": "Rollout", "uid": "u"}]},
                "spec": {"replicas": spec}
            });
            api.create(Kind::ReplicaSet, rs, now()).unwrap();
        }
        api
    }

    fn check(api: &ApiServer) -> Found {
        TrafficChecks::default().after_change(api)
    }

    #[test]
    fn weight_needs_its_share_of_the_replicas_rounded_up() {
        // 20% of 3 replicas needs 1 pod; 80% needs 3.
        let api = world("new", "old", (20, 80), &[("new", 1), ("old", 3)]);
        assert!(check(&api).is_empty());
        let api = world("new", "old", (20, 80), &[("new", 0), ("old", 2)]);
        let found = check(&api);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].1.contains("rs/demo-new has spec.replicas 0"),
            "{found:?}"
        );
        assert!(found[1].1.contains("needs 3"), "{found:?}");
    }

    #[test]
    fn both_services_on_one_hash_add_up() {
        let api = world("old", "old", (50, 50), &[("old", 2)]);
        let found = check(&api);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].1.contains("Service stable and canary"),
            "{found:?}"
        );
        let api = world("old", "old", (50, 50), &[("old", 3)]);
        assert!(check(&api).is_empty());
    }

    #[test]
    fn unrouted_replica_sets_may_go() {
        // Nothing selects `gone`; the route the Rollout does not name is not read.
        let api = world(
            "new",
            "old",
            (0, 100),
            &[("new", 0), ("old", 3), ("gone", 0)],
        );
        assert!(check(&api).is_empty());
    }

    #[test]
    fn a_shortfall_is_named_for_the_side_that_made_it_and_reported_once() {
        let mut checks = TrafficChecks::default();
        let mut api = world("new", "old", (50, 50), &[("new", 2), ("old", 2)]);
        assert!(checks.after_change(&api).is_empty());
        // The canary is scaled down under its 50%.
        let down = json!({"spec": {"replicas": 1}});
        api.patch(Kind::ReplicaSet, "demo-new", &down, Endpoint::Main)
            .unwrap();
        let found = checks.after_change(&api);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, ROUTED_REPLICA_SETS_KEEP_THEIR_PODS);
        assert!(checks.after_change(&api).is_empty(), "reported once");
        // The router sends the stable more than its pods.
        let vs = api
            .get(Kind::Router(RouterKind::VirtualService), "vs")
            .unwrap()
            .clone();
        let mut more = vs.clone();
        more["spec"]["http"][0]["route"][0]["weight"] = json!(100);
        more["spec"]["http"][0]["route"][1]["weight"] = json!(0);
        api.replace(Kind::Router(RouterKind::VirtualService), &more)
            .unwrap();
        let found = checks.after_change(&api);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, TRAFFIC_WAITS_FOR_PODS);
        assert!(found[0].1.contains("rs/demo-old"), "{found:?}");
    }
}
