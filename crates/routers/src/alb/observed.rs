//! The weights an ALB Ingress routes right now, read from its action annotation.

use serde_json::Value;
use sluice_api::rollout::AlbTrafficRouting;

use super::{action_key, action_service, ingress};
use crate::{Desired, ObservedWeight};

/// Canary and stable weights of `<prefix>/actions.<actionService>`: the `Weight` of the
/// target groups whose `ServiceName` is the canary and the stable Service (0 for a Service
/// without a target group: the load balancer sends it nothing).
///
/// Without the annotation the load balancer controller has no action for the action Service,
/// so the path goes to that Service as a plain backend: to the stable Service, or to
/// `rootService`, whose selector the engine keeps on the stable pods. Either way all traffic
/// is stable: `{canary: 0, stable: 100}`.
///
/// `None` when the annotation cannot be read: not JSON, no `TargetGroups` list, or a weight
/// of the canary or stable group missing or not an integer.
pub fn observed_weight(
    ingress: &Value,
    cfg: &AlbTrafficRouting,
    desired: &Desired,
) -> Option<ObservedWeight> {
    let key = action_key(cfg, action_service(cfg, desired));
    let annotations = ingress::annotations(ingress).ok()?;
    let Some(text) = annotations.get(&key) else {
        return Some(ObservedWeight {
            canary: 0,
            stable: 100,
        });
    };
    let action: Value = serde_json::from_str(text.as_str()?).ok()?;
    let groups = action.pointer("/ForwardConfig/TargetGroups")?.as_array()?;
    let weight_of = |service: &str| -> Option<i32> {
        let Some(group) = groups
            .iter()
            .find(|g| g.get("ServiceName").and_then(Value::as_str) == Some(service))
        else {
            return Some(0);
        };
        let weight = match group.get("Weight")? {
            Value::String(s) => s.trim().parse().ok()?,
            w => w.as_i64()?,
        };
        i32::try_from(weight).ok()
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
    use crate::Destination;
    use crate::alb::fixtures::{cfg, desired, ingress};
    use crate::alb::set_weight;

    const ACTION: &str = "alb.ingress.kubernetes.io/actions.alb-canary-root";

    fn w(canary: i32, stable: i32) -> Option<ObservedWeight> {
        Some(ObservedWeight { canary, stable })
    }

    #[test]
    fn round_trip_with_set_weight() {
        let experiment = vec![Destination {
            service_name: "alb-canary-experiment-alb".into(),
            pod_template_hash: "abc".into(),
            weight: 20,
        }];
        let cases = [
            (0, vec![], w(0, 100)),
            (10, vec![], w(10, 90)),
            (55, vec![], w(55, 45)),
            (100, vec![], w(100, 0)),
            (10, experiment, w(10, 70)),
        ];
        for (weight, additional, want) in cases {
            let d = Desired {
                weight,
                additional,
                ..desired()
            };
            let written = set_weight(&ingress(), &cfg(), &d).unwrap().unwrap().object;
            assert_eq!(observed_weight(&written, &cfg(), &d), want, "{weight}");
        }
    }

    #[test]
    fn without_the_annotation_all_traffic_is_stable() {
        let no_root = AlbTrafficRouting {
            root_service: None,
            ..cfg()
        };
        let mut other_action = ingress();
        other_action["metadata"]["annotations"]["alb.ingress.kubernetes.io/actions.other"] =
            json!("{}");
        for i in [ingress(), other_action, json!({}), json!({"metadata": {}})] {
            assert_eq!(observed_weight(&i, &cfg(), &desired()), w(0, 100), "{i}");
            assert_eq!(observed_weight(&i, &no_root, &desired()), w(0, 100), "{i}");
        }
    }

    #[test]
    fn weights_as_written_by_hand() {
        let with = |action: Value| {
            let mut i = ingress();
            i["metadata"]["annotations"][ACTION] = match action {
                Value::String(s) => Value::String(s),
                v => Value::String(v.to_string()),
            };
            i
        };
        let group = |svc: &str, weight: Value| json!({"ServiceName": svc, "ServicePort": "80", "Weight": weight});
        let action = |groups: Vec<Value>| json!({"Type": "forward", "ForwardConfig": {"TargetGroups": groups}});
        let cases = [
            // Stable listed first, spaced, weight as a string.
            (
                with(json!(
                    "{ \"Type\": \"forward\", \"ForwardConfig\": { \"TargetGroups\": [\n {\"ServiceName\": \"alb-canary-stable\", \"ServicePort\": \"80\", \"Weight\": 75},\n {\"ServiceName\": \"alb-canary-desired\", \"ServicePort\": \"80\", \"Weight\": \"25\"} ] } }"
                )),
                w(25, 75),
            ),
            // Only the stable Service: the canary gets nothing.
            (
                with(action(vec![group("alb-canary-stable", json!(100))])),
                w(0, 100),
            ),
            // Neither: both get nothing.
            (
                with(action(vec![group("someone-else", json!(100))])),
                w(0, 0),
            ),
            (
                with(action(vec![
                    group("alb-canary-desired", json!(null)),
                    group("alb-canary-stable", json!(100)),
                ])),
                None,
            ),
            (
                with(action(vec![
                    json!({"ServiceName": "alb-canary-desired"}),
                    group("alb-canary-stable", json!(100)),
                ])),
                None,
            ),
            (
                with(action(vec![
                    group("alb-canary-desired", json!(1e20)),
                    group("alb-canary-stable", json!(0)),
                ])),
                None,
            ),
            (with(json!("not json")), None),
            (with(json!({"Type": "fixed-response"})), None),
            (
                {
                    let mut i = ingress();
                    i["metadata"]["annotations"][ACTION] = json!(5);
                    i
                },
                None,
            ),
            (json!({"metadata": {"annotations": []}}), None),
        ];
        for (i, want) in cases {
            assert_eq!(observed_weight(&i, &cfg(), &desired()), want, "{i}");
        }
    }

    #[test]
    fn ping_pong_reads_the_services_as_resolved() {
        // After the swap, pong is stable and ping the canary.
        let written = set_weight(&ingress(), &cfg(), &desired())
            .unwrap()
            .unwrap()
            .object;
        let swapped = Desired {
            canary_service: "alb-canary-stable".into(),
            stable_service: "alb-canary-desired".into(),
            ..desired()
        };
        assert_eq!(observed_weight(&written, &cfg(), &swapped), w(90, 10));
    }
}
