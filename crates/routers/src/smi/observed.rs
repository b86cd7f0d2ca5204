//! The weights a TrafficSplit routes right now.

use serde_json::Value;

use super::weight::parse_weight;
use crate::{Desired, ObservedWeight};

/// The weights of the canary and stable backends, whichever form they are written in. `None`
/// when either backend is missing or its weight is unreadable.
pub fn observed_weight(ts: &Value, desired: &Desired) -> Option<ObservedWeight> {
    let backends = ts.pointer("/spec/backends")?.as_array()?;
    let weight_of = |service: &str| {
        backends
            .iter()
            .find(|b| b.get("service").and_then(Value::as_str) == Some(service))
            .and_then(|b| b.get("weight"))
            .and_then(parse_weight)
            .and_then(|w| i32::try_from(w).ok())
    };
    Some(ObservedWeight {
        canary: weight_of(&desired.canary_service)?,
        stable: weight_of(&desired.stable_service)?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::smi::fixtures::desired;

    #[test]
    fn weights_in_both_forms() {
        let split = |backends: Value| json!({"spec": {"backends": backends}});
        let w = |canary, stable| Some(ObservedWeight { canary, stable });
        let cases = [
            (
                split(json!([
                    {"service": "rollout-smi-experiment-canary", "weight": "5"},
                    {"service": "rollout-smi-experiment-experiment-smi", "weight": "5"},
                    {"service": "rollout-smi-experiment-stable", "weight": "90"}
                ])),
                w(5, 90),
            ),
            (
                split(json!([
                    {"service": "rollout-smi-experiment-stable", "weight": 80},
                    {"service": "rollout-smi-experiment-canary", "weight": 20}
                ])),
                w(20, 80),
            ),
            (
                split(json!([{"service": "rollout-smi-experiment-stable", "weight": 100}])),
                None,
            ),
            (
                split(json!([
                    {"service": "rollout-smi-experiment-canary", "weight": "x"},
                    {"service": "rollout-smi-experiment-stable", "weight": 100}
                ])),
                None,
            ),
            (json!({"spec": {}}), None),
            (json!(7), None),
        ];
        for (ts, want) in cases {
            assert_eq!(observed_weight(&ts, &desired()), want, "{ts}");
        }
    }
}
