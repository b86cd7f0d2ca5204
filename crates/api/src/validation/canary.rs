//! `spec.strategy.canary`: surge settings, services, options that need traffic routing,
//! the steps, anti-affinity and background analysis. Argo's canary validator names fields from
//! `spec.strategy` (`spec.strategy.stableService`); Sluice's own checks use the real path.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::int_or_percent::IntOrPercent;
use super::non_negative;
use super::{BadValue, FieldError, Problems, analysis, steps, traffic};
use crate::rollout::{CanaryStrategy, ReplicaProgressThresholdType};

/// The real path of the strategy's fields, used by Sluice's own checks.
const PATH: &str = "spec.strategy.canary";

/// Argo's checks, in its order, then Sluice's.
pub(super) fn check(canary: &CanaryStrategy, problems: &mut Problems) {
    check_surge_not_both_zero(canary, problems);
    check_services(canary, problems);
    check_ping_pong(canary, problems);
    if let Some(routing) = &canary.traffic_routing
        && traffic::needs_canary_and_stable_services(routing, canary)
    {
        for (field, value) in [
            ("stableService", &canary.stable_service),
            ("canaryService", &canary.canary_service),
        ] {
            let value = value.as_deref().unwrap_or_default();
            if value.is_empty() {
                problems.argo(FieldError::invalid(
                    &format!("spec.strategy.{field}"),
                    value,
                    "Canary service and Stable service must to be set to use Traffic Routing",
                ));
            }
        }
    }
    check_routing_options(canary, problems);
    let step_list = canary.steps.as_deref().unwrap_or_default();
    steps::check(step_list, canary, problems);
    if let Some(anti_affinity) = &canary.anti_affinity {
        super::check_anti_affinity(anti_affinity, "spec.strategy.antiAffinity", problems);
    }

    check_surge_values(canary, problems);
    check_routing_only_options(canary, problems);
    for (field, value) in [
        ("scaleDownDelaySeconds", canary.scale_down_delay_seconds),
        (
            "scaleDownDelayRevisionLimit",
            canary.scale_down_delay_revision_limit,
        ),
        (
            "abortScaleDownDelaySeconds",
            canary.abort_scale_down_delay_seconds,
        ),
        ("minPodsPerReplicaSet", canary.min_pods_per_replica_set),
    ] {
        non_negative(problems, &format!("{PATH}.{field}"), value);
    }
    check_progress_threshold(canary, problems);
    if let Some(background) = &canary.analysis {
        let at = format!("{PATH}.analysis");
        analysis::check_rollout_analysis(&background.analysis, &at, problems);
        analysis::check_metadata_field_refs(
            background.analysis.args.as_deref().unwrap_or_default(),
            &format!("{at}.args"),
            problems,
        );
        if let Some(start) = background.starting_step {
            let last = step_list.len();
            if start < 0 || usize::try_from(start).is_ok_and(|s| s > last) {
                problems.sluice(FieldError::invalid(
                    &format!("{at}.startingStep"),
                    start,
                    &format!("must be between 0 and the number of steps ({last})"),
                ));
            }
        }
    }
    if let Some(routing) = &canary.traffic_routing {
        traffic::check(routing, problems);
    }
}

/// With both at zero the rollout could never make progress. Unset values default to 25%.
fn check_surge_not_both_zero(canary: &CanaryStrategy, problems: &mut Problems) {
    let zero =
        |value: Option<&IntOrString>| value.is_some_and(|v| IntOrPercent::argo_amount(v) == 0);
    if let Some(surge) = &canary.max_surge
        && zero(Some(surge))
        && zero(canary.max_unavailable.as_ref())
    {
        problems.argo(FieldError::invalid(
            "spec.strategy.maxSurge",
            BadValue::json(surge),
            "MaxSurge and MaxUnavailable both can not be zero",
        ));
    }
}

fn check_services(canary: &CanaryStrategy, problems: &mut Problems) {
    if let (Some(canary_svc), Some(stable_svc)) = (&canary.canary_service, &canary.stable_service)
        && !canary_svc.is_empty()
        && canary_svc == stable_svc
    {
        problems.argo(FieldError::invalid(
            "spec.strategy.stableService",
            stable_svc.as_str(),
            "This rollout uses the same service for the stable and canary services, but two different services are required.",
        ));
    }
}

fn check_ping_pong(canary: &CanaryStrategy, problems: &mut Problems) {
    let Some(ping_pong) = &canary.ping_pong else {
        return;
    };
    let routing = canary.traffic_routing.as_ref();
    if let Some(routing) = routing
        && routing.alb.is_none()
        && routing.istio.is_none()
        && !traffic::has_plugins(routing)
    {
        // Argo shows the (unset) ALB settings as the value.
        problems.argo(FieldError::invalid(
            "spec.strategy.trafficRouting.alb",
            BadValue::Json(serde_json::Value::Null),
            "Ping-pong feature works with the ALB, Istio, and plugin-based traffic routers only",
        ));
    }
    let ping = ping_pong.ping_service.as_deref().unwrap_or_default();
    let pong = ping_pong.pong_service.as_deref().unwrap_or_default();
    for (field, value) in [("pingService", ping), ("pongService", pong)] {
        if value.is_empty() {
            problems.argo(FieldError::invalid(
                &format!("spec.strategy.pingPong.{field}"),
                value,
                "Ping service and Pong service must to be set to use Ping-Pong feature",
            ));
        }
    }
    // Two unset Services are "the same" to Argo too.
    if ping == pong {
        problems.argo(FieldError::invalid(
            "spec.strategy.pingPong.pingService",
            ping,
            "This rollout uses the same service for the ping and pong services, but two different services are required.",
        ));
    }
    if let Some(alb) = routing.and_then(|r| r.alb.as_ref()) {
        let root = alb.root_service.as_deref().unwrap_or_default();
        if root.is_empty() {
            problems.argo(FieldError::invalid(
                "spec.strategy.trafficRouting.alb.rootService",
                root,
                "Root service field is required for the configuration with ALB and ping-pong feature enabled",
            ));
        }
    }
}

/// Options Argo allows only with traffic routing, or only with some routers.
fn check_routing_options(canary: &CanaryStrategy, problems: &mut Problems) {
    let dynamic = canary.dynamic_stable_scale == Some(true);
    match &canary.traffic_routing {
        None => {
            if let Some(delay) = canary.scale_down_delay_seconds {
                problems.argo(FieldError::invalid(
                    "spec.strategy.scaleDownDelaySeconds",
                    delay,
                    "Canary scaleDownDelaySeconds can only be used with traffic routing",
                ));
            }
            if dynamic {
                problems.argo(FieldError::invalid(
                    "spec.strategy.dynamicStableScale",
                    true,
                    "Canary dynamicStableScale can only be used with traffic routing",
                ));
            }
        }
        Some(routing) => {
            if dynamic && canary.scale_down_delay_seconds.is_some() {
                problems.argo(FieldError::invalid(
                    "spec.strategy.dynamicStableScale",
                    true,
                    "Canary dynamicStableScale cannot be used with scaleDownDelaySeconds",
                ));
            }
            if let Some(weight) = routing.max_traffic_weight
                && routing.nginx.is_none()
                && !traffic::has_plugins(routing)
            {
                problems.argo(FieldError::invalid(
                    "spec.strategy.trafficRouting.maxTrafficWeight",
                    weight,
                    "Canary maxTrafficWeight in traffic routing only supported in Nginx and Plugins",
                ));
            }
        }
    }
}

/// `maxSurge` and `maxUnavailable` well formed, unavailable at most 100%.
fn check_surge_values(canary: &CanaryStrategy, problems: &mut Problems) {
    for (field, value) in [
        ("maxSurge", &canary.max_surge),
        ("maxUnavailable", &canary.max_unavailable),
    ] {
        let Some(value) = value else {
            continue;
        };
        let at = format!("{PATH}.{field}");
        match IntOrPercent::parse(value) {
            Err(detail) => problems.sluice(FieldError::invalid(&at, BadValue::json(value), detail)),
            Ok(IntOrPercent::Percent(p)) if field == "maxUnavailable" && p > 100 => problems
                .sluice(FieldError::invalid(
                    &at,
                    BadValue::json(value),
                    "must not be greater than 100%",
                )),
            Ok(_) => {}
        }
    }
}

/// Options Sluice, beyond Argo, only accepts with traffic routing: without a router they
/// would have nothing to act on.
fn check_routing_only_options(canary: &CanaryStrategy, problems: &mut Problems) {
    if canary.traffic_routing.is_some() {
        return;
    }
    let needs_routing = "can only be used with traffic routing";
    if let Some(delay) = canary.abort_scale_down_delay_seconds {
        problems.sluice(FieldError::invalid(
            &format!("{PATH}.abortScaleDownDelaySeconds"),
            delay,
            needs_routing,
        ));
    }
    if let Some(count) = canary.min_pods_per_replica_set {
        problems.sluice(FieldError::invalid(
            &format!("{PATH}.minPodsPerReplicaSet"),
            count,
            needs_routing,
        ));
    }
    if let Some(ping_pong) = &canary.ping_pong {
        problems.sluice(FieldError::invalid(
            &format!("{PATH}.pingPong"),
            BadValue::json(ping_pong),
            needs_routing,
        ));
    }
}

fn check_progress_threshold(canary: &CanaryStrategy, problems: &mut Problems) {
    let Some(threshold) = &canary.replica_progress_threshold else {
        return;
    };
    let at = format!("{PATH}.replicaProgressThreshold");
    let Some(value) = threshold.value else {
        problems.sluice(FieldError::required(&format!("{at}.value"), ""));
        return;
    };
    let value_at = format!("{at}.value");
    match &threshold.type_ {
        None => problems.sluice(FieldError::required(&format!("{at}.type"), "")),
        Some(ReplicaProgressThresholdType::Percent) if !(0..=100).contains(&value) => problems
            .sluice(FieldError::invalid(
                &value_at,
                value,
                "must be between 0 and 100 for type Percent",
            )),
        Some(ReplicaProgressThresholdType::Pods) if value < 0 => {
            problems.sluice(FieldError::invalid(&value_at, value, super::NOT_NEGATIVE))
        }
        Some(ReplicaProgressThresholdType::Other(other)) => problems.sluice(
            FieldError::not_supported(&format!("{at}.type"), other.as_str(), &["Percent", "Pods"]),
        ),
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::*;

    #[test]
    fn surge_values_are_ints_or_percentages() {
        assert_problems(
            canary_problems(json!({"maxSurge": "25%", "maxUnavailable": 0})),
            &[],
        );
        assert_problems(
            canary_problems(json!({"maxSurge": "25", "maxUnavailable": "0"})),
            &[],
        );
        assert_problems(
            canary_problems(json!({"maxSurge": 0, "maxUnavailable": 1})),
            &[],
        );
        assert_problems(
            canary_problems(json!({"maxSurge": "-1", "maxUnavailable": "lots"})),
            &[
                "spec.strategy.canary.maxSurge: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.strategy.canary.maxUnavailable: Invalid value: \"lots\": must be an integer or percentage (e.g. '5%')",
            ],
        );
        assert_problems(
            canary_problems(json!({"maxUnavailable": "101%"})),
            &[
                "spec.strategy.canary.maxUnavailable: Invalid value: \"101%\": must not be greater than 100%",
            ],
        );
        // More surge than the replica count is allowed.
        assert_problems(canary_problems(json!({"maxSurge": "200%"})), &[]);
    }

    #[test]
    fn surge_and_unavailable_not_both_zero() {
        let detail = "MaxSurge and MaxUnavailable both can not be zero";
        assert_problems(
            canary_problems(json!({"maxSurge": 0, "maxUnavailable": "0%"})),
            &[&format!(
                "spec.strategy.maxSurge: Invalid value: 0: {detail}"
            )],
        );
        assert_problems(
            canary_problems(json!({"maxSurge": "0", "maxUnavailable": 0})),
            &[&format!(
                "spec.strategy.maxSurge: Invalid value: \"0\": {detail}"
            )],
        );
        // Argo reads a string it cannot parse as zero.
        assert_problems(
            canary_problems(json!({"maxSurge": "none", "maxUnavailable": 0})),
            &[
                &format!("spec.strategy.maxSurge: Invalid value: \"none\": {detail}"),
                "spec.strategy.canary.maxSurge: Invalid value: \"none\": must be an integer or percentage (e.g. '5%')",
            ],
        );
        // An unset value defaults to 25%.
        assert_problems(canary_problems(json!({"maxSurge": 0})), &[]);
    }

    #[test]
    fn canary_and_stable_services_differ() {
        assert_problems(
            canary_problems(json!({"canaryService": "a", "stableService": "b"})),
            &[],
        );
        assert_problems(
            canary_problems(json!({"canaryService": "a", "stableService": "a"})),
            &[
                "spec.strategy.stableService: Invalid value: \"a\": This rollout uses the same service for the stable and canary services, but two different services are required.",
            ],
        );
    }

    #[test]
    fn routing_only_options_need_traffic_routing() {
        let options = json!({
            "scaleDownDelaySeconds": 30,
            "dynamicStableScale": true,
            "abortScaleDownDelaySeconds": 30,
            "minPodsPerReplicaSet": 2
        });
        assert_problems(
            canary_problems(options),
            &[
                "spec.strategy.scaleDownDelaySeconds: Invalid value: 30: Canary scaleDownDelaySeconds can only be used with traffic routing",
                "spec.strategy.dynamicStableScale: Invalid value: true: Canary dynamicStableScale can only be used with traffic routing",
                "spec.strategy.canary.abortScaleDownDelaySeconds: Invalid value: 30: can only be used with traffic routing",
                "spec.strategy.canary.minPodsPerReplicaSet: Invalid value: 2: can only be used with traffic routing",
            ],
        );
        assert_problems(canary_problems(json!({"dynamicStableScale": false})), &[]);
        let mut with_routing = with_istio(json!({
            "dynamicStableScale": true,
            "abortScaleDownDelaySeconds": 0,
            "minPodsPerReplicaSet": 2
        }));
        assert_problems(canary_problems(with_routing.clone()), &[]);
        with_routing["scaleDownDelaySeconds"] = json!(-5);
        assert_problems(
            canary_problems(with_routing),
            &[
                "spec.strategy.dynamicStableScale: Invalid value: true: Canary dynamicStableScale cannot be used with scaleDownDelaySeconds",
                "spec.strategy.canary.scaleDownDelaySeconds: Invalid value: -5: must be greater than or equal to 0",
            ],
        );
    }

    #[test]
    fn ping_pong_needs_two_distinct_services() {
        let alb = json!({"trafficRouting": {"alb": {"ingress": "web", "servicePort": 80, "rootService": "web"}}});
        let mut ok = alb.clone();
        ok["pingPong"] = json!({"pingService": "ping", "pongService": "pong"});
        assert_problems(canary_problems(ok), &[]);
        let mut same = alb;
        same["pingPong"] = json!({"pingService": "ping", "pongService": "ping"});
        assert_problems(
            canary_problems(same),
            &[
                "spec.strategy.pingPong.pingService: Invalid value: \"ping\": This rollout uses the same service for the ping and pong services, but two different services are required.",
            ],
        );
        assert_problems(
            canary_problems(json!({"pingPong": {"pingService": "ping"}})),
            &[
                "spec.strategy.pingPong.pongService: Invalid value: \"\": Ping service and Pong service must to be set to use Ping-Pong feature",
                "spec.strategy.canary.pingPong: Invalid value: {\"pingService\":\"ping\"}: can only be used with traffic routing",
            ],
        );
    }

    #[test]
    fn background_analysis_starts_within_the_steps() {
        let analysis = |start: i32| json!({"analysis": {"templates": [{"templateName": "rate"}], "startingStep": start}});
        assert_problems(canary_problems(analysis(2)), &[]);
        assert_problems(
            canary_problems(analysis(3)),
            &[
                "spec.strategy.canary.analysis.startingStep: Invalid value: 3: must be between 0 and the number of steps (2)",
            ],
        );
        assert_problems(
            canary_problems(analysis(-1)),
            &[
                "spec.strategy.canary.analysis.startingStep: Invalid value: -1: must be between 0 and the number of steps (2)",
            ],
        );
        assert_problems(
            canary_problems(json!({"analysis": {"templates": [{"clusterScope": true}]}})),
            &["spec.strategy.canary.analysis.templates[0].templateName: Required value"],
        );
    }

    #[test]
    fn replica_progress_threshold_by_type() {
        let threshold =
            |t: &str, v: i32| json!({"replicaProgressThreshold": {"type": t, "value": v}});
        assert_problems(canary_problems(threshold("Percent", 90)), &[]);
        assert_problems(canary_problems(threshold("Pods", 5)), &[]);
        assert_problems(
            canary_problems(threshold("Percent", 101)),
            &[
                "spec.strategy.canary.replicaProgressThreshold.value: Invalid value: 101: must be between 0 and 100 for type Percent",
            ],
        );
        assert_problems(
            canary_problems(threshold("Pods", -1)),
            &[
                "spec.strategy.canary.replicaProgressThreshold.value: Invalid value: -1: must be greater than or equal to 0",
            ],
        );
        assert_problems(
            canary_problems(threshold("Replicas", 1)),
            &[
                "spec.strategy.canary.replicaProgressThreshold.type: Unsupported value: \"Replicas\": supported values: \"Percent\", \"Pods\"",
            ],
        );
        assert_problems(
            canary_problems(json!({"replicaProgressThreshold": {"type": "Pods"}})),
            &["spec.strategy.canary.replicaProgressThreshold.value: Required value"],
        );
    }
}
