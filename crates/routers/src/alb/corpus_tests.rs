//! The ALB Rollouts of Argo's e2e fixtures, walked through their steps against their own
//! Ingresses: every Ingress of `ingresses[]` ends up with the same annotations and paths.

use std::path::Path;

use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::rollout::{AlbTrafficRouting, CanaryStrategy};

use super::{
    MANAGED_ANNOTATIONS, ingresses, observed_weight, remove_managed_routes, set_header_route,
    set_weight,
};
use crate::{Desired, ObservedWeight};

struct Fixture {
    rollout: String,
    canary: CanaryStrategy,
    cfg: AlbTrafficRouting,
    ingresses: Vec<Value>,
}

fn load(file: &str) -> Fixture {
    let root = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
    let text = std::fs::read_to_string(Path::new(&root).join(file)).unwrap();
    let docs = sluice_api::yaml::from_multi_doc_str(&text).unwrap();
    let rollout_doc = docs.iter().find(|d| d["kind"] == "Rollout").unwrap();
    let rollout: Rollout = serde_json::from_value(rollout_doc.clone()).unwrap();
    let canary = rollout.spec.strategy.unwrap().canary.unwrap();
    let cfg = canary
        .traffic_routing
        .as_ref()
        .and_then(|t| t.alb.clone())
        .unwrap();
    let by_name = |name: &String| {
        docs.iter()
            .find(|d| d["kind"] == "Ingress" && d["metadata"]["name"] == name.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{file}: no Ingress {name}"))
    };
    Fixture {
        rollout: rollout_doc["metadata"]["name"].as_str().unwrap().into(),
        ingresses: ingresses(&cfg).iter().map(by_name).collect(),
        canary,
        cfg,
    }
}

impl Fixture {
    fn desired(&self, weight: i32) -> Desired {
        Desired {
            rollout: self.rollout.clone(),
            namespace: "default".into(),
            canary_service: self.canary.canary_service.clone().unwrap_or_default(),
            stable_service: self.canary.stable_service.clone().unwrap_or_default(),
            weight,
            max_weight: 100,
            managed_routes: self
                .canary
                .traffic_routing
                .iter()
                .flat_map(|t| t.managed_routes.iter().flatten())
                .filter_map(|r| r.name.clone())
                .collect(),
            ..Desired::default()
        }
    }

    /// Every step in turn, as the engine applies them to each Ingress: the weight of the
    /// last `setWeight` and every `setHeaderRoute`.
    fn walk(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for ingress in &self.ingresses {
            let mut ingress = ingress.clone();
            let mut weight = 0;
            for step in self.canary.steps.iter().flatten() {
                let result = if let Some(w) = step.set_weight {
                    weight = w;
                    set_weight(&ingress, &self.cfg, &self.desired(weight))
                } else if let Some(route) = &step.set_header_route {
                    set_header_route(&ingress, &self.cfg, route, &self.desired(weight))
                } else {
                    continue;
                };
                if let Some(edit) = result.unwrap() {
                    ingress = edit.object;
                }
            }
            out.push(ingress);
        }
        out
    }
}

fn annotation<'a>(ingress: &'a Value, key: &str) -> &'a str {
    ingress["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key}"))
}

#[test]
fn header_route_fixtures_walk_their_steps() {
    for file in [
        "test/e2e/header-routing/alb-header-route.yaml",
        "test/e2e/header-routing/alb-header-route-multi-ingress.yaml",
    ] {
        let fixture = load(file);
        let d = fixture.desired(20);
        let (canary, stable) = (&d.canary_service, &d.stable_service);
        let mut route_added = fixture.ingresses.clone();
        for (ingress, original) in fixture.walk().iter().zip(&fixture.ingresses) {
            // The last header step removed the route: only the weights remain.
            assert_eq!(
                annotation(ingress, "alb.ingress.kubernetes.io/actions.action1"),
                format!(
                    r#"{{"Type":"forward","ForwardConfig":{{"TargetGroups":[{{"ServiceName":"{canary}","ServicePort":"8080","Weight":20}},{{"ServiceName":"{stable}","ServicePort":"8080","Weight":80}}]}}}}"#
                ),
                "{file}"
            );
            assert_eq!(
                annotation(ingress, MANAGED_ANNOTATIONS),
                r#"{"rollouts-demo":["alb.ingress.kubernetes.io/actions.action1"]}"#
            );
            assert_eq!(ingress["spec"], original["spec"], "{file}");
            assert_eq!(
                observed_weight(ingress, &fixture.cfg, &d),
                Some(ObservedWeight {
                    canary: 20,
                    stable: 80
                })
            );
        }
        // With the route in place (the step before its removal), then removed on promotion.
        let header_step = fixture
            .canary
            .steps
            .iter()
            .flatten()
            .find_map(|s| s.set_header_route.as_ref().filter(|r| r.match_.is_some()))
            .unwrap();
        for ingress in &mut route_added {
            *ingress = set_header_route(ingress, &fixture.cfg, header_step, &d)
                .unwrap()
                .unwrap()
                .object;
            assert_eq!(
                annotation(ingress, "alb.ingress.kubernetes.io/conditions.header-route"),
                r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"Custom-Header","values":["Mozilla*"]}}]"#
            );
            assert_eq!(
                annotation(ingress, "alb.ingress.kubernetes.io/actions.header-route"),
                format!(
                    r#"{{"Type":"forward","ForwardConfig":{{"TargetGroups":[{{"ServiceName":"{canary}","ServicePort":"8080","Weight":100}}]}}}}"#
                )
            );
            assert_eq!(
                ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"],
                serde_json::json!({"service": {"name": "header-route", "port": {"name": "use-annotation"}}})
            );
            let removed = remove_managed_routes(ingress, &fixture.cfg, &d)
                .unwrap()
                .unwrap()
                .object;
            assert!(
                removed["metadata"]["annotations"]
                    .get("alb.ingress.kubernetes.io/actions.header-route")
                    .is_none()
            );
            assert_eq!(
                removed["spec"]["rules"][0]["http"]["paths"]
                    .as_array()
                    .unwrap()
                    .len(),
                1
            );
        }
    }
}

#[test]
fn weighted_fixtures_reach_their_weights() {
    let cases = [
        ("test/e2e/functional/alb-canary-rollout.yaml", 1, 20),
        ("test/e2e/alb/rollout-alb-experiment.yaml", 1, 10),
        (
            "test/e2e/alb/rollout-alb-multi-ingress-experiment.yaml",
            2,
            10,
        ),
    ];
    for (file, count, weight) in cases {
        let fixture = load(file);
        let walked = fixture.walk();
        assert_eq!(walked.len(), count, "{file}");
        let d = fixture.desired(weight);
        for ingress in &walked {
            assert_eq!(
                observed_weight(ingress, &fixture.cfg, &d),
                Some(ObservedWeight {
                    canary: weight,
                    stable: 100 - weight
                }),
                "{file}"
            );
            // Walking again changes nothing.
            assert_eq!(set_weight(ingress, &fixture.cfg, &d), Ok(None), "{file}");
        }
    }
}

#[test]
fn fixture_whose_root_service_is_not_in_its_ingresses() {
    // The Rollout names `alb-canary-root`, its Ingresses route to
    // `alb-canary-multi-ingress-root`: the weights cannot be set, as in Argo.
    let fixture = load("test/e2e/functional/alb-canary-multi-ingress-rollout.yaml");
    assert_eq!(fixture.ingresses.len(), 2);
    for ingress in &fixture.ingresses {
        assert_eq!(
            set_weight(ingress, &fixture.cfg, &fixture.desired(10)),
            Err(crate::RouterError::new(
                "ingress does not have service `alb-canary-root` in rules"
            ))
        );
    }
}
