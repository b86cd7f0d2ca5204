//! The weights a canary Mapping routes right now.

use serde_json::Value;

use crate::ObservedWeight;

/// Canary = the canary Mapping's `spec.weight`, stable = 100 − it (Ambassador gives the base
/// Mapping what its weighted copies leave). No canary Mapping routes nothing to the canary. A
/// weight that is missing or not an integer reads as 0, and weights are clamped to 0..=100.
pub fn observed_weight(canary: Option<&Value>) -> ObservedWeight {
    let weight = canary
        .and_then(|c| c.pointer("/spec/weight"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .clamp(0, 100);
    let weight = i32::try_from(weight).unwrap_or(0);
    ObservedWeight {
        canary: weight,
        stable: 100 - weight,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn weight_of_the_canary_mapping() {
        let w = |canary, stable| ObservedWeight { canary, stable };
        let mapping = |weight: Value| json!({"spec": {"weight": weight}});
        let cases = [
            (None, w(0, 100)),
            (Some(mapping(json!(30))), w(30, 70)),
            (Some(mapping(json!(100))), w(100, 0)),
            (Some(mapping(json!(0))), w(0, 100)),
            (Some(mapping(json!(250))), w(100, 0)),
            (Some(mapping(json!(-3))), w(0, 100)),
            (Some(mapping(json!("30"))), w(0, 100)),
            (Some(json!({"spec": {}})), w(0, 100)),
        ];
        for (canary, want) in cases {
            assert_eq!(observed_weight(canary.as_ref()), want, "{canary:?}");
        }
    }
}
