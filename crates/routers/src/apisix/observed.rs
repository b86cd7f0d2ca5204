//! The weights an ApisixRoute routes right now.

use serde_json::Value;
use sluice_api::rollout::ApisixTrafficRouting;

use super::rule_names;
use super::rules::{backend_position, backends, http, rule_position};
use crate::{Desired, ObservedWeight, cautious};

/// The canary and stable backend weights of the rules the Rollout weights; when the rules
/// disagree, the largest canary and the smallest stable weight of any. `None` when a rule or
/// backend is missing, a weight is not an integer or absent (APISIX then weighs the backend
/// 100, which says nothing about the split the Rollout asked for), or no rule is weighted.
pub fn observed_weight(
    route: &Value,
    cfg: &ApisixTrafficRouting,
    desired: &Desired,
) -> Option<ObservedWeight> {
    let http = http(route).ok()?;
    let mut weights = Vec::new();
    for rule in rule_names(cfg, route) {
        let rule_value = &http[rule_position(http, &rule).ok()?];
        let backends = backends(rule_value, &rule).ok()?;
        let weight = |service: &str| {
            let i = backend_position(backends, service).ok()?;
            backends[i]
                .get("weight")
                .and_then(Value::as_i64)
                .and_then(|w| i32::try_from(w).ok())
        };
        weights.push(ObservedWeight {
            canary: weight(&desired.canary_service)?,
            stable: weight(&desired.stable_service)?,
        });
    }
    cautious::combine(&weights)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::ApisixRoute;

    use super::*;
    use crate::apisix::fixtures::{cfg, desired, route};
    use crate::apisix::set_weight;

    fn w(canary: i32, stable: i32) -> Option<ObservedWeight> {
        Some(ObservedWeight { canary, stable })
    }

    #[test]
    fn weights_of_the_rule() {
        let with = |pointer: &str, value: Value| {
            let mut r = route();
            *r.pointer_mut(pointer).unwrap() = value;
            r
        };
        let cases = [
            (route(), w(0, 100)),
            (
                with("/spec/http/0/backends/1/weight", json!(30)),
                w(30, 100),
            ),
            (with("/spec/http/0/backends/1/weight", Value::Null), None),
            (with("/spec/http/0/backends/0/weight", json!("100")), None),
            (with("/spec/http/0/name", json!("x")), None),
            (with("/spec/http/0/backends", json!([])), None),
            (with("/spec/http", json!({})), None),
            (json!(null), None),
        ];
        for (route, want) in cases {
            assert_eq!(
                observed_weight(&route, &cfg(), &desired(0)),
                want,
                "{route}"
            );
        }
    }

    #[test]
    fn rules_that_disagree_give_the_cautious_pair() {
        let rule = |name: &str, canary: i32, stable: i32| {
            json!({"name": name, "backends": [
                {"serviceName": "rollout-apisix-canary-canary", "weight": canary},
                {"serviceName": "rollout-apisix-canary-stable", "weight": stable}
            ]})
        };
        let route = json!({"spec": {"http": [rule("a", 10, 90), rule("b", 30, 70)]}});
        let both = ApisixTrafficRouting {
            route: Some(ApisixRoute {
                name: Some("r".into()),
                rules: Some(vec!["a".into(), "b".into()]),
            }),
        };
        assert_eq!(observed_weight(&route, &both, &desired(0)), w(30, 70));
        let none = ApisixTrafficRouting {
            route: Some(ApisixRoute {
                name: Some("r".into()),
                rules: Some(vec![]),
            }),
        };
        assert_eq!(observed_weight(&route, &none, &desired(0)), None);
    }

    /// Both corpus e2e ApisixRoutes, and the one of `examples/apisix` (no weights yet),
    /// through the steps of their Rollouts, each weight read back as written.
    #[test]
    fn corpus_routes_walk_their_steps() {
        let root = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
        let files = [
            ("test/e2e/apisix/rollout-apisix-canary.yaml", None),
            (
                "test/e2e/apisix/rollout-apisix-canary-set-header.yaml",
                None,
            ),
            (
                "examples/apisix/rollout.yaml",
                Some("examples/apisix/route.yaml"),
            ),
        ];
        for (rollout_file, route_file) in files {
            let docs = |file: &str| {
                let text = std::fs::read_to_string(root.join(file)).unwrap();
                sluice_api::yaml::from_multi_doc_str(&text).unwrap()
            };
            let mut objects = docs(rollout_file);
            if let Some(route_file) = route_file {
                objects.extend(docs(route_file));
            }
            let of_kind = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
            let rollout = of_kind("Rollout");
            let mut route = of_kind("ApisixRoute").clone();
            let canary = &rollout["spec"]["strategy"]["canary"];
            let cfg: ApisixTrafficRouting =
                serde_json::from_value(canary["trafficRouting"]["apisix"].clone()).unwrap();
            let mut d = desired(0);
            d.canary_service = canary["canaryService"].as_str().unwrap().into();
            d.stable_service = canary["stableService"].as_str().unwrap().into();
            let weights: Vec<i32> = canary["steps"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|s| s["setWeight"].as_i64())
                .map(|w| w as i32)
                .collect();
            assert!(!weights.is_empty(), "{rollout_file}");
            for weight in weights.into_iter().chain([100, 0]) {
                d.weight = weight;
                if let Some(edit) = set_weight(&route, &cfg, &d).unwrap() {
                    route = edit.object;
                }
                assert_eq!(
                    observed_weight(&route, &cfg, &d),
                    w(weight, 100 - weight),
                    "{rollout_file} at {weight}"
                );
            }
        }
    }
}
