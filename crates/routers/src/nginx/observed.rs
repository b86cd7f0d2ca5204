//! The weights a canary Ingress routes right now, read from its annotations.

use serde_json::Value;
use sluice_api::rollout::{DEFAULT_MAX_TRAFFIC_WEIGHT, NginxTrafficRouting};

use super::annotation_prefix;
use crate::ObservedWeight;

/// Canary and stable weights of a canary Ingress: canary = `<prefix>/canary-weight`,
/// stable = total − canary, where total is `<prefix>/canary-weight-total` or ingress-nginx's
/// 100 when absent.
///
/// When the Ingress's total differs from the Rollout's `maxTrafficWeight` (for instance an
/// Ingress written before `maxTrafficWeight` was set), the weights are rescaled to the
/// Rollout's scale, the canary share rounded down, so that they compare with the engine's.
///
/// `None` when the Ingress routes no weighted canary traffic that can be read: without
/// `<prefix>/canary: "true"` ingress-nginx does not treat it as a canary at all, and a missing
/// or unparsable weight says nothing.
pub fn observed_weight(
    canary_ingress: &Value,
    cfg: &NginxTrafficRouting,
    max_traffic_weight: Option<i32>,
) -> Option<ObservedWeight> {
    let prefix = annotation_prefix(cfg);
    let annotations = canary_ingress.pointer("/metadata/annotations")?;
    let annotation = |key: &str| {
        annotations
            .get(format!("{prefix}/{key}"))
            .and_then(Value::as_str)
            .map(str::trim)
    };
    if annotation("canary") != Some("true") {
        return None;
    }
    let weight: i64 = annotation("canary-weight")?.parse().ok()?;
    let total: i64 = match annotation("canary-weight-total") {
        Some(total) => total.parse().ok()?,
        None => DEFAULT_MAX_TRAFFIC_WEIGHT.into(),
    };
    if total <= 0 {
        return None;
    }
    let canary = weight.clamp(0, total);
    let max = i64::from(max_traffic_weight.unwrap_or(DEFAULT_MAX_TRAFFIC_WEIGHT));
    let (canary, total) = if max > 0 && max != total {
        (canary.checked_mul(max)? / total, max)
    } else {
        (canary, total)
    };
    Some(ObservedWeight {
        canary: i32::try_from(canary).ok()?,
        stable: i32::try_from(total - canary).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn weights_from_annotations() {
        let ingress = |annotations: Value| json!({"metadata": {"annotations": annotations}});
        let default = NginxTrafficRouting::default();
        let custom = NginxTrafficRouting {
            annotation_prefix: Some("custom.io".into()),
            ..NginxTrafficRouting::default()
        };
        let w = |canary, stable| Some(ObservedWeight { canary, stable });
        let cases = [
            (
                &default,
                ingress(json!({
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "10"
                })),
                None,
                w(10, 90),
            ),
            (
                &default,
                ingress(json!({
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "30",
                    "nginx.ingress.kubernetes.io/canary-weight-total": "200"
                })),
                Some(200),
                w(30, 170),
            ),
            (
                &custom,
                ingress(json!({
                    "custom.io/canary": "true",
                    "custom.io/canary-weight": "0"
                })),
                None,
                w(0, 100),
            ),
            // An Ingress out of 100 read on a Rollout out of 1000.
            (
                &default,
                ingress(json!({
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "25"
                })),
                Some(1000),
                w(250, 750),
            ),
            // Above the total: all traffic to the canary.
            (
                &default,
                ingress(json!({
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "150"
                })),
                None,
                w(100, 0),
            ),
            (
                &default,
                ingress(json!({"nginx.ingress.kubernetes.io/canary-weight": "10"})),
                None,
                None,
            ),
            (
                &default,
                ingress(json!({"nginx.ingress.kubernetes.io/canary": "true"})),
                None,
                None,
            ),
            (
                &default,
                ingress(json!({
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "ten"
                })),
                None,
                None,
            ),
            (
                &default,
                ingress(json!({
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "10",
                    "nginx.ingress.kubernetes.io/canary-weight-total": "0"
                })),
                None,
                None,
            ),
            (&default, json!({"metadata": {}}), None, None),
            (&default, json!([]), None, None),
        ];
        for (cfg, ingress, max, want) in cases {
            assert_eq!(observed_weight(&ingress, cfg, max), want, "{ingress}");
        }
    }
}
