//! Canary and stable weights on a route's backendRefs.

use serde_json::Value;

use super::experiment::{self, Experiments};
use super::rules::{
    backend_refs, backend_refs_mut, is_managed, ref_name, route_name, rules, set_ref_weight,
    with_rules,
};
use super::{Config, RouteKind, label};
use crate::{Desired, Edit, EditResult, ObservedWeight};

/// Weight of a backendRef without `weight`, by the Gateway API.
const DEFAULT_REF_WEIGHT: i32 = 1;

/// The route at `desired.weight`.
///
/// - HTTP and GRPC routes: in every rule that is not managed (see the module docs), the canary
///   backendRefs get the desired weight and the stable ones 100 − desired, the plugin's
///   arithmetic whatever `maxTrafficWeight` is. TCP and TLS routes: every rule.
/// - Both Services must be found, else the plugin's `backendRef was not found in httpRoute`
///   (`…grpcRoute`, and `backendRef list was not found in tcpRoute`/`…tlsRoute`).
/// - HTTPRoute only: the experiment backends (see [`Experiments`]).
/// - The in-progress label.
///
/// `None` when the route already says all that; the plugin writes it anyway, to no effect.
pub fn set_weight(
    route: &Value,
    kind: RouteKind,
    cfg: &Config,
    experiments: &Experiments,
    desired: &Desired,
) -> EditResult {
    let mut rules = rules(route, kind)?.to_vec();
    let (mut canary_found, mut stable_found) = (false, false);
    for rule in &mut rules {
        if kind.has_header_routes() && is_managed(rule, desired) {
            continue;
        }
        for backend_ref in backend_refs_mut(rule) {
            match ref_name(backend_ref) {
                Some(n) if n == desired.canary_service => {
                    set_ref_weight(backend_ref, desired.weight);
                    canary_found = true;
                }
                Some(n) if n == desired.stable_service => {
                    set_ref_weight(backend_ref, 100i32.saturating_sub(desired.weight));
                    stable_found = true;
                }
                _ => {}
            }
        }
    }
    if !canary_found || !stable_found {
        return Err(kind.backend_not_found());
    }
    if kind == RouteKind::Http {
        experiment::apply(&mut rules, experiments, desired);
    }
    let mut updated = with_rules(route, rules);
    label::apply(&mut updated, cfg, desired.weight)?;
    if &updated == route {
        return Ok(None);
    }
    Ok(Some(Edit {
        object: updated,
        event: (
            kind.updated_reason(),
            format!(
                "{kind} `{}` set to desiredWeight '{}'",
                route_name(route),
                desired.weight
            ),
        ),
    }))
}

/// The weights of the first rule (not managed, for HTTP and GRPC) that has both a canary and
/// a stable backendRef, a missing `weight` counting as the Gateway API's default of 1. `None`
/// when no rule has both or a weight is not an integer.
pub fn observed_weight(
    route: &Value,
    kind: RouteKind,
    desired: &Desired,
) -> Option<ObservedWeight> {
    let weight_of = |rule: &Value, service: &str| {
        backend_refs(rule)
            .iter()
            .find(|r| ref_name(r) == Some(service))
            .map(|r| match r.get("weight") {
                None | Some(Value::Null) => Some(DEFAULT_REF_WEIGHT),
                Some(w) => w.as_i64().and_then(|w| i32::try_from(w).ok()),
            })
    };
    rules(route, kind)
        .ok()?
        .iter()
        .filter(|rule| !(kind.has_header_routes() && is_managed(rule, desired)))
        .find_map(|rule| {
            let canary = weight_of(rule, &desired.canary_service)?;
            let stable = weight_of(rule, &desired.stable_service)?;
            Some((canary, stable))
        })
        .and_then(|(canary, stable)| {
            Some(ObservedWeight {
                canary: canary?,
                stable: stable?,
            })
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::gateway::fixtures::{config, desired, http_route};
    use crate::gateway::parse_config;
    use crate::{Destination, RouterError};

    const LABEL: &str = "rollouts.argoproj.io/gatewayapi-canary";

    fn at(weight: i32) -> Desired {
        Desired {
            weight,
            ..desired()
        }
    }

    fn weights_of(route: &Value) -> Vec<Vec<(String, Option<i64>)>> {
        route["spec"]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|rule| {
                backend_refs(rule)
                    .iter()
                    .map(|r| {
                        (
                            r["name"].as_str().unwrap().to_string(),
                            r["weight"].as_i64(),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    fn w(pairs: &[(&str, Option<i64>)]) -> Vec<(String, Option<i64>)> {
        pairs.iter().map(|(n, w)| (n.to_string(), *w)).collect()
    }

    const STABLE: &str = "argo-rollouts-stable-service";
    const CANARY: &str = "argo-rollouts-canary-service";

    #[test]
    fn http_route_with_several_rules() {
        let edit = set_weight(
            &http_route(),
            RouteKind::Http,
            &config(),
            &Experiments::default(),
            &desired(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            weights_of(&edit.object),
            [
                w(&[(STABLE, Some(70)), (CANARY, Some(30))]),
                w(&[(STABLE, Some(70)), (CANARY, Some(30))]),
                w(&[("assets", None)]),
            ]
        );
        assert_eq!(edit.object["metadata"]["labels"][LABEL], "in-progress");
        assert_eq!(edit.object["metadata"]["resourceVersion"], "9");
        assert_eq!(
            edit.object["spec"]["hostnames"],
            json!(["demo.example.com"])
        );
        assert_eq!(
            edit.event,
            (
                "UpdatedHTTPRoute",
                "HTTPRoute `argo-rollouts-http-route` set to desiredWeight '30'".to_string()
            )
        );
        // Once written, the same weight changes nothing.
        let again = set_weight(
            &edit.object,
            RouteKind::Http,
            &config(),
            &Experiments::default(),
            &desired(),
        );
        assert_eq!(again, Ok(None));
    }

    #[test]
    fn managed_header_rules_keep_their_backends() {
        let mut route = http_route();
        let rules = route["spec"]["rules"].as_array_mut().unwrap();
        rules.push(json!({
            "name": "header-route",
            "matches": [{"headers": [{"type": "Exact", "name": "x-canary", "value": "yes"}]}],
            "backendRefs": [{"group": "", "kind": "Service", "name": CANARY, "port": 80}]
        }));
        rules.push(json!({
            "name": "header-route-1",
            "backendRefs": [{"name": CANARY, "port": 80}, {"name": STABLE, "port": 80, "weight": 5}]
        }));
        rules.push(json!({
            "matches": [{"headers": [{"name": "x-beta", "value": "1"}]}],
            "backendRefs": [{"name": CANARY, "port": 80, "weight": 1}]
        }));
        let edit = set_weight(
            &route,
            RouteKind::Http,
            &config(),
            &Experiments::default(),
            &desired(),
        )
        .unwrap()
        .unwrap();
        let weights = weights_of(&edit.object);
        assert_eq!(weights[0], w(&[(STABLE, Some(70)), (CANARY, Some(30))]));
        assert_eq!(weights[3], w(&[(CANARY, None)]));
        assert_eq!(weights[4], w(&[(CANARY, None), (STABLE, Some(5))]));
        assert_eq!(weights[5], w(&[(CANARY, Some(1))]));
    }

    #[test]
    fn missing_services_are_errors() {
        let not_found = Err(RouterError::new("backendRef was not found in httpRoute"));
        let route = |refs: Value| json!({"metadata": {"name": "r"}, "spec": {"rules": [{"backendRefs": refs}]}});
        let cases = [
            route(json!([{"name": STABLE}])),
            route(json!([{"name": STABLE}, {"name": "other"}])),
            // The canary only in a managed rule does not count.
            json!({"metadata": {"name": "r"}, "spec": {"rules": [
                {"backendRefs": [{"name": STABLE}]},
                {"backendRefs": [{"name": CANARY}]}
            ]}}),
            json!({"metadata": {"name": "r"}, "spec": {}}),
        ];
        for route in cases {
            let got = set_weight(
                &route,
                RouteKind::Http,
                &config(),
                &Experiments::default(),
                &desired(),
            );
            assert_eq!(got, not_found, "{route}");
        }
        let got = set_weight(
            &json!({"spec": {"rules": 7}}),
            RouteKind::Http,
            &config(),
            &Experiments::default(),
            &desired(),
        );
        assert_eq!(
            got,
            Err(RouterError::new("HTTPRoute `` has malformed spec.rules"))
        );
    }

    #[test]
    fn grpc_route() {
        let route = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GRPCRoute",
            "metadata": {"name": "argo-rollouts-grpc-route"},
            "spec": {"rules": [
                {
                    "matches": [{"method": {"service": "helloworld.Greeter", "method": "SayHello"}}],
                    "backendRefs": [
                        {"name": STABLE, "port": 9000, "weight": 100},
                        {"name": CANARY, "port": 9000, "weight": 0}
                    ]
                },
                {"name": "header-route", "backendRefs": [{"name": CANARY, "port": 9000}]}
            ]}
        });
        let edit = set_weight(
            &route,
            RouteKind::Grpc,
            &config(),
            &Experiments::default(),
            &desired(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            weights_of(&edit.object),
            [
                w(&[(STABLE, Some(70)), (CANARY, Some(30))]),
                w(&[(CANARY, None)])
            ]
        );
        assert_eq!(
            edit.event,
            (
                "UpdatedGRPCRoute",
                "GRPCRoute `argo-rollouts-grpc-route` set to desiredWeight '30'".to_string()
            )
        );
        let missing = json!({"spec": {"rules": [{"backendRefs": [{"name": STABLE}]}]}});
        assert_eq!(
            set_weight(
                &missing,
                RouteKind::Grpc,
                &config(),
                &Experiments::default(),
                &desired()
            ),
            Err(RouterError::new("backendRef was not found in grpcRoute"))
        );
    }

    #[test]
    fn tcp_and_tls_routes_set_every_rule() {
        for (kind, error) in [
            (RouteKind::Tcp, "backendRef list was not found in tcpRoute"),
            (RouteKind::Tls, "backendRef list was not found in tlsRoute"),
        ] {
            let route = json!({
                "metadata": {"name": "argo-rollouts-route"},
                "spec": {"rules": [
                    {"backendRefs": [{"name": STABLE, "port": 5432}, {"name": CANARY, "port": 5432}]},
                    // No managed rules on TCP and TLS routes: a canary-only rule is weighted too.
                    {"backendRefs": [{"name": CANARY, "port": 5433}]}
                ]}
            });
            let edit = set_weight(&route, kind, &config(), &Experiments::default(), &desired())
                .unwrap()
                .unwrap();
            assert_eq!(
                weights_of(&edit.object),
                [
                    w(&[(STABLE, Some(70)), (CANARY, Some(30))]),
                    w(&[(CANARY, Some(30))])
                ]
            );
            assert_eq!(edit.object["metadata"]["labels"][LABEL], "in-progress");
            assert_eq!(
                edit.event.1,
                format!("{kind} `argo-rollouts-route` set to desiredWeight '30'")
            );
            let missing = json!({"spec": {"rules": [{"backendRefs": [{"name": CANARY}]}]}});
            assert_eq!(
                set_weight(
                    &missing,
                    kind,
                    &config(),
                    &Experiments::default(),
                    &desired()
                ),
                Err(RouterError::new(error))
            );
        }
    }

    #[test]
    fn in_progress_label_set_removed_or_disabled() {
        let disabled =
            parse_config(&json!({"httpRoute": "r", "disableInProgressLabel": true})).unwrap();
        let mut labelled = http_route();
        labelled["metadata"]["labels"] = json!({LABEL: "in-progress", "app": "demo"});
        let cases = [
            (
                http_route(),
                config(),
                30,
                Some(json!({LABEL: "in-progress"})),
            ),
            (labelled.clone(), config(), 0, Some(json!({"app": "demo"}))),
            (http_route(), disabled.clone(), 30, None),
            (
                labelled,
                disabled,
                0,
                Some(json!({LABEL: "in-progress", "app": "demo"})),
            ),
        ];
        for (route, cfg, weight, want) in cases {
            let edit = set_weight(
                &route,
                RouteKind::Http,
                &cfg,
                &Experiments::default(),
                &at(weight),
            )
            .unwrap()
            .unwrap();
            assert_eq!(edit.object["metadata"].get("labels"), want.as_ref());
        }
    }

    fn experiment_desired() -> Desired {
        Desired {
            additional: vec![
                Destination {
                    service_name: "rollouts-demo-exp-a".into(),
                    pod_template_hash: "a1".into(),
                    weight: 10,
                },
                Destination {
                    service_name: "rollouts-demo-exp-b".into(),
                    pod_template_hash: "b1".into(),
                    weight: 5,
                },
            ],
            ..desired()
        }
    }

    #[test]
    fn running_experiment_adds_backends_to_the_first_rule() {
        let experiments = Experiments {
            active: true,
            previous_additional: vec![],
            // exp-b's Service does not exist yet: it is not added.
            ports: BTreeMap::from([("rollouts-demo-exp-a".to_string(), 8080)]),
        };
        let edit = set_weight(
            &http_route(),
            RouteKind::Http,
            &config(),
            &experiments,
            &experiment_desired(),
        )
        .unwrap()
        .unwrap();
        let rules = edit.object["spec"]["rules"].as_array().unwrap();
        assert_eq!(
            rules[0]["backendRefs"],
            json!([
                {"name": STABLE, "kind": "Service", "port": 80, "weight": 85},
                {"name": CANARY, "kind": "Service", "port": 80, "weight": 30},
                {"name": "rollouts-demo-exp-a", "namespace": "default", "port": 8080, "weight": 10}
            ])
        );
        // Only the first rule gets the experiment.
        assert_eq!(
            weights_of(&edit.object)[1],
            w(&[(STABLE, Some(70)), (CANARY, Some(30))])
        );
        // An experiment backend already there keeps its weight.
        let mut route = edit.object.clone();
        route["spec"]["rules"][0]["backendRefs"][2]["weight"] = 3.into();
        let again = set_weight(
            &route,
            RouteKind::Http,
            &config(),
            &experiments,
            &experiment_desired(),
        );
        assert_eq!(again, Ok(None));
    }

    #[test]
    fn active_experiment_without_destinations_changes_nothing_more() {
        let experiments = Experiments {
            active: true,
            previous_additional: vec!["rollouts-demo-exp-a".into()],
            ports: BTreeMap::new(),
        };
        let mut route = http_route();
        route["spec"]["rules"][0]["backendRefs"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "rollouts-demo-exp-a", "port": 8080, "weight": 10}));
        let edit = set_weight(&route, RouteKind::Http, &config(), &experiments, &desired())
            .unwrap()
            .unwrap();
        assert_eq!(
            weights_of(&edit.object)[0],
            w(&[
                (STABLE, Some(70)),
                (CANARY, Some(30)),
                ("rollouts-demo-exp-a", Some(10))
            ])
        );
    }

    #[test]
    fn finished_experiment_backends_are_removed() {
        let experiments = Experiments {
            active: false,
            previous_additional: vec!["rollouts-demo-exp-a".into()],
            ports: BTreeMap::new(),
        };
        let mut route = http_route();
        route["spec"]["rules"][0]["backendRefs"]
            .as_array_mut()
            .unwrap()
            .extend([
                json!({"name": "rollouts-demo-exp-a", "port": 8080, "weight": 10}),
                json!({"name": "someone-elses", "port": 8080, "weight": 1}),
            ]);
        let edit = set_weight(&route, RouteKind::Http, &config(), &experiments, &desired())
            .unwrap()
            .unwrap();
        assert_eq!(
            weights_of(&edit.object)[0],
            w(&[
                (STABLE, Some(100)),
                (CANARY, Some(0)),
                ("someone-elses", Some(1))
            ])
        );
        // Without previous experiment backends in the route, the weights are the step's.
        let edit = set_weight(
            &http_route(),
            RouteKind::Http,
            &config(),
            &experiments,
            &desired(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            weights_of(&edit.object)[0],
            w(&[(STABLE, Some(70)), (CANARY, Some(30))])
        );
    }

    #[test]
    fn experiments_only_on_http_routes() {
        let experiments = Experiments {
            active: true,
            previous_additional: vec![],
            ports: BTreeMap::from([("rollouts-demo-exp-a".to_string(), 8080)]),
        };
        let route = json!({"metadata": {"name": "g"}, "spec": {"rules": [
            {"backendRefs": [{"name": STABLE}, {"name": CANARY}]}
        ]}});
        let edit = set_weight(
            &route,
            RouteKind::Grpc,
            &config(),
            &experiments,
            &experiment_desired(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            weights_of(&edit.object),
            [w(&[(STABLE, Some(70)), (CANARY, Some(30))])]
        );
    }

    #[test]
    fn observed_weights() {
        let obs = |canary, stable| Some(ObservedWeight { canary, stable });
        let route = |rules: Value| json!({"spec": {"rules": rules}});
        let cases = [
            (RouteKind::Http, http_route(), obs(0, 100)),
            (
                RouteKind::Http,
                route(json!([
                    {"name": "header-route", "backendRefs": [{"name": CANARY, "weight": 9}, {"name": STABLE, "weight": 9}]},
                    {"backendRefs": [{"name": CANARY}]},
                    {"backendRefs": [{"name": "assets"}]},
                    {"backendRefs": [{"name": STABLE, "weight": 80}, {"name": CANARY, "weight": 20}]}
                ])),
                obs(20, 80),
            ),
            (
                RouteKind::Http,
                route(json!([{"backendRefs": [{"name": STABLE}, {"name": CANARY}]}])),
                obs(1, 1),
            ),
            // TCP routes have no managed rules.
            (
                RouteKind::Tcp,
                route(json!([
                    {"name": "header-route", "backendRefs": [{"name": CANARY, "weight": 9}, {"name": STABLE, "weight": 91}]}
                ])),
                obs(9, 91),
            ),
            (
                RouteKind::Http,
                route(json!([{"backendRefs": [{"name": STABLE}]}])),
                None,
            ),
            (
                RouteKind::Http,
                route(
                    json!([{"backendRefs": [{"name": STABLE}, {"name": CANARY, "weight": "x"}]}]),
                ),
                None,
            ),
            (RouteKind::Http, route(json!("x")), None),
            (RouteKind::Http, json!(null), None),
        ];
        for (kind, route, want) in cases {
            assert_eq!(observed_weight(&route, kind, &desired()), want, "{route}");
        }
    }
}
