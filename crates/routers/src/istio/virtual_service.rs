//! `set_weight`: the canary, stable and experiment weights of every selected route of a
//! VirtualService. Host split (canary and stable Services) and subset split (DestinationRule
//! subsets of one host) are the same edit: each destination is classified, then given its
//! weight.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use sluice_api::rollout::{IstioDestinationRule, IstioVirtualService};

use super::destination::{Classifier, Role, host_label};
use super::namespaced_name::virtual_service_key;
use super::order::order_http_routes;
use super::select::{self, Mirrors, SECTIONS};
use super::value;
use super::{TOTAL_WEIGHT, VIRTUAL_SERVICE_UPDATED};
use crate::{Desired, Edit, EditResult};

/// Weights the selected HTTP, TLS and TCP routes of `vs` (see `select` for which) and, when
/// anything changed, puts the managed routes first.
///
/// Per destination: the canary gets `desired.weight`; an experiment Service its template
/// weight; a subset in `additionalSubsetNames` keeps its weight; the stable gets what is left
/// of 100 after those (never below 0). Experiment Services missing from a route are appended
/// (sorted by name, so the result does not depend on input order); any other destination that
/// still carries weight is deleted, which is how a finished experiment leaves the route, while
/// a zero-weight one is the user's and stays.
///
/// Errors when a named route is missing or a selected route lacks the canary or the stable.
pub fn set_weight(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> EditResult {
    let selection = select::weighted(vs, vs_ref, dr, desired, Mirrors::Include)?;
    let classifier = Classifier::new(dr, desired);
    let mut object = vs.clone();
    for section in SECTIONS {
        let Some(routes) = value::routes_mut(&mut object, section) else {
            continue;
        };
        for &i in selection.get(section) {
            if let Some(route) = routes.get_mut(i) {
                reweigh(route, &classifier, desired);
            }
        }
    }
    if object == *vs {
        return Ok(None);
    }
    order_http_routes(&mut object, &desired.managed_routes);
    let name = vs_name(vs, vs_ref);
    Ok(Some(Edit {
        object,
        event: (
            VIRTUAL_SERVICE_UPDATED,
            format!(
                "VirtualService `{name}` set to desiredWeight '{}'",
                desired.weight
            ),
        ),
    }))
}

/// The VirtualService's own name, or the one the reference points at.
fn vs_name(vs: &Value, vs_ref: &IstioVirtualService) -> String {
    match vs.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => name.to_string(),
        None => virtual_service_key(vs_ref.name.as_deref().unwrap_or(""), "").0,
    }
}

/// The stable weight of one route: 100 less the canary, the experiments and the hand-weighted
/// subsets of that route, floored at 0.
fn stable_weight(destinations: &[Value], classifier: &Classifier, desired: &Desired) -> i64 {
    let hand_weighted = destinations
        .iter()
        .filter(|d| classifier.role(d) == Role::AdditionalSubset)
        .map(value::weight)
        .fold(0_i64, i64::saturating_add);
    let experiments = desired
        .additional
        .iter()
        .map(|d| i64::from(d.weight))
        .fold(0_i64, i64::saturating_add);
    TOTAL_WEIGHT
        .saturating_sub(i64::from(desired.weight))
        .saturating_sub(experiments)
        .saturating_sub(hand_weighted)
        .max(0)
}

/// Rewrites the weighted destinations of one route in place.
fn reweigh(route: &mut Value, classifier: &Classifier, desired: &Desired) {
    let Some(destinations) = value::destinations_mut(route) else {
        return;
    };
    let stable = stable_weight(destinations, classifier, desired);
    let mut kept = Vec::with_capacity(destinations.len() + desired.additional.len());
    for mut destination in destinations.drain(..) {
        let target = match classifier.role(&destination) {
            Role::Canary => Some(i64::from(desired.weight)),
            Role::Stable => Some(stable),
            Role::Experiment(experiment) => Some(i64::from(experiment.weight)),
            Role::AdditionalSubset => None,
            Role::Unknown if value::weight(&destination) != 0 => continue,
            Role::Unknown => None,
        };
        if let Some(weight) = target
            && value::weight(&destination) != weight
            && let Some(fields) = destination.as_object_mut()
        {
            fields.insert("weight".to_string(), json!(weight));
        }
        kept.push(destination);
    }
    // Any destination already on the experiment's host counts as present, whatever its role,
    // so that a second call never appends it again.
    let present: BTreeSet<&str> = kept.iter().map(|d| host_label(value::host(d))).collect();
    let mut missing: Vec<_> = desired
        .additional
        .iter()
        .filter(|e| !e.service_name.is_empty() && !present.contains(e.service_name.as_str()))
        .collect();
    missing.sort_by(|a, b| a.service_name.cmp(&b.service_name));
    missing.dedup_by(|a, b| a.service_name == b.service_name);
    let missing: Vec<Value> = missing
        .into_iter()
        .map(|e| json!({"destination": {"host": e.service_name}, "weight": e.weight}))
        .collect();
    kept.extend(missing);
    *destinations = kept;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::RouterError;
    use crate::istio::fixtures::*;

    /// `set_weight` on a VirtualService given as YAML; the edit must be idempotent.
    fn apply(
        vs: &str,
        vs_ref: &IstioVirtualService,
        dr: Option<&IstioDestinationRule>,
        desired: &Desired,
    ) -> Result<Option<Edit>, RouterError> {
        let edit = set_weight(&yaml(vs), vs_ref, dr, desired)?;
        if let Some(edit) = &edit {
            assert_eq!(set_weight(&edit.object, vs_ref, dr, desired), Ok(None));
        }
        Ok(edit)
    }

    fn written(
        vs: &str,
        vs_ref: &IstioVirtualService,
        dr: Option<&IstioDestinationRule>,
        desired: &Desired,
    ) -> Value {
        match apply(vs, vs_ref, dr, desired) {
            Ok(Some(edit)) => edit.object,
            other => panic!("expected an edit, got {other:?}"),
        }
    }

    #[test]
    fn splits_by_host() {
        let edit = apply(
            HOST_SPLIT_VS,
            &vs_ref("istio-host-split-vsvc", &["primary"]),
            None,
            &host_split(10),
        );
        let Ok(Some(edit)) = edit else {
            panic!("expected an edit, got {edit:?}")
        };
        assert_eq!(
            weights(&edit.object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 90),
                ("istio-host-split-canary", 10)
            ])
        );
        assert_eq!(
            edit.event,
            (
                "Updated VirtualService",
                "VirtualService `istio-host-split-vsvc` set to desiredWeight '10'".to_string()
            )
        );
        // Everything else is as read.
        let mut expected = yaml(HOST_SPLIT_VS);
        expected["spec"]["http"][0]["route"][0]["weight"] = json!(90);
        expected["spec"]["http"][0]["route"][1]["weight"] = json!(10);
        assert_eq!(edit.object, expected);
    }

    #[test]
    fn weights_are_json_integers() {
        let vs = written(
            HOST_SPLIT_VS,
            &vs_ref("v", &["primary"]),
            None,
            &host_split(33),
        );
        let weight = &vs["spec"]["http"][0]["route"][1]["weight"];
        assert!(weight.is_i64() || weight.is_u64(), "{weight}");
        assert_eq!(serde_json::to_string(weight).ok().as_deref(), Some("33"));
    }

    #[test]
    fn hosts_compare_by_first_dns_label() {
        let vs = HOST_SPLIT_VS.replace(
            "host: istio-host-split-canary",
            "host: istio-host-split-canary.default.svc.cluster.local",
        );
        let object = written(&vs, &vs_ref("v", &["primary"]), None, &host_split(25));
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 75),
                ("istio-host-split-canary.default.svc.cluster.local", 25)
            ])
        );
    }

    #[test]
    fn splits_by_subset() {
        let object = written(
            SUBSET_SPLIT_VS,
            &vs_ref("istio-subset-split-vsvc", &["primary"]),
            Some(&dr_ref(&[])),
            &subset_split(40),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 60), ("canary", 40)])
        );
    }

    #[test]
    fn unnamed_single_route_when_routes_omitted() {
        let object = written(
            SINGLE_ROUTE_VS,
            &vs_ref("istio-subset-split-single-route-vsvc", &[]),
            Some(&dr_ref(&[])),
            &subset_split(10),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 90), ("canary", 10)])
        );
    }

    #[test]
    fn first_unnamed_route_beside_managed_routes() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: header
    route:
    - destination: {host: istio-host-split-canary}
      weight: 100
  - route:
    - destination: {host: istio-host-split-stable}
      weight: 100
    - destination: {host: istio-host-split-canary}
      weight: 0
";
        let mut desired = host_split(30);
        desired.managed_routes = vec!["header".into()];
        let object = written(vs, &vs_ref("vs", &[]), None, &desired);
        assert_eq!(
            weights(&object, "http", 1),
            pairs(&[
                ("istio-host-split-stable", 70),
                ("istio-host-split-canary", 30)
            ])
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("istio-host-split-canary", 100)])
        );
    }

    #[test]
    fn several_named_routes() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - destination: {host: istio-host-split-stable}
      weight: 100
    - destination: {host: istio-host-split-canary}
      weight: 0
  - name: untouched
    route:
    - destination: {host: istio-host-split-stable}
      weight: 100
    - destination: {host: istio-host-split-canary}
      weight: 0
  - name: secondary
    route:
    - destination: {host: istio-host-split-canary}
      weight: 0
    - destination: {host: istio-host-split-stable}
      weight: 100
";
        let object = written(
            vs,
            &vs_ref("vs", &["primary", "secondary"]),
            None,
            &host_split(20),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 80),
                ("istio-host-split-canary", 20)
            ])
        );
        assert_eq!(
            weights(&object, "http", 1),
            pairs(&[
                ("istio-host-split-stable", 100),
                ("istio-host-split-canary", 0)
            ])
        );
        assert_eq!(
            weights(&object, "http", 2),
            pairs(&[
                ("istio-host-split-canary", 20),
                ("istio-host-split-stable", 80)
            ])
        );
    }

    #[test]
    fn tls_routes_by_port_and_sni_hosts() {
        let mut reference = vs_ref("istio-host-split-vsvc", &["primary"]);
        reference.tls_routes = Some(vec![tls_route(3000, &["istio-host-split"])]);
        let object = written(HTTP_TLS_SPLIT_VS, &reference, None, &host_split(10));
        for section in ["http", "tls"] {
            assert_eq!(
                weights(&object, section, 0),
                pairs(&[
                    ("istio-host-split-stable", 90),
                    ("istio-host-split-canary", 10)
                ]),
                "{section}"
            );
        }
    }

    #[test]
    fn tls_only_virtual_service_ignores_http_route_names() {
        let mut reference = vs_ref("istio-host-split-tls-vsvc", &["primary"]);
        reference.tls_routes = Some(vec![tls_route(3000, &["istio-host-split-tls"])]);
        let mut desired = host_split(50);
        desired.canary_service = "istio-host-split-tls-canary".into();
        desired.stable_service = "istio-host-split-tls-stable".into();
        let object = written(TLS_ONLY_VS, &reference, None, &desired);
        assert_eq!(
            weights(&object, "tls", 0),
            pairs(&[
                ("istio-host-split-tls-stable", 50),
                ("istio-host-split-tls-canary", 50)
            ])
        );
    }

    /// Two TLS routes (3000 for a.com, 3001 for a.com and b.com) and two TCP routes (4000, and
    /// one matching two ports).
    const MANY_PORTS_VS: &str = "
metadata: {name: vs}
spec:
  tls:
  - match:
    - {port: 3000, sniHosts: [a.com]}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  - match:
    - {port: 3001, sniHosts: [a.com]}
    - {port: 3001, sniHosts: [b.com]}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  tcp:
  - match:
    - {port: 4000}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  - match:
    - {port: 4000}
    - {port: 4001}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
";

    #[test]
    fn tls_and_tcp_route_matching() {
        let untouched = pairs(&[
            ("istio-host-split-stable", 100),
            ("istio-host-split-canary", 0),
        ]);
        let weighted = pairs(&[
            ("istio-host-split-stable", 95),
            ("istio-host-split-canary", 5),
        ]);
        let mut reference = vs_ref("vs", &[]);
        reference.tls_routes = Some(vec![tls_route(3001, &["b.com", "a.com"])]);
        reference.tcp_routes = Some(vec![tcp_route(4000)]);
        let object = written(MANY_PORTS_VS, &reference, None, &host_split(5));
        assert_eq!(weights(&object, "tls", 0), untouched);
        assert_eq!(weights(&object, "tls", 1), weighted);
        assert_eq!(weights(&object, "tcp", 0), weighted);
        assert_eq!(
            weights(&object, "tcp", 1),
            untouched,
            "two ports never match"
        );

        // Every configured entry selects its routes.
        reference.tls_routes = Some(vec![
            tls_route(3000, &["a.com"]),
            tls_route(3001, &["a.com", "b.com"]),
        ]);
        let object = written(MANY_PORTS_VS, &reference, None, &host_split(5));
        assert_eq!(weights(&object, "tls", 0), weighted);
        assert_eq!(weights(&object, "tls", 1), weighted);
    }

    #[test]
    fn single_tls_and_tcp_routes_when_omitted() {
        let vs = "
metadata: {name: vs}
spec:
  tls:
  - match: [{port: 443, sniHosts: [a.com]}]
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  tcp:
  - route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
";
        let object = written(vs, &vs_ref("vs", &[]), None, &host_split(15));
        let split = pairs(&[
            ("istio-host-split-stable", 85),
            ("istio-host-split-canary", 15),
        ]);
        assert_eq!(weights(&object, "tls", 0), split);
        assert_eq!(weights(&object, "tcp", 0), split);
    }

    #[test]
    fn route_selection_errors() {
        let tls = |port, hosts: &[&str]| {
            let mut reference = vs_ref("vs", &[]);
            reference.tls_routes = Some(vec![tls_route(port, hosts)]);
            reference.tcp_routes = Some(vec![tcp_route(4000)]);
            reference
        };
        let tcp = |port| {
            let mut reference = tls(3000, &["a.com"]);
            reference.tcp_routes = Some(vec![tcp_route(port)]);
            reference
        };
        let cases = [
            (
                tls(3000, &["b.com"]),
                "No matching TLS routes found in the defined Virtual Service.",
            ),
            (
                tls(3001, &["a.com"]),
                "No matching TLS routes found in the defined Virtual Service.",
            ),
            (
                tls(3002, &["a.com"]),
                "No matching TLS routes found in the defined Virtual Service.",
            ),
            (
                tcp(4001),
                "No matching TCP routes found in the defined Virtual Service.",
            ),
            (
                vs_ref("vs", &[]),
                "spec.tls[] should be set in VirtualService and it must have exactly one route \
                 when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tlsRoutes",
            ),
            (
                {
                    let mut reference = tls(3000, &["a.com"]);
                    reference.tcp_routes = None;
                    reference
                },
                "spec.tcp[] should be set in VirtualService and it must have exactly one route \
                 when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tcpRoutes",
            ),
        ];
        for (reference, message) in cases {
            assert_eq!(
                set_weight(&yaml(MANY_PORTS_VS), &reference, None, &host_split(5)),
                Err(RouterError::new(message)),
                "{reference:?}"
            );
        }
    }

    #[test]
    fn destination_errors() {
        let vs = yaml(SUBSET_SPLIT_VS);
        let without = |field: &str, value: &str| {
            let text =
                SUBSET_SPLIT_VS.replace(&format!("{field}: {value}"), &format!("{field}: other"));
            yaml(&text)
        };
        let subset = Some(dr_ref(&[]));
        let cases = [
            (
                vs.clone(),
                vs_ref("vs", &["missing"]),
                subset.clone(),
                subset_split(5),
                "HTTP Route 'missing' is not found in the defined Virtual Service.",
            ),
            (
                without("subset", "canary"),
                vs_ref("vs", &["primary"]),
                subset.clone(),
                subset_split(5),
                "Canary DestinationRule subset 'canary' not found in route",
            ),
            (
                without("subset", "stable"),
                vs_ref("vs", &["primary"]),
                subset.clone(),
                subset_split(5),
                "Stable DestinationRule subset 'stable' not found in route",
            ),
            (
                yaml(HOST_SPLIT_VS).clone(),
                vs_ref("vs", &["primary"]),
                None,
                {
                    let mut desired = host_split(5);
                    desired.canary_service = "elsewhere".into();
                    desired
                },
                "Canary Service 'elsewhere' not found in route",
            ),
            (
                yaml(HOST_SPLIT_VS).clone(),
                vs_ref("vs", &["primary"]),
                None,
                {
                    let mut desired = host_split(5);
                    desired.stable_service = "elsewhere".into();
                    desired
                },
                "Stable Service 'elsewhere' not found in route",
            ),
            (
                yaml(&format!("{HOST_SPLIT_VS}  - name: second\n")),
                vs_ref("vs", &[]),
                None,
                host_split(5),
                "spec.http[] should be set in VirtualService and it must have exactly one route \
                 when omitting spec.strategy.canary.trafficRouting.istio.virtualService.routes",
            ),
        ];
        for (vs, reference, dr, desired, message) in cases {
            assert_eq!(
                set_weight(&vs, &reference, dr.as_ref(), &desired),
                Err(RouterError::new(message)),
                "{message}"
            );
        }
    }

    #[test]
    fn malformed_objects_are_errors() {
        let cases = [
            (
                json!({"spec": {"http": {"primary": {}}}}),
                "VirtualService spec.http is not a list",
            ),
            (json!({"spec": "x"}), "VirtualService spec is not an object"),
            (
                json!({"spec": {"http": [{"name": "primary", "route": [{"weight": true}]}]}}),
                "VirtualService spec.http[0].route[0].weight is not an integer",
            ),
        ];
        for (vs, message) in cases {
            assert_eq!(
                set_weight(&vs, &vs_ref("vs", &["primary"]), None, &host_split(5)),
                Err(RouterError::new(message)),
                "{vs}"
            );
        }
        // Not a VirtualService at all: nothing to weight.
        assert_eq!(
            set_weight(
                &json!([]),
                &vs_ref("vs", &["primary"]),
                None,
                &host_split(5)
            ),
            Ok(None)
        );
    }

    #[test]
    fn unchanged_object_is_not_written() {
        let vs = HOST_SPLIT_VS
            .replace("weight: 100", "weight: 90")
            .replace("weight: 0", "weight: 10");
        assert_eq!(
            set_weight(
                &yaml(&vs),
                &vs_ref("v", &["primary"]),
                None,
                &host_split(10)
            ),
            Ok(None)
        );
        // An absent weight reads as 0.
        let vs = HOST_SPLIT_VS.replace("      weight: 0\n", "");
        assert_eq!(
            set_weight(&yaml(&vs), &vs_ref("v", &["primary"]), None, &host_split(0)),
            Ok(None)
        );
    }

    #[test]
    fn experiment_destinations_added_then_removed() {
        let reference = vs_ref("vs", &["primary"]);
        let mut desired = host_split(10);
        desired.additional = vec![experiment("exp-b", 5), experiment("exp-a", 15)];
        let with = written(HOST_SPLIT_VS, &reference, None, &desired);
        assert_eq!(
            weights(&with, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 70),
                ("istio-host-split-canary", 10),
                ("exp-a", 15),
                ("exp-b", 5)
            ])
        );
        assert_eq!(
            with["spec"]["http"][0]["route"][2],
            json!({"destination": {"host": "exp-a"}, "weight": 15})
        );

        // A weight change of an experiment already present is an update, not an append.
        desired.additional = vec![experiment("exp-b", 20), experiment("exp-a", 15)];
        let Ok(Some(edit)) = set_weight(&with, &reference, None, &desired) else {
            panic!("expected an edit")
        };
        assert_eq!(
            weights(&edit.object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 55),
                ("istio-host-split-canary", 10),
                ("exp-a", 15),
                ("exp-b", 20)
            ])
        );

        // The experiment is over: its weighted destinations go.
        desired.additional.clear();
        let Ok(Some(edit)) = set_weight(&edit.object, &reference, None, &desired) else {
            panic!("expected an edit")
        };
        assert_eq!(
            weights(&edit.object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 90),
                ("istio-host-split-canary", 10)
            ])
        );
    }

    #[test]
    fn experiment_destinations_in_subset_split() {
        let mut desired = subset_split(20);
        desired.additional = vec![experiment("exp", 20)];
        let object = written(
            SUBSET_SPLIT_VS,
            &vs_ref("vs", &["primary"]),
            Some(&dr_ref(&[])),
            &desired,
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 60), ("canary", 20), ("exp", 20)])
        );
    }

    #[test]
    fn unknown_destinations_deleted_unless_zero_weight() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - {destination: {host: istio-host-split-stable}, weight: 80}
    - {destination: {host: old-experiment}, weight: 10}
    - {destination: {host: parked}, weight: 0}
    - {destination: {host: no-weight}}
    - {destination: {host: istio-host-split-canary}, weight: 10}
";
        let object = written(vs, &vs_ref("vs", &["primary"]), None, &host_split(10));
        assert_eq!(
            weights(&object, "http", 0),
            vec![
                ("istio-host-split-stable".to_string(), json!(90)),
                ("parked".to_string(), json!(0)),
                ("no-weight".to_string(), Value::Null),
                ("istio-host-split-canary".to_string(), json!(10)),
            ]
        );
    }

    #[test]
    fn additional_subsets_keep_their_weight() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - {destination: {host: svc, subset: stable}, weight: 100}
    - {destination: {host: svc, subset: canary}, weight: 0}
    - {destination: {host: svc, subset: preview}, weight: 15}
";
        let object = written(
            vs,
            &vs_ref("vs", &["primary"]),
            Some(&dr_ref(&["preview"])),
            &subset_split(25),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 60), ("canary", 25), ("preview", 15)])
        );
    }

    #[test]
    fn stable_weight_never_below_zero() {
        let mut desired = host_split(100);
        desired.additional = vec![experiment("exp", 10)];
        let object = written(HOST_SPLIT_VS, &vs_ref("vs", &["primary"]), None, &desired);
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 0),
                ("istio-host-split-canary", 100),
                ("exp", 10)
            ])
        );
    }

    /// A mirror route first and a header route last, both managed, around `primary`.
    const MANAGED_VS: &str = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - {destination: {host: stable-service}, weight: 80}
    - {destination: {host: canary-service}, weight: 20}
  - name: mirror-1
    match: [{uri: {prefix: /}}]
    route:
    - {destination: {host: stable-service}, weight: 80}
    - {destination: {host: canary-service}, weight: 20}
    mirror: {host: canary-service}
    mirrorPercentage: {value: 100}
  - name: header-1
    route:
    - {destination: {host: canary-service}, weight: 100}
";

    #[test]
    fn mirror_routes_weighted_and_routes_ordered_after_a_change() {
        let desired = demo(40, &["header-1", "mirror-1"]);
        let object = written(MANAGED_VS, &vs_ref("vs", &["primary"]), None, &desired);
        assert_eq!(route_names(&object), ["header-1", "mirror-1", "primary"]);
        let split = pairs(&[("stable-service", 60), ("canary-service", 40)]);
        assert_eq!(weights(&object, "http", 1), split, "mirror route");
        assert_eq!(weights(&object, "http", 2), split, "primary");
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("canary-service", 100)])
        );
    }

    #[test]
    fn mirror_routes_not_in_managed_routes_are_left_alone() {
        let desired = demo(40, &[]);
        let object = written(MANAGED_VS, &vs_ref("vs", &["primary"]), None, &desired);
        assert_eq!(route_names(&object), ["primary", "mirror-1", "header-1"]);
        assert_eq!(
            weights(&object, "http", 1),
            pairs(&[("stable-service", 80), ("canary-service", 20)])
        );
    }

    #[test]
    fn no_reordering_without_a_weight_change() {
        let desired = demo(20, &["header-1", "mirror-1"]);
        assert_eq!(
            set_weight(
                &yaml(MANAGED_VS),
                &vs_ref("vs", &["primary"]),
                None,
                &desired
            ),
            Ok(None)
        );
    }
}
