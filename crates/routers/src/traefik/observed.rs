//! The weights a TraefikService routes right now.

use serde_json::Value;

use super::services::{canary_and_stable, weighted_services};
use crate::{Desired, ObservedWeight};

/// The `weight` of the canary and of the stable entry of `spec.weighted.services`. `None`
/// when either entry is missing or has no integer weight (Traefik then weighs it 1, which
/// says nothing about the split the Rollout asked for).
pub fn observed_weight(ts: &Value, desired: &Desired) -> Option<ObservedWeight> {
    let services = weighted_services(ts).ok()?;
    let (canary, stable) =
        canary_and_stable(services, &desired.canary_service, &desired.stable_service).ok()?;
    let weight = |i: usize| {
        services[i]
            .get("weight")
            .and_then(Value::as_i64)
            .and_then(|w| i32::try_from(w).ok())
    };
    Some(ObservedWeight {
        canary: weight(canary)?,
        stable: weight(stable)?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::traefik::fixtures::{desired, traefik_service};
    use crate::traefik::set_weight;

    #[test]
    fn weights_of_the_two_entries() {
        let ts = |services: Value| json!({"spec": {"weighted": {"services": services}}});
        let w = |canary, stable| Some(ObservedWeight { canary, stable });
        let cases = [
            (
                ts(json!([
                    {"name": "web-stable", "weight": 70},
                    {"name": "web-canary", "weight": 30}
                ])),
                w(30, 70),
            ),
            (
                ts(json!([
                    {"name": "web-canary", "weight": 0},
                    {"name": "web-stable", "weight": 100},
                    {"name": "other", "weight": 5}
                ])),
                w(0, 100),
            ),
            (traefik_service(), None),
            (
                ts(json!([{"name": "web-canary", "weight": 30}, {"name": "web-stable"}])),
                None,
            ),
            (
                ts(json!([
                    {"name": "web-canary", "weight": "30"},
                    {"name": "web-stable", "weight": 70}
                ])),
                None,
            ),
            (ts(json!([{"name": "web-stable", "weight": 100}])), None),
            (json!({"spec": {}}), None),
            (json!(null), None),
        ];
        for (ts, want) in cases {
            assert_eq!(observed_weight(&ts, &desired(0)), want, "{ts}");
        }
    }

    /// The steps of Argo's Traefik guide (`setWeight` 20, 40, 60, 80, then promotion to 0 on
    /// the promoted stable) read back as written.
    #[test]
    fn steps_read_back_as_written() {
        let mut ts = traefik_service();
        for weight in [20, 40, 60, 80, 100, 0] {
            if let Some(edit) = set_weight(&ts, &desired(weight)).unwrap() {
                ts = edit.object;
            }
            assert_eq!(
                observed_weight(&ts, &desired(weight)),
                Some(ObservedWeight {
                    canary: weight,
                    stable: 100 - weight
                })
            );
        }
    }
}
