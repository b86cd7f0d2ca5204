//! Write the weights into the action annotation of one Ingress.

use serde_json::Value;
use sluice_api::rollout::AlbTrafficRouting;

use super::action::forward_action;
use super::{action_key, action_service, ingress, managed};
use crate::{Desired, EditResult, RouterError};

/// The Ingress with `<prefix>/actions.<actionService>` set to the forward action at
/// `desired`'s weights (canary, experiment Services, stable) and the key recorded as the
/// Rollout's in `managed-alb-annotations`; other annotations and the spec are kept. `None`
/// when both already say so.
///
/// Errors: ``ingress does not have service `<svc>` in rules`` when no path of the Ingress goes
/// to the action Service (the action would never be used), Argo's stickiness duration error,
/// and an unreadable `managed-alb-annotations`.
pub fn set_weight(ingress: &Value, cfg: &AlbTrafficRouting, desired: &Desired) -> EditResult {
    let service = action_service(cfg, desired);
    if !ingress::has_backend(ingress, service) {
        return Err(RouterError::new(format!(
            "ingress does not have service `{service}` in rules"
        )));
    }
    let value = forward_action(cfg, desired)?;
    let name = ingress::name(ingress);
    let key = action_key(cfg, service);
    let mut annotations = ingress::annotations(ingress)?;
    annotations.insert(key.clone(), value.into());
    managed::add(&mut annotations, &desired.rollout, &[&key], name)?;
    let updated = ingress::with_annotations(ingress, annotations)?;
    ingress::finish(
        ingress,
        updated,
        format!(
            "Updating Ingress `{name}` to desiredWeight '{}'",
            desired.weight
        ),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::StickinessConfig;

    use super::*;
    use crate::Destination;
    use crate::alb::MANAGED_ANNOTATIONS;
    use crate::alb::fixtures::{annotation, cfg, desired, ingress, path};

    const ACTION: &str = "alb.ingress.kubernetes.io/actions.alb-canary-root";

    fn at(weight: i32) -> Desired {
        Desired {
            weight,
            ..desired()
        }
    }

    /// The Ingress after `set_weight` at each weight in turn, as written back.
    fn written(weights: &[i32]) -> Value {
        let mut i = ingress();
        for &w in weights {
            if let Some(edit) = set_weight(&i, &cfg(), &at(w)).unwrap() {
                i = edit.object;
            }
        }
        i
    }

    #[test]
    fn first_weight_sets_the_action_and_the_managed_key() {
        let edit = set_weight(&ingress(), &cfg(), &desired()).unwrap().unwrap();
        assert_eq!(
            edit.event,
            (
                "PatchingALBIngress",
                "Updating Ingress `alb-canary-ingress` to desiredWeight '10'".to_string()
            )
        );
        let mut want = ingress();
        want["metadata"]["annotations"] = json!({
            "kubernetes.io/ingress.class": "alb",
            ACTION: r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":10},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":90}]}}"#,
            MANAGED_ANNOTATIONS: r#"{"alb-canary":["alb.ingress.kubernetes.io/actions.alb-canary-root"]}"#,
        });
        assert_eq!(edit.object, want);
    }

    #[test]
    fn weights_in_turn() {
        let cases = [
            (vec![10], 20, true),
            (vec![10, 20], 20, false),
            (vec![10, 20], 0, true),
            (vec![0], 0, false),
            (vec![100], 100, false),
        ];
        for (before, weight, changes) in cases {
            let current = written(&before);
            let got = set_weight(&current, &cfg(), &at(weight)).unwrap();
            assert_eq!(got.is_some(), changes, "{before:?} then {weight}");
            if let Some(edit) = got {
                assert_eq!(edit.object, written(&[weight]), "{before:?} then {weight}");
                assert_eq!(edit.object["metadata"]["resourceVersion"], "12");
            }
        }
    }

    #[test]
    fn other_rollouts_and_annotations_are_kept() {
        let mut i = ingress();
        i["metadata"]["annotations"][MANAGED_ANNOTATIONS] = json!(
            r#"{"alb-canary":["alb.ingress.kubernetes.io/actions.header-route"],"other":["alb.ingress.kubernetes.io/actions.other-root"]}"#
        );
        i["metadata"]["annotations"]["alb.ingress.kubernetes.io/actions.other-root"] =
            json!("kept");
        i["metadata"]["annotations"]["alb.ingress.kubernetes.io/scheme"] = json!("internet-facing");
        let edit = set_weight(&i, &cfg(), &desired()).unwrap().unwrap();
        let a = &edit.object["metadata"]["annotations"];
        assert_eq!(
            a[MANAGED_ANNOTATIONS],
            r#"{"alb-canary":["alb.ingress.kubernetes.io/actions.header-route","alb.ingress.kubernetes.io/actions.alb-canary-root"],"other":["alb.ingress.kubernetes.io/actions.other-root"]}"#
        );
        assert_eq!(a["alb.ingress.kubernetes.io/actions.other-root"], "kept");
        assert_eq!(a["alb.ingress.kubernetes.io/scheme"], "internet-facing");
        assert_eq!(edit.object["spec"], ingress()["spec"]);
    }

    #[test]
    fn stable_service_is_the_action_without_root_service() {
        let cfg = AlbTrafficRouting {
            root_service: None,
            annotation_prefix: Some("custom.io".into()),
            stickiness_config: Some(StickinessConfig {
                enabled: Some(true),
                duration_seconds: Some(600),
            }),
            ..cfg()
        };
        let mut i = ingress();
        i["spec"]["rules"][0]["http"]["paths"][0] =
            path("/*", "alb-canary-stable", json!({"name": "use-annotation"}));
        let edit = set_weight(&i, &cfg, &desired()).unwrap().unwrap();
        assert_eq!(
            annotation(&edit.object, "custom.io/actions.alb-canary-stable"),
            Some(
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":10},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":90}],"TargetGroupStickinessConfig":{"Enabled":true,"DurationSeconds":600}}}"#
            )
        );
        assert_eq!(
            annotation(&edit.object, MANAGED_ANNOTATIONS),
            Some(r#"{"alb-canary":["custom.io/actions.alb-canary-stable"]}"#)
        );
    }

    #[test]
    fn experiment_services_share_the_traffic() {
        let d = Desired {
            additional: vec![Destination {
                service_name: "alb-canary-experiment-alb".into(),
                pod_template_hash: "abc".into(),
                weight: 20,
            }],
            ..desired()
        };
        let edit = set_weight(&ingress(), &cfg(), &d).unwrap().unwrap();
        assert_eq!(
            annotation(&edit.object, ACTION),
            Some(
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":10},{"ServiceName":"alb-canary-experiment-alb","ServicePort":"80","Weight":20},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":70}]}}"#
            )
        );
        // Once the experiment ends its target group goes away.
        let after = set_weight(&edit.object, &cfg(), &desired())
            .unwrap()
            .unwrap();
        assert_eq!(after.object, written(&[10]));
    }

    #[test]
    fn each_ingress_on_its_own() {
        // Of two Ingresses, the first already at the weight: the second is still updated.
        let first = written(&[10]);
        let mut second = ingress();
        second["metadata"]["name"] = json!("alb-canary-ingress-internal");
        assert_eq!(set_weight(&first, &cfg(), &desired()), Ok(None));
        let edit = set_weight(&second, &cfg(), &desired()).unwrap().unwrap();
        assert_eq!(
            edit.event.1,
            "Updating Ingress `alb-canary-ingress-internal` to desiredWeight '10'"
        );
        assert_eq!(annotation(&edit.object, ACTION), annotation(&first, ACTION));
    }

    #[test]
    fn errors() {
        let mut no_root = ingress();
        no_root["spec"]["rules"][0]["http"]["paths"][0] =
            path("/*", "alb-canary-stable", json!({"number": 80}));
        let mut bad_managed = ingress();
        bad_managed["metadata"]["annotations"][MANAGED_ANNOTATIONS] = json!("alb-canary:x");
        let bad_sticky = AlbTrafficRouting {
            stickiness_config: Some(StickinessConfig {
                enabled: Some(true),
                duration_seconds: Some(0),
            }),
            ..cfg()
        };
        let missing = "ingress does not have service `alb-canary-root` in rules";
        let cases = [
            (no_root, cfg(), missing),
            (json!({"metadata": {"name": "x"}}), cfg(), missing),
            (json!(null), cfg(), missing),
            (
                ingress(),
                bad_sticky,
                "TargetGroupStickinessConfig's duration must be between 1 and 604800 seconds (7 days)!",
            ),
        ];
        for (i, cfg, want) in cases {
            assert_eq!(
                set_weight(&i, &cfg, &desired()),
                Err(RouterError::new(want)),
                "{i}"
            );
        }
        let err = set_weight(&bad_managed, &cfg(), &desired()).unwrap_err();
        assert!(err.0.contains("unreadable"), "{err}");
    }
}
