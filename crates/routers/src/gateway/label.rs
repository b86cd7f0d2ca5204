//! The in-progress label: lets Gateway tooling see which routes carry a canary right now.

use serde_json::{Map, Value};

use super::Config;
use crate::RouterError;

/// Sets the configured label on the route while the canary gets traffic (`weight > 0`) and
/// removes it otherwise; leaves the route alone when the label is disabled.
pub(super) fn apply(route: &mut Value, cfg: &Config, weight: i32) -> Result<(), RouterError> {
    if cfg.disable_in_progress_label {
        return Ok(());
    }
    let malformed = || RouterError::new("route has malformed metadata.labels");
    let Some(route) = route.as_object_mut() else {
        return Err(RouterError::new("route is not an object"));
    };
    let metadata = route
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| RouterError::new("route has malformed metadata"))?;
    if weight > 0 {
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if labels.is_null() {
            *labels = Value::Object(Map::new());
        }
        labels.as_object_mut().ok_or_else(malformed)?.insert(
            cfg.in_progress_label_key.clone(),
            cfg.in_progress_label_value.as_str().into(),
        );
    } else {
        match metadata.get_mut("labels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                labels.remove(&cfg.in_progress_label_key);
            }
            Some(_) => return Err(malformed()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::parse_config;

    #[test]
    fn set_removed_or_disabled() {
        let on = parse_config(&json!({"httpRoute": "r"})).unwrap();
        let custom = parse_config(&json!({
            "httpRoute": "r", "inProgressLabelKey": "k", "inProgressLabelValue": "v"
        }))
        .unwrap();
        let off = parse_config(&json!({"httpRoute": "r", "disableInProgressLabel": true})).unwrap();
        let key = "rollouts.argoproj.io/gatewayapi-canary";
        let cases = [
            (
                &on,
                json!({"metadata": {}}),
                10,
                json!({"metadata": {"labels": {key: "in-progress"}}}),
            ),
            (
                &on,
                json!({}),
                10,
                json!({"metadata": {"labels": {key: "in-progress"}}}),
            ),
            (
                &on,
                json!({"metadata": {"labels": {"app": "web", key: "in-progress"}}}),
                0,
                json!({"metadata": {"labels": {"app": "web"}}}),
            ),
            (
                &on,
                json!({"metadata": {"labels": null}}),
                0,
                json!({"metadata": {"labels": null}}),
            ),
            (&on, json!({"metadata": {}}), 0, json!({"metadata": {}})),
            (
                &custom,
                json!({"metadata": {"labels": null}}),
                5,
                json!({"metadata": {"labels": {"k": "v"}}}),
            ),
            (&off, json!({"metadata": {}}), 10, json!({"metadata": {}})),
            (
                &off,
                json!({"metadata": {"labels": {key: "in-progress"}}}),
                0,
                json!({"metadata": {"labels": {key: "in-progress"}}}),
            ),
        ];
        for (cfg, mut route, weight, want) in cases {
            apply(&mut route, cfg, weight).unwrap();
            assert_eq!(route, want);
        }
        let mut bad = json!({"metadata": {"labels": []}});
        assert!(apply(&mut bad, &on, 10).is_err());
        assert!(apply(&mut bad, &on, 0).is_err());
        assert!(apply(&mut json!(1), &on, 0).is_err());
    }
}
