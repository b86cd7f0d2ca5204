//! `spec.strategy.canary`: surge settings, services, options that need traffic routing,
//! anti-affinity, background analysis and the steps.

use super::int_or_percent::IntOrPercent;
use super::rollout::non_negative;
use super::{Problems, analysis, steps, traffic};
use crate::rollout::{CanaryStrategy, ReplicaProgressThresholdType};

const PATH: &str = "spec.strategy.canary";

pub(super) fn check(canary: &CanaryStrategy, problems: &mut Problems) {
    check_surge(canary, problems);
    check_services(canary, problems);
    match &canary.traffic_routing {
        Some(routing) => traffic::check(routing, canary, problems),
        None => check_without_traffic_routing(canary, problems),
    }
    if canary.dynamic_stable_scale == Some(true) && canary.scale_down_delay_seconds.is_some() {
        problems.add(
            &format!("{PATH}.dynamicStableScale"),
            "cannot be combined with scaleDownDelaySeconds",
        );
    }
    non_negative(
        problems,
        &format!("{PATH}.scaleDownDelaySeconds"),
        canary.scale_down_delay_seconds,
    );
    non_negative(
        problems,
        &format!("{PATH}.scaleDownDelayRevisionLimit"),
        canary.scale_down_delay_revision_limit,
    );
    non_negative(
        problems,
        &format!("{PATH}.abortScaleDownDelaySeconds"),
        canary.abort_scale_down_delay_seconds,
    );
    non_negative(
        problems,
        &format!("{PATH}.minPodsPerReplicaSet"),
        canary.min_pods_per_replica_set,
    );
    if let Some(anti_affinity) = &canary.anti_affinity {
        super::check_anti_affinity(anti_affinity, &format!("{PATH}.antiAffinity"), problems);
    }
    check_progress_threshold(canary, problems);
    let step_list = canary.steps.as_deref().unwrap_or_default();
    if let Some(background) = &canary.analysis {
        let at = format!("{PATH}.analysis");
        analysis::check_rollout_analysis(&background.analysis, &at, problems);
        if let Some(start) = background.starting_step {
            let last = step_list.len();
            if start < 0 || usize::try_from(start).is_ok_and(|s| s > last) {
                problems.add(
                    &format!("{at}.startingStep"),
                    format!("must be between 0 and the number of steps ({last}), got {start}"),
                );
            }
        }
    }
    steps::check(step_list, canary, problems);
}

/// `maxSurge` and `maxUnavailable`: well-formed, unavailable at most 100%, not both zero.
fn check_surge(canary: &CanaryStrategy, problems: &mut Problems) {
    let surge = parse_surge_field(canary.max_surge.as_ref(), "maxSurge", problems);
    let unavailable =
        parse_surge_field(canary.max_unavailable.as_ref(), "maxUnavailable", problems);
    if let Some(IntOrPercent::Percent(p)) = unavailable
        && p > 100
    {
        problems.add(
            &format!("{PATH}.maxUnavailable"),
            format!("must not exceed 100%, got {p}%"),
        );
    }
    // Unset values default to 25%, which is never zero.
    if surge.is_some_and(IntOrPercent::is_zero) && unavailable.is_some_and(IntOrPercent::is_zero) {
        problems.add(
            &format!("{PATH}.maxSurge"),
            "maxSurge and maxUnavailable cannot both be zero, or the rollout could never make progress",
        );
    }
}

fn parse_surge_field(
    value: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    field: &str,
    problems: &mut Problems,
) -> Option<IntOrPercent> {
    match IntOrPercent::parse(value?) {
        Ok(parsed) => Some(parsed),
        Err(message) => {
            problems.add(&format!("{PATH}.{field}"), message);
            None
        }
    }
}

fn check_services(canary: &CanaryStrategy, problems: &mut Problems) {
    if let (Some(canary_svc), Some(stable_svc)) = (&canary.canary_service, &canary.stable_service)
        && !canary_svc.is_empty()
        && canary_svc == stable_svc
    {
        problems.add(
            &format!("{PATH}.stableService"),
            format!("must differ from canaryService; both are {stable_svc:?}"),
        );
    }
    if let Some(ping_pong) = &canary.ping_pong {
        let ping = ping_pong.ping_service.as_deref().unwrap_or_default();
        let pong = ping_pong.pong_service.as_deref().unwrap_or_default();
        if ping.is_empty() {
            problems.add(&format!("{PATH}.pingPong.pingService"), "required");
        }
        if pong.is_empty() {
            problems.add(&format!("{PATH}.pingPong.pongService"), "required");
        }
        if !ping.is_empty() && ping == pong {
            problems.add(
                &format!("{PATH}.pingPong.pongService"),
                format!("must differ from pingService; both are {ping:?}"),
            );
        }
    }
}

/// Options that only make sense when traffic is shaped by a router.
fn check_without_traffic_routing(canary: &CanaryStrategy, problems: &mut Problems) {
    let needs_routing = |problems: &mut Problems, field: &str| {
        problems.add(
            &format!("{PATH}.{field}"),
            "can only be used with spec.strategy.canary.trafficRouting",
        );
    };
    if canary.scale_down_delay_seconds.is_some() {
        needs_routing(problems, "scaleDownDelaySeconds");
    }
    if canary.dynamic_stable_scale == Some(true) {
        needs_routing(problems, "dynamicStableScale");
    }
    if canary.abort_scale_down_delay_seconds.is_some() {
        needs_routing(problems, "abortScaleDownDelaySeconds");
    }
    if canary.min_pods_per_replica_set.is_some() {
        needs_routing(problems, "minPodsPerReplicaSet");
    }
    if canary.ping_pong.is_some() {
        needs_routing(problems, "pingPong");
    }
}

fn check_progress_threshold(canary: &CanaryStrategy, problems: &mut Problems) {
    let Some(threshold) = &canary.replica_progress_threshold else {
        return;
    };
    let at = format!("{PATH}.replicaProgressThreshold");
    let Some(value) = threshold.value else {
        problems.add(&format!("{at}.value"), "required");
        return;
    };
    match &threshold.type_ {
        None => problems.add(&format!("{at}.type"), "required: Pods or Percent"),
        Some(ReplicaProgressThresholdType::Percent) if !(0..=100).contains(&value) => problems.add(
            &format!("{at}.value"),
            format!("must be between 0 and 100 for type Percent, got {value}"),
        ),
        Some(ReplicaProgressThresholdType::Pods) if value < 0 => problems.add(
            &format!("{at}.value"),
            format!("must not be negative for type Pods, got {value}"),
        ),
        Some(ReplicaProgressThresholdType::Other(other)) => problems.add(
            &format!("{at}.type"),
            format!("must be Pods or Percent, got {other:?}"),
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
                "spec.strategy.canary.maxSurge: must not be negative, got -1%",
                "spec.strategy.canary.maxUnavailable: must be an integer or a percentage, got \"lots\"",
            ],
        );
        assert_problems(
            canary_problems(json!({"maxUnavailable": "101%"})),
            &["spec.strategy.canary.maxUnavailable: must not exceed 100%, got 101%"],
        );
        // More surge than the replica count is allowed.
        assert_problems(canary_problems(json!({"maxSurge": "200%"})), &[]);
    }

    #[test]
    fn surge_and_unavailable_not_both_zero() {
        let message = "spec.strategy.canary.maxSurge: maxSurge and maxUnavailable cannot both be zero, or the rollout could never make progress";
        assert_problems(
            canary_problems(json!({"maxSurge": 0, "maxUnavailable": "0%"})),
            &[message],
        );
        assert_problems(
            canary_problems(json!({"maxSurge": "0", "maxUnavailable": 0})),
            &[message],
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
            &["spec.strategy.canary.stableService: must differ from canaryService; both are \"a\""],
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
        let needs = "can only be used with spec.strategy.canary.trafficRouting";
        assert_problems(
            canary_problems(options),
            &[
                &format!("spec.strategy.canary.scaleDownDelaySeconds: {needs}"),
                &format!("spec.strategy.canary.dynamicStableScale: {needs}"),
                &format!("spec.strategy.canary.abortScaleDownDelaySeconds: {needs}"),
                &format!("spec.strategy.canary.minPodsPerReplicaSet: {needs}"),
                "spec.strategy.canary.dynamicStableScale: cannot be combined with scaleDownDelaySeconds",
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
                "spec.strategy.canary.dynamicStableScale: cannot be combined with scaleDownDelaySeconds",
                "spec.strategy.canary.scaleDownDelaySeconds: must not be negative, got -5",
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
                "spec.strategy.canary.pingPong.pongService: must differ from pingService; both are \"ping\"",
            ],
        );
        assert_problems(
            canary_problems(json!({"pingPong": {"pingService": "ping"}})),
            &[
                "spec.strategy.canary.pingPong.pongService: required",
                "spec.strategy.canary.pingPong: can only be used with spec.strategy.canary.trafficRouting",
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
                "spec.strategy.canary.analysis.startingStep: must be between 0 and the number of steps (2), got 3",
            ],
        );
        assert_problems(
            canary_problems(analysis(-1)),
            &[
                "spec.strategy.canary.analysis.startingStep: must be between 0 and the number of steps (2), got -1",
            ],
        );
        assert_problems(
            canary_problems(json!({"analysis": {"templates": [{"clusterScope": true}]}})),
            &["spec.strategy.canary.analysis.templates[0].templateName: required"],
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
                "spec.strategy.canary.replicaProgressThreshold.value: must be between 0 and 100 for type Percent, got 101",
            ],
        );
        assert_problems(
            canary_problems(threshold("Pods", -1)),
            &[
                "spec.strategy.canary.replicaProgressThreshold.value: must not be negative for type Pods, got -1",
            ],
        );
        assert_problems(
            canary_problems(threshold("Replicas", 1)),
            &[
                "spec.strategy.canary.replicaProgressThreshold.type: must be Pods or Percent, got \"Replicas\"",
            ],
        );
        assert_problems(
            canary_problems(json!({"replicaProgressThreshold": {"type": "Pods"}})),
            &["spec.strategy.canary.replicaProgressThreshold.value: required"],
        );
    }
}
