//! Rollout validation: the verdict and the message a Rollout's `InvalidSpec` condition shows.

use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::validation::check_rollout;
use sluice_conformance::differences::Differences;
use sluice_conformance::generate::rollout::rollout;
use sluice_conformance::oracle::{self, ARGO_VERSIONS};
use sluice_conformance::run::compare;

/// Argo's answer: the message its controller sets `InvalidSpec` with, if any.
fn argo_verdict(version: &str, ro: &Value) -> Result<Option<String>, String> {
    let answer = oracle::shared(version)
        .ask(&json!({"op": "validateRollout", "rollout": ro}))
        .map_err(|e| format!("{e:#}"))?;
    if let Some(problem) = answer.get("decodeError").or(answer.get("panic")) {
        return Err(format!(
            "Argo {version} could not judge the case: {problem}"
        ));
    }
    let first = |key: &str| answer[key].as_array().and_then(|a| a.first()).cloned();
    Ok(first("errors")
        .or_else(|| first("configErrors"))
        .and_then(|v| v.as_str().map(str::to_string)))
}

fn check(version: &str, differences: &Differences, ro: &Value) -> Result<String, String> {
    let argo = argo_verdict(version, ro)?;
    let rollout: Rollout = serde_json::from_value(ro.clone())
        .map_err(|e| format!("Sluice cannot read a Rollout Argo {version} reads: {e}"))?;
    let problems = check_rollout(&rollout);
    let sluice = problems.blocking();
    match (&argo, sluice) {
        (None, None) if problems.sluice.is_empty() => Ok("both run it".into()),
        (None, None) => Ok("both run it, Sluice warns".into()),
        (Some(a), Some(s)) if a == s => Ok("both refuse it, same message".into()),
        (a, s) => {
            if let Some(row) = differences.explains(a.as_deref(), s) {
                return Ok(format!("documented difference ({row})"));
            }
            Err(format!(
                "Argo {version}: {}\nSluice: {}\n(Sluice's other problems: {:?})",
                a.as_deref().unwrap_or("runs it"),
                s.unwrap_or("runs it"),
                problems
            ))
        }
    }
}

#[test]
fn rollout_validation_matches_argo() {
    let differences = Differences::load("Validation");
    for version in ARGO_VERSIONS {
        compare(&format!("validation/{version}"), rollout, |ro| {
            check(version, &differences, ro)
        });
    }
}

/// The case that broke the drop-in promise: a canary without traffic routing that sets
/// `abortScaleDownDelaySeconds` runs under Argo, so it runs under Sluice too (with a warning).
#[test]
fn abort_scale_down_delay_without_routing_runs() {
    let ro = canary(json!({"abortScaleDownDelaySeconds": 5,
                           "steps": [{"setWeight": 20}, {"pause": {}}]}));
    for version in ARGO_VERSIONS {
        assert_eq!(
            argo_verdict(version, &ro),
            Ok(None),
            "Argo {version} runs it"
        );
    }
    let rollout: Rollout = serde_json::from_value(ro).unwrap();
    let problems = check_rollout(&rollout);
    assert_eq!(problems.blocking(), None, "{problems:?}");
    assert_eq!(
        problems.sluice,
        [
            "spec.strategy.canary.abortScaleDownDelaySeconds: Invalid value: 5: can only be used with traffic routing"
        ]
    );
}

/// Sluice's NGINX header routes: Argo refuses the step, Sluice runs it, and the page lists the
/// difference (generated cases reach it only now and then: it needs a managed route by the
/// step's name and nothing else wrong).
#[test]
fn nginx_header_routes_run_where_argo_refuses() {
    let ro = canary(json!({
        "canaryService": "web-canary", "stableService": "web-stable",
        "trafficRouting": {"nginx": {"stableIngress": "web"},
                           "managedRoutes": [{"name": "beta"}]},
        "steps": [
            {"setWeight": 10},
            {"setHeaderRoute": {"name": "beta", "match": [
                {"headerName": "X-Beta", "headerValue": {"exact": "yes"}}]}},
            {"pause": {}},
            {"setHeaderRoute": {"name": "beta"}}
        ]
    }));
    let differences = Differences::load("Validation");
    for version in ARGO_VERSIONS {
        let argo = argo_verdict(version, &ro).unwrap();
        assert!(
            argo.as_deref()
                .is_some_and(|m| m.contains("supports Istio and ALB and Apisix")),
            "Argo {version}: {argo:?}"
        );
        assert_eq!(
            check(version, &differences, &ro).map(|v| v.starts_with("documented difference")),
            Ok(true)
        );
    }
    let rollout: Rollout = serde_json::from_value(ro).unwrap();
    let problems = check_rollout(&rollout);
    assert_eq!(problems.blocking(), None, "{problems:?}");
    assert!(problems.sluice.is_empty(), "{problems:?}");
}

/// A Rollout of three `nginx` pods with this canary strategy.
fn canary(strategy: Value) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
            "strategy": {"canary": strategy}
        }
    })
}
