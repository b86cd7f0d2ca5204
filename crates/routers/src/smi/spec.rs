//! The TrafficSplit `spec` a Rollout wants.

use serde_json::{Value, json};
use sluice_api::rollout::SmiTrafficRouting;

use super::weight::weight_value;
use crate::Desired;

/// `spec.service` is the root Service (`smi.rootService`, else the stable Service); backends
/// are the canary at the desired weight, each experiment Service at its own, then the stable
/// Service with the rest of 100. SMI weights are always out of 100 (validation rejects
/// `maxTrafficWeight` with SMI), and, as in Argo, the rest is not clamped.
pub(super) fn desired_spec(cfg: &SmiTrafficRouting, desired: &Desired, quantity: bool) -> Value {
    let root = cfg
        .root_service
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(&desired.stable_service);
    let backend = |service: &str, weight: i32| json!({"service": service, "weight": weight_value(weight, quantity)});
    let mut stable_weight = 100i32.saturating_sub(desired.weight);
    let mut backends = vec![backend(&desired.canary_service, desired.weight)];
    for destination in &desired.additional {
        backends.push(backend(&destination.service_name, destination.weight));
        stable_weight = stable_weight.saturating_sub(destination.weight);
    }
    backends.push(backend(&desired.stable_service, stable_weight));
    json!({"service": root, "backends": backends})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smi::fixtures::{desired, with_experiment};

    #[test]
    fn backends_are_canary_experiments_stable() {
        let cfg = SmiTrafficRouting::default();
        assert_eq!(
            desired_spec(&cfg, &with_experiment(), true),
            json!({
                "service": "rollout-smi-experiment-stable",
                "backends": [
                    {"service": "rollout-smi-experiment-canary", "weight": "5"},
                    {"service": "rollout-smi-experiment-experiment-smi", "weight": "5"},
                    {"service": "rollout-smi-experiment-stable", "weight": "90"}
                ]
            })
        );
        assert_eq!(
            desired_spec(&cfg, &desired(), false),
            json!({
                "service": "rollout-smi-experiment-stable",
                "backends": [
                    {"service": "rollout-smi-experiment-canary", "weight": 5},
                    {"service": "rollout-smi-experiment-stable", "weight": 95}
                ]
            })
        );
    }

    #[test]
    fn root_service_is_the_split_service() {
        let cfg = SmiTrafficRouting {
            root_service: Some("web".into()),
            ..SmiTrafficRouting::default()
        };
        assert_eq!(desired_spec(&cfg, &desired(), false)["service"], "web");
    }
}
