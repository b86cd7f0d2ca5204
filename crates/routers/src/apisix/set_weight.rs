//! The ApisixRoute with the canary and stable backend weights the Rollout wants.

use serde_json::Value;
use sluice_api::rollout::ApisixTrafficRouting;

use super::rules::{backend_position, backends, http, rule_position, set_backend_weight};
use super::{UPDATED_REASON, name_of, rule_names};
use crate::{Desired, Edit, EditResult};

/// The ApisixRoute with, in each rule of [`rule_names`], `weight` = `desired.weight` on the
/// canary backend and 100 − it on the stable backend; every other field untouched. `None` when
/// all are already so (Argo updates on every reconcile; an unchanged update changes nothing).
///
/// Errors, as Argo words them: `spec.http was not found in Apisix Route manifest`,
/// `Apisix http route rule <r> not found`, `apisix route <svc> backend was not found` (the
/// canary is looked for before the stable).
pub fn set_weight(route: &Value, cfg: &ApisixTrafficRouting, desired: &Desired) -> EditResult {
    let http = http(route)?;
    let mut object = route.clone();
    for rule in rule_names(cfg, route) {
        let i = rule_position(http, &rule)?;
        let backends = backends(&http[i], &rule)?;
        let canary = backend_position(backends, &desired.canary_service)?;
        let stable = backend_position(backends, &desired.stable_service)?;
        set_backend_weight(&mut object, i, canary, desired.weight);
        set_backend_weight(&mut object, i, stable, desired.stable_weight_of_100());
    }
    if object == *route {
        return Ok(None);
    }
    Ok(Some(Edit {
        event: (
            UPDATED_REASON,
            format!(
                "ApisixRoute `{}` set to desiredWeight '{}'",
                name_of(route),
                desired.weight
            ),
        ),
        object,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::ApisixRoute;

    use super::*;
    use crate::RouterError;
    use crate::apisix::fixtures::{cfg, desired, route};

    #[test]
    fn weights_of_the_configured_rule() {
        let edit = set_weight(&route(), &cfg(), &desired(5)).unwrap().unwrap();
        let mut want = route();
        want["spec"]["http"][0]["backends"][0]["weight"] = json!(95);
        want["spec"]["http"][0]["backends"][1]["weight"] = json!(5);
        assert_eq!(edit.object, want);
        assert_eq!(
            edit.event,
            (
                "ApisixRouteUpdated",
                "ApisixRoute `rollouts-apisix-route` set to desiredWeight '5'".to_string()
            )
        );
        assert_eq!(set_weight(&edit.object, &cfg(), &desired(5)), Ok(None));
    }

    #[test]
    fn unchanged_route_is_not_written() {
        assert_eq!(set_weight(&route(), &cfg(), &desired(0)), Ok(None));
    }

    #[test]
    fn every_listed_rule_and_no_other() {
        let rule = |name: &str| {
            json!({"name": name, "backends": [
                {"serviceName": "rollout-apisix-canary-canary", "weight": 0},
                {"serviceName": "rollout-apisix-canary-stable", "weight": 100}
            ]})
        };
        let route = json!({"metadata": {"name": "r"},
            "spec": {"http": [rule("a"), rule("b"), rule("c")]}});
        let cfg = ApisixTrafficRouting {
            route: Some(ApisixRoute {
                name: Some("r".into()),
                rules: Some(vec!["c".into(), "a".into()]),
            }),
        };
        let edit = set_weight(&route, &cfg, &desired(40)).unwrap().unwrap();
        let weights: Vec<_> = (0..3)
            .map(|i| {
                let b = &edit.object["spec"]["http"][i]["backends"];
                (b[0]["weight"].clone(), b[1]["weight"].clone())
            })
            .collect();
        assert_eq!(
            weights,
            [
                (json!(40), json!(60)),
                (json!(0), json!(100)),
                (json!(40), json!(60))
            ]
        );
    }

    #[test]
    fn rule_defaults_to_the_route_name() {
        let mut route = route();
        route["spec"]["http"][0]["name"] = json!("rollouts-apisix-route");
        let cfg = ApisixTrafficRouting {
            route: Some(ApisixRoute {
                name: Some("rollouts-apisix-route".into()),
                rules: None,
            }),
        };
        let edit = set_weight(&route, &cfg, &desired(50)).unwrap().unwrap();
        assert_eq!(edit.object["spec"]["http"][0]["backends"][1]["weight"], 50);
    }

    #[test]
    fn argo_errors() {
        let without = |pointer: &str, key: &str| {
            let mut r = route();
            r.pointer_mut(pointer)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove(key);
            r
        };
        let renamed = |i: usize| {
            let mut r = route();
            r["spec"]["http"][0]["backends"][i]["serviceName"] = json!("other");
            r
        };
        let cases = [
            (
                without("/spec", "http"),
                "spec.http was not found in Apisix Route manifest",
            ),
            (
                {
                    let mut r = route();
                    r["spec"]["http"][0]["name"] = json!("other");
                    r
                },
                "Apisix http route rule rollouts-apisix not found",
            ),
            (
                without("/spec/http/0", "backends"),
                "Apisix http route rule rollouts-apisix has no backends",
            ),
            (
                renamed(1),
                "apisix route rollout-apisix-canary-canary backend was not found",
            ),
            (
                renamed(0),
                "apisix route rollout-apisix-canary-stable backend was not found",
            ),
        ];
        for (route, want) in cases {
            assert_eq!(
                set_weight(&route, &cfg(), &desired(5)),
                Err(RouterError::new(want)),
                "{route}"
            );
        }
    }
}
