//! The TraefikService with the canary and stable weights the Rollout wants.

use serde_json::Value;

use super::UPDATED_REASON;
use super::services::{canary_and_stable, weighted_services};
use crate::{Desired, Edit, EditResult};

/// The TraefikService with `weight` = `desired.weight` on the canary entry of
/// `spec.weighted.services` and 100 − it on the stable entry; every other field and entry
/// untouched. `None` when both weights are already so (Argo updates the object on every
/// reconcile; an unchanged update is a no-op for the API server, so skipping it changes
/// nothing but the load).
///
/// Errors, as Argo words them: `spec.weighted.services was not found in traefik service
/// manifest`, `traefik canary service was not found`, `traefik stable service was not found`.
pub fn set_weight(ts: &Value, desired: &Desired) -> EditResult {
    let services = weighted_services(ts)?;
    let (canary, stable) =
        canary_and_stable(services, &desired.canary_service, &desired.stable_service)?;
    let canary_weight = Value::from(desired.weight);
    let stable_weight = Value::from(desired.stable_weight_of_100());
    if services[canary].get("weight") == Some(&canary_weight)
        && services[stable].get("weight") == Some(&stable_weight)
    {
        return Ok(None);
    }
    let mut object = ts.clone();
    if let Some(services) = object
        .pointer_mut("/spec/weighted/services")
        .and_then(Value::as_array_mut)
    {
        for (i, weight) in [(canary, canary_weight), (stable, stable_weight)] {
            if let Some(entry) = services.get_mut(i).and_then(Value::as_object_mut) {
                entry.insert("weight".into(), weight);
            }
        }
    }
    let name = ts
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok(Some(Edit {
        object,
        event: (
            UPDATED_REASON,
            format!(
                "TraefikService `{name}` set to desiredWeight '{}'",
                desired.weight
            ),
        ),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::RouterError;
    use crate::traefik::fixtures::{desired, traefik_service};

    #[test]
    fn weights_are_set_on_the_two_entries() {
        let edit = set_weight(&traefik_service(), &desired(10))
            .unwrap()
            .unwrap();
        let mut want = traefik_service();
        want["spec"]["weighted"]["services"] = json!([
            {"name": "web-stable", "port": 80, "weight": 90},
            {"name": "web-canary", "port": 80, "weight": 10}
        ]);
        assert_eq!(edit.object, want);
        assert_eq!(
            edit.event,
            (
                "TraefikServiceUpdated",
                "TraefikService `web-weighted` set to desiredWeight '10'".to_string()
            )
        );
        assert_eq!(set_weight(&edit.object, &desired(10)), Ok(None));
    }

    #[test]
    fn other_entries_and_fields_are_kept() {
        let mut ts = traefik_service();
        ts["spec"]["weighted"]["services"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "mirror", "port": 80, "weight": 3}));
        ts["spec"]["weighted"]["sticky"] = json!({"cookie": {"name": "lvl"}});
        let edit = set_weight(&ts, &desired(100)).unwrap().unwrap();
        assert_eq!(
            edit.object["spec"]["weighted"],
            json!({
                "services": [
                    {"name": "web-stable", "port": 80, "weight": 0},
                    {"name": "web-canary", "port": 80, "weight": 100},
                    {"name": "mirror", "port": 80, "weight": 3}
                ],
                "sticky": {"cookie": {"name": "lvl"}}
            })
        );
    }

    #[test]
    fn one_weight_off_is_rewritten() {
        let ts = |canary, stable| {
            json!({"spec": {"weighted": {"services": [
                {"name": "web-canary", "weight": canary},
                {"name": "web-stable", "weight": stable}
            ]}}})
        };
        assert_eq!(
            set_weight(&ts(json!(10), json!(90)), &desired(10)),
            Ok(None)
        );
        for off in [
            ts(json!(10), json!(80)),
            ts(json!(5), json!(90)),
            ts(json!("10"), json!(90)),
            ts(Value::Null, json!(90)),
        ] {
            let edit = set_weight(&off, &desired(10)).unwrap().unwrap();
            assert_eq!(edit.object, ts(json!(10), json!(90)), "{off}");
        }
    }

    #[test]
    fn argo_errors() {
        let services = |list: Value| json!({"spec": {"weighted": {"services": list}}});
        let cases = [
            (
                json!({"spec": {}}),
                "spec.weighted.services was not found in traefik service manifest",
            ),
            (
                services(json!([{"name": "web-stable"}])),
                "traefik canary service was not found",
            ),
            (
                services(json!([{"name": "web-canary"}])),
                "traefik stable service was not found",
            ),
            (
                services(json!([{"port": 80}, {"name": "web-canary"}])),
                "name field was not found in service",
            ),
        ];
        for (ts, want) in cases {
            assert_eq!(
                set_weight(&ts, &desired(10)),
                Err(RouterError::new(want)),
                "{ts}"
            );
        }
    }
}
