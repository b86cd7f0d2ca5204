//! Building Rollouts for the checks' tests: a valid base object plus a JSON merge patch.

use serde_json::{Value, json};

use crate::Rollout;

/// A valid canary Rollout.
pub(super) fn canary_base() -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
            },
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}}
        }
    })
}

/// A valid blue-green Rollout.
pub(super) fn blue_green_base() -> Value {
    let mut base = canary_base();
    base["spec"]["strategy"] = json!({"blueGreen": {"activeService": "web-active"}});
    base
}

/// Applies an RFC 7386 merge patch: objects merge, `null` removes, anything else replaces.
pub(super) fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch,
    }
}

fn problems_of(mut base: Value, patch: Value) -> Vec<String> {
    merge(&mut base, patch);
    let rollout: Rollout = serde_json::from_value(base).unwrap();
    super::validate_rollout(&rollout)
}

/// Problems of the canary base with `spec.strategy.canary` merged with `patch`.
pub(super) fn canary_problems(patch: Value) -> Vec<String> {
    problems_of(
        canary_base(),
        json!({"spec": {"strategy": {"canary": patch}}}),
    )
}

/// Problems of the blue-green base with `spec.strategy.blueGreen` merged with `patch`.
pub(super) fn blue_green_problems(patch: Value) -> Vec<String> {
    problems_of(
        blue_green_base(),
        json!({"spec": {"strategy": {"blueGreen": patch}}}),
    )
}

/// Problems of the canary base with `spec` merged with `patch`.
pub(super) fn spec_problems(patch: Value) -> Vec<String> {
    problems_of(canary_base(), json!({ "spec": patch }))
}

/// Canary fields that enable traffic routing through Istio with two Services.
pub(super) fn with_istio(mut canary: Value) -> Value {
    merge(
        &mut canary,
        json!({
            "canaryService": "web-canary",
            "stableService": "web-stable",
            "trafficRouting": {
                "istio": {"virtualService": {"name": "web", "routes": ["primary"]}},
                "managedRoutes": [{"name": "header"}, {"name": "mirror"}]
            }
        }),
    );
    canary
}

/// Asserts the problems are exactly the expected ones.
#[track_caller]
pub(super) fn assert_problems(actual: Vec<String>, expected: &[&str]) {
    assert_eq!(actual, expected, "problems differ");
}
