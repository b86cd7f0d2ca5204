//! `spec.strategy.blueGreen`. Argo's blue-green validator names fields from `spec.strategy`.

use super::int_or_percent::IntOrPercent;
use super::non_negative;
use super::{BadValue, FieldError, Problems, analysis};
use crate::RolloutSpec;
use crate::rollout::BlueGreenStrategy;

/// The real path of the strategy's fields, used by Sluice's own checks.
const PATH: &str = "spec.strategy.blueGreen";

pub(super) fn check(bg: &BlueGreenStrategy, spec: &RolloutSpec, problems: &mut Problems) {
    let active = bg.active_service.as_deref().unwrap_or_default();
    let preview = bg.preview_service.as_deref().unwrap_or_default();
    // Two unset Services are "the same" to Argo too.
    if active == preview {
        problems.argo(FieldError::invalid(
            "spec.strategy.activeService",
            active,
            "This rollout uses the same service for the active and preview services, but two different services are required.",
        ));
    } else if active.is_empty() {
        problems.sluice(FieldError::required(&format!("{PATH}.activeService"), ""));
    }
    // Old ReplicaSets kept up for the delay must also be kept in history.
    if let Some(limit) = bg.scale_down_delay_revision_limit
        && limit > spec.revision_history_limit()
    {
        problems.argo(FieldError::invalid(
            "spec.strategy.scaleDownDelayRevisionLimit",
            limit,
            "This rollout's revision history limit can not be smaller than the rollout's scale down limit",
        ));
    }
    if let Some(anti_affinity) = &bg.anti_affinity {
        super::check_anti_affinity(anti_affinity, "spec.strategy.antiAffinity", problems);
    }

    for (field, value) in [
        ("previewReplicaCount", bg.preview_replica_count),
        ("autoPromotionSeconds", bg.auto_promotion_seconds),
        ("scaleDownDelaySeconds", bg.scale_down_delay_seconds),
        (
            "abortScaleDownDelaySeconds",
            bg.abort_scale_down_delay_seconds,
        ),
        (
            "scaleDownDelayRevisionLimit",
            bg.scale_down_delay_revision_limit,
        ),
    ] {
        non_negative(problems, &format!("{PATH}.{field}"), value);
    }
    if let Some(value) = &bg.max_unavailable {
        let at = format!("{PATH}.maxUnavailable");
        match IntOrPercent::parse(value) {
            Err(detail) => problems.sluice(FieldError::invalid(&at, BadValue::json(value), detail)),
            Ok(IntOrPercent::Percent(p)) if p > 100 => problems.sluice(FieldError::invalid(
                &at,
                BadValue::json(value),
                "must not be greater than 100%",
            )),
            Ok(_) => {}
        }
    }
    for (field, promotion) in [
        ("prePromotionAnalysis", &bg.pre_promotion_analysis),
        ("postPromotionAnalysis", &bg.post_promotion_analysis),
    ] {
        if let Some(promotion) = promotion {
            let at = format!("{PATH}.{field}");
            analysis::check_rollout_analysis(promotion, &at, problems);
            analysis::check_metadata_field_refs(
                promotion.args.as_deref().unwrap_or_default(),
                &format!("{at}.args"),
                problems,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::*;

    #[test]
    fn active_service_is_required_and_distinct_from_preview() {
        assert_problems(
            blue_green_problems(json!({"previewService": "web-preview"})),
            &[],
        );
        // Two unset Services are the same one to Argo.
        assert_problems(
            blue_green_problems(json!({"activeService": null})),
            &[
                "spec.strategy.activeService: Invalid value: \"\": This rollout uses the same service for the active and preview services, but two different services are required.",
            ],
        );
        assert_problems(
            blue_green_problems(json!({"activeService": null, "previewService": "web-preview"})),
            &["spec.strategy.blueGreen.activeService: Required value"],
        );
        assert_problems(
            blue_green_problems(json!({"previewService": "web-active"})),
            &[
                "spec.strategy.activeService: Invalid value: \"web-active\": This rollout uses the same service for the active and preview services, but two different services are required.",
            ],
        );
    }

    #[test]
    fn counts_and_delays_must_not_be_negative() {
        assert_problems(
            blue_green_problems(json!({
                "previewReplicaCount": 1, "autoPromotionSeconds": 0, "scaleDownDelaySeconds": 30,
                "abortScaleDownDelaySeconds": 0, "scaleDownDelayRevisionLimit": 2
            })),
            &[],
        );
        assert_problems(
            blue_green_problems(json!({
                "previewReplicaCount": -1, "autoPromotionSeconds": -1, "scaleDownDelaySeconds": -1,
                "abortScaleDownDelaySeconds": -1
            })),
            &[
                "spec.strategy.blueGreen.previewReplicaCount: Invalid value: -1: must be greater than or equal to 0",
                "spec.strategy.blueGreen.autoPromotionSeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.strategy.blueGreen.scaleDownDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
                "spec.strategy.blueGreen.abortScaleDownDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
            ],
        );
    }

    #[test]
    fn scale_down_revision_limit_fits_in_history() {
        assert_problems(
            blue_green_problems(json!({"scaleDownDelayRevisionLimit": 11})),
            &[
                "spec.strategy.scaleDownDelayRevisionLimit: Invalid value: 11: This rollout's revision history limit can not be smaller than the rollout's scale down limit",
            ],
        );
        assert_problems(
            blue_green_problems(json!({"scaleDownDelayRevisionLimit": 10})),
            &[],
        );
    }

    #[test]
    fn max_unavailable_is_an_int_or_percentage_up_to_100() {
        assert_problems(blue_green_problems(json!({"maxUnavailable": "100%"})), &[]);
        assert_problems(blue_green_problems(json!({"maxUnavailable": 2})), &[]);
        assert_problems(
            blue_green_problems(json!({"maxUnavailable": "120%"})),
            &[
                "spec.strategy.blueGreen.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%",
            ],
        );
        assert_problems(
            blue_green_problems(json!({"maxUnavailable": "half"})),
            &[
                "spec.strategy.blueGreen.maxUnavailable: Invalid value: \"half\": must be an integer or percentage (e.g. '5%')",
            ],
        );
    }

    #[test]
    fn promotion_analyses_need_templates() {
        assert_problems(
            blue_green_problems(json!({
                "prePromotionAnalysis": {"templates": [{"templateName": "smoke"}]},
                "postPromotionAnalysis": {"templates": [{"templateName": "load"}]}
            })),
            &[],
        );
        assert_problems(
            blue_green_problems(json!({"postPromotionAnalysis": {"templates": []}})),
            &[
                "spec.strategy.blueGreen.postPromotionAnalysis.templates: Required value: at least one template is required",
            ],
        );
        assert_problems(
            blue_green_problems(json!({"prePromotionAnalysis": {
                "templates": [{"templateName": "smoke"}],
                "args": [{"name": "owner", "valueFrom": {"fieldRef": {"fieldPath": "metadata.ownerReferences"}}}]
            }})),
            &[
                "spec.strategy.blueGreen.prePromotionAnalysis.args[0].valueFrom.fieldRef.fieldPath: Invalid value: \"metadata.ownerReferences\": Analyses arguments must refer to valid object metadata supported by downwardAPI",
            ],
        );
    }
}
