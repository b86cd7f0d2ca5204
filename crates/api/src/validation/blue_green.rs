//! `spec.strategy.blueGreen`.

use super::int_or_percent::IntOrPercent;
use super::rollout::non_negative;
use super::{Problems, analysis};
use crate::RolloutSpec;
use crate::rollout::BlueGreenStrategy;

const PATH: &str = "spec.strategy.blueGreen";

pub(super) fn check(bg: &BlueGreenStrategy, spec: &RolloutSpec, problems: &mut Problems) {
    let active = bg.active_service.as_deref().unwrap_or_default();
    if active.is_empty() {
        problems.add(&format!("{PATH}.activeService"), "required");
    } else if bg.preview_service.as_deref() == Some(active) {
        problems.add(
            &format!("{PATH}.previewService"),
            format!("must differ from activeService; both are {active:?}"),
        );
    }
    non_negative(
        problems,
        &format!("{PATH}.previewReplicaCount"),
        bg.preview_replica_count,
    );
    non_negative(
        problems,
        &format!("{PATH}.autoPromotionSeconds"),
        bg.auto_promotion_seconds,
    );
    non_negative(
        problems,
        &format!("{PATH}.scaleDownDelaySeconds"),
        bg.scale_down_delay_seconds,
    );
    non_negative(
        problems,
        &format!("{PATH}.abortScaleDownDelaySeconds"),
        bg.abort_scale_down_delay_seconds,
    );
    non_negative(
        problems,
        &format!("{PATH}.scaleDownDelayRevisionLimit"),
        bg.scale_down_delay_revision_limit,
    );
    // Old ReplicaSets kept up for the delay must also be kept in history.
    let history = spec.revision_history_limit();
    if let Some(limit) = bg.scale_down_delay_revision_limit
        && limit > history
    {
        problems.add(
            &format!("{PATH}.scaleDownDelayRevisionLimit"),
            format!("must not exceed spec.revisionHistoryLimit ({history}), got {limit}"),
        );
    }
    if let Some(value) = &bg.max_unavailable {
        match IntOrPercent::parse(value) {
            Err(message) => problems.add(&format!("{PATH}.maxUnavailable"), message),
            Ok(IntOrPercent::Percent(p)) if p > 100 => problems.add(
                &format!("{PATH}.maxUnavailable"),
                format!("must not exceed 100%, got {p}%"),
            ),
            Ok(_) => {}
        }
    }
    if let Some(pre) = &bg.pre_promotion_analysis {
        analysis::check_rollout_analysis(pre, &format!("{PATH}.prePromotionAnalysis"), problems);
    }
    if let Some(post) = &bg.post_promotion_analysis {
        analysis::check_rollout_analysis(post, &format!("{PATH}.postPromotionAnalysis"), problems);
    }
    if let Some(anti_affinity) = &bg.anti_affinity {
        super::check_anti_affinity(anti_affinity, &format!("{PATH}.antiAffinity"), problems);
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
        assert_problems(
            blue_green_problems(json!({"activeService": null})),
            &["spec.strategy.blueGreen.activeService: required"],
        );
        assert_problems(
            blue_green_problems(json!({"previewService": "web-active"})),
            &[
                "spec.strategy.blueGreen.previewService: must differ from activeService; both are \"web-active\"",
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
                "spec.strategy.blueGreen.previewReplicaCount: must not be negative, got -1",
                "spec.strategy.blueGreen.autoPromotionSeconds: must not be negative, got -1",
                "spec.strategy.blueGreen.scaleDownDelaySeconds: must not be negative, got -1",
                "spec.strategy.blueGreen.abortScaleDownDelaySeconds: must not be negative, got -1",
            ],
        );
    }

    #[test]
    fn scale_down_revision_limit_fits_in_history() {
        assert_problems(
            blue_green_problems(json!({"scaleDownDelayRevisionLimit": 11})),
            &[
                "spec.strategy.blueGreen.scaleDownDelayRevisionLimit: must not exceed spec.revisionHistoryLimit (10), got 11",
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
            &["spec.strategy.blueGreen.maxUnavailable: must not exceed 100%, got 120%"],
        );
        assert_problems(
            blue_green_problems(json!({"maxUnavailable": "half"})),
            &[
                "spec.strategy.blueGreen.maxUnavailable: must be an integer or a percentage, got \"half\"",
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
                "spec.strategy.blueGreen.postPromotionAnalysis.templates: must list at least one template",
            ],
        );
    }
}
