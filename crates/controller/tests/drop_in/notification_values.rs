//! argo-helm's `notifications` values: the chart renders them into the ConfigMap and Secret the
//! controller reads, and what it renders is a configuration the controller takes without a
//! problem.

use std::collections::BTreeMap;

use serde_json::Value;

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

fn string_map(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The chart's defaults: an empty ConfigMap (as argo-helm's), no Secret.
pub fn check_defaults(docs: &[Value]) {
    let cm = find(docs, "ConfigMap", "argo-rollouts-notification-configmap")
        .expect("the notifications ConfigMap is created by default");
    assert!(cm.get("data").is_none_or(Value::is_null), "{cm}");
    assert!(find(docs, "Secret", "argo-rollouts-notification-secret").is_none());
}

/// The team's values (charts/sluice/ci/team-values.yaml): a Slack service whose token is in the
/// Secret, a template, a trigger and the default triggers.
pub fn check_team_values(docs: &[Value]) {
    let cm = find(docs, "ConfigMap", "argo-rollouts-notification-configmap")
        .expect("the notifications ConfigMap");
    let secret = find(docs, "Secret", "argo-rollouts-notification-secret")
        .expect("the notifications Secret");
    let data = string_map(&cm["data"]);
    let secret_data = string_map(&secret["stringData"]);
    assert_eq!(
        secret_data.get("slack-token").map(String::as_str),
        Some("xoxb-team-token")
    );
    let config = sluice_notifications::Config::parse(&data, &secret_data);
    assert!(config.problems.is_empty(), "{:?}", config.problems);
    assert!(config.services.contains_key("slack"), "{data:?}");
    assert!(config.templates.contains_key("rollout-paused"), "{data:?}");
    assert!(
        config.triggers.contains_key("on-rollout-paused"),
        "{data:?}"
    );
    assert_eq!(config.default_triggers, ["on-rollout-paused"]);
}
