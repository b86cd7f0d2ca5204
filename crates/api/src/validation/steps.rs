//! `spec.strategy.canary.steps[]`: one action per step, each with its own constraints.

use std::collections::BTreeSet;

use super::rollout::non_negative;
use super::{Problems, analysis};
use crate::duration::parse_go_duration;
use crate::rollout::{
    CanaryStep, CanaryStrategy, DEFAULT_MAX_TRAFFIC_WEIGHT, ReplicaSetSpecRef,
    RolloutExperimentStep, RolloutTrafficRouting, SetCanaryScale, SetHeaderRoute, SetMirrorRoute,
    StringMatch,
};

/// Names of the step actions, for messages.
const ACTIONS: &str = "setWeight, pause, experiment, analysis, setCanaryScale, setHeaderRoute, setMirrorRoute, plugin";

pub(super) fn check(steps: &[CanaryStep], canary: &CanaryStrategy, problems: &mut Problems) {
    let routing = canary.traffic_routing.as_ref();
    for (i, step) in steps.iter().enumerate() {
        let at = format!("spec.strategy.canary.steps[{i}]");
        check_one_action(step, &at, problems);
        if let Some(weight) = step.set_weight {
            let max = routing.map_or(DEFAULT_MAX_TRAFFIC_WEIGHT, |r| r.max_traffic_weight());
            if !(0..=max).contains(&weight) {
                problems.add(
                    &format!("{at}.setWeight"),
                    format!("must be between 0 and {max}, got {weight}"),
                );
            }
        }
        if let Some(Err(e)) = step.pause.as_ref().and_then(|p| p.duration()) {
            problems.add(
                &format!("{at}.pause.duration"),
                format!("must be whole seconds or a duration such as 30s or 1h: {e}"),
            );
        }
        if let Some(experiment) = &step.experiment {
            check_experiment(experiment, routing, &format!("{at}.experiment"), problems);
        }
        if let Some(step_analysis) = &step.analysis {
            analysis::check_rollout_analysis(step_analysis, &format!("{at}.analysis"), problems);
        }
        if let Some(scale) = &step.set_canary_scale {
            check_canary_scale(scale, routing, &format!("{at}.setCanaryScale"), problems);
        }
        if let Some(route) = &step.set_header_route {
            check_header_route(route, routing, &format!("{at}.setHeaderRoute"), problems);
        }
        if let Some(route) = &step.set_mirror_route {
            check_mirror_route(route, routing, &format!("{at}.setMirrorRoute"), problems);
        }
        if let Some(plugin) = &step.plugin
            && plugin.name.as_deref().is_none_or(str::is_empty)
        {
            problems.add(&format!("{at}.plugin.name"), "required");
        }
    }
}

/// A step needs an action. Of the actions that decide when the step completes (setWeight,
/// pause, experiment, analysis, plugin) at most one may be set; setCanaryScale,
/// setHeaderRoute and setMirrorRoute may accompany one of them, as Argo's own examples do.
fn check_one_action(step: &CanaryStep, at: &str, problems: &mut Problems) {
    if step.action_count() == 0 {
        problems.add(at, format!("must set one of {ACTIONS}"));
        return;
    }
    let primary: Vec<&str> = [
        (step.set_weight.is_some(), "setWeight"),
        (step.pause.is_some(), "pause"),
        (step.experiment.is_some(), "experiment"),
        (step.analysis.is_some(), "analysis"),
        (step.plugin.is_some(), "plugin"),
    ]
    .into_iter()
    .filter_map(|(present, name)| present.then_some(name))
    .collect();
    if primary.len() > 1 {
        problems.add(
            at,
            format!(
                "must set only one of setWeight, pause, experiment, analysis, plugin, but sets {}",
                primary.join(", ")
            ),
        );
    }
}

fn check_experiment(
    experiment: &RolloutExperimentStep,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    problems: &mut Problems,
) {
    let templates = experiment.templates.as_deref().unwrap_or_default();
    if templates.is_empty() {
        problems.add(
            &format!("{at}.templates"),
            "must list at least one template",
        );
    }
    let mut names = BTreeSet::new();
    for (i, template) in templates.iter().enumerate() {
        let t_at = format!("{at}.templates[{i}]");
        match template.name.as_deref() {
            None | Some("") => problems.add(&format!("{t_at}.name"), "required"),
            Some(name) if !names.insert(name) => problems.add(
                &format!("{t_at}.name"),
                format!("duplicate template name {name:?}"),
            ),
            Some(_) => {}
        }
        match &template.spec_ref {
            None => problems.add(&format!("{t_at}.specRef"), "required: stable or canary"),
            Some(ReplicaSetSpecRef::Other(other)) => problems.add(
                &format!("{t_at}.specRef"),
                format!("must be stable or canary, got {other:?}"),
            ),
            Some(_) => {}
        }
        non_negative(problems, &format!("{t_at}.replicas"), template.replicas);
        if let Some(weight) = template.weight {
            let weighted_router =
                routing.is_some_and(|r| r.alb.is_some() || r.smi.is_some() || r.istio.is_some());
            if !weighted_router {
                problems.add(
                    &format!("{t_at}.weight"),
                    "needs trafficRouting with the alb, smi or istio router",
                );
            }
            if !(0..=100).contains(&weight) {
                problems.add(
                    &format!("{t_at}.weight"),
                    format!("must be between 0 and 100, got {weight}"),
                );
            }
        }
    }
    if let Some(duration) = &experiment.duration
        && let Err(e) = parse_go_duration(duration)
    {
        problems.add(&format!("{at}.duration"), e);
    }
    let mut analysis_names = BTreeSet::new();
    for (i, analysis_ref) in experiment.analyses.iter().flatten().enumerate() {
        let a_at = format!("{at}.analyses[{i}]");
        match analysis_ref.name.as_deref() {
            None | Some("") => problems.add(&format!("{a_at}.name"), "required"),
            Some(name) if !analysis_names.insert(name) => problems.add(
                &format!("{a_at}.name"),
                format!("duplicate analysis name {name:?}"),
            ),
            Some(_) => {}
        }
        if analysis_ref
            .template_name
            .as_deref()
            .is_none_or(str::is_empty)
        {
            problems.add(&format!("{a_at}.templateName"), "required");
        }
        analysis::check_run_arguments(
            analysis_ref.args.as_deref().unwrap_or_default(),
            &format!("{a_at}.args"),
            problems,
        );
    }
    non_negative(
        problems,
        &format!("{at}.scaleDownDelaySeconds"),
        experiment.scale_down_delay_seconds,
    );
}

fn check_canary_scale(
    scale: &SetCanaryScale,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    problems: &mut Problems,
) {
    if routing.is_none() {
        problems.add(at, "needs spec.strategy.canary.trafficRouting");
    }
    if scale.weight.is_none() && scale.replicas.is_none() && scale.match_traffic_weight.is_none() {
        problems.add(at, "must set one of weight, replicas or matchTrafficWeight");
    }
    if let Some(weight) = scale.weight
        && !(0..=100).contains(&weight)
    {
        problems.add(
            &format!("{at}.weight"),
            format!("must be between 0 and 100, got {weight}"),
        );
    }
    non_negative(problems, &format!("{at}.replicas"), scale.replicas);
}

fn check_header_route(
    route: &SetHeaderRoute,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    problems: &mut Problems,
) {
    let supported = routing
        .filter(|r| r.istio.is_some() || r.alb.is_some() || r.apisix.is_some() || has_plugins(r));
    let Some(routing) = supported else {
        problems.add(
            at,
            "needs trafficRouting with the istio, alb or apisix router or router plugins",
        );
        return;
    };
    check_managed_route_name(route.name.as_deref(), routing, at, problems);
    for (i, condition) in route.match_.iter().flatten().enumerate() {
        let m_at = format!("{at}.match[{i}]");
        if condition.header_name.as_deref().is_none_or(str::is_empty) {
            problems.add(&format!("{m_at}.headerName"), "required");
        }
        let value_at = format!("{m_at}.headerValue");
        match &condition.header_value {
            None => problems.add(&value_at, "required: one of exact, prefix or regex"),
            Some(value) if routing.alb.is_some() => {
                if is_blank(&value.exact) || !is_blank(&value.prefix) || !is_blank(&value.regex) {
                    problems.add(&value_at, "the alb router only matches headers with exact");
                }
            }
            Some(value) => check_string_match(value, &value_at, problems),
        }
    }
}

fn check_mirror_route(
    route: &SetMirrorRoute,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    problems: &mut Problems,
) {
    let Some(routing) = routing.filter(|r| r.istio.is_some() || has_plugins(r)) else {
        problems.add(
            at,
            "needs trafficRouting with the istio router or router plugins",
        );
        return;
    };
    check_managed_route_name(route.name.as_deref(), routing, at, problems);
    if let Some(percentage) = route.percentage
        && !(0..=100).contains(&percentage)
    {
        problems.add(
            &format!("{at}.percentage"),
            format!("must be between 0 and 100, got {percentage}"),
        );
    }
    for (i, condition) in route.match_.iter().flatten().enumerate() {
        let m_at = format!("{at}.match[{i}]");
        if let Some(method) = &condition.method {
            check_string_match(method, &format!("{m_at}.method"), problems);
        }
        if let Some(path) = &condition.path {
            check_string_match(path, &format!("{m_at}.path"), problems);
        }
        for (name, value) in condition.headers.iter().flatten() {
            check_string_match(value, &format!("{m_at}.headers[{name}]"), problems);
        }
    }
}

/// Header and mirror steps act on a route the controller manages, declared up front.
fn check_managed_route_name(
    name: Option<&str>,
    routing: &RolloutTrafficRouting,
    at: &str,
    problems: &mut Problems,
) {
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        problems.add(&format!("{at}.name"), "required");
        return;
    };
    let managed = routing
        .managed_routes
        .iter()
        .flatten()
        .any(|route| route.name.as_deref() == Some(name));
    if !managed {
        problems.add(
            &format!("{at}.name"),
            format!(
                "route {name:?} is not listed in spec.strategy.canary.trafficRouting.managedRoutes"
            ),
        );
    }
}

fn check_string_match(value: &StringMatch, at: &str, problems: &mut Problems) {
    let set = [&value.exact, &value.prefix, &value.regex]
        .into_iter()
        .filter(|v| !is_blank(v))
        .count();
    if set != 1 {
        problems.add(
            at,
            format!("must set exactly one of exact, prefix or regex, got {set}"),
        );
    }
}

fn is_blank(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(str::is_empty)
}

fn has_plugins(routing: &RolloutTrafficRouting) -> bool {
    routing.plugins.as_ref().is_some_and(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::test_support::*;

    fn steps(list: Value) -> Vec<String> {
        canary_problems(json!({ "steps": list }))
    }

    fn routed_steps(list: Value) -> Vec<String> {
        canary_problems(with_istio(json!({ "steps": list })))
    }

    #[test]
    fn each_step_has_an_action() {
        assert_problems(
            steps(json!([{}])),
            &[
                "spec.strategy.canary.steps[0]: must set one of setWeight, pause, experiment, analysis, setCanaryScale, setHeaderRoute, setMirrorRoute, plugin",
            ],
        );
        assert_problems(
            steps(json!([{"setWeight": 10, "pause": {"duration": 10}}])),
            &[
                "spec.strategy.canary.steps[0]: must set only one of setWeight, pause, experiment, analysis, plugin, but sets setWeight, pause",
            ],
        );
        // Route and scale changes may ride along with another action.
        assert_problems(
            routed_steps(
                json!([{"pause": {}, "setCanaryScale": {"replicas": 1}, "setHeaderRoute": {"name": "header"}}]),
            ),
            &[],
        );
    }

    #[test]
    fn set_weight_within_max_traffic_weight() {
        assert_problems(steps(json!([{"setWeight": 0}, {"setWeight": 100}])), &[]);
        assert_problems(
            steps(json!([{"setWeight": 120}, {"setWeight": -1}])),
            &[
                "spec.strategy.canary.steps[0].setWeight: must be between 0 and 100, got 120",
                "spec.strategy.canary.steps[1].setWeight: must be between 0 and 100, got -1",
            ],
        );
        let nginx = json!({
            "canaryService": "c", "stableService": "s",
            "trafficRouting": {"nginx": {"stableIngress": "web"}, "maxTrafficWeight": 1000},
        });
        let mut ok = nginx.clone();
        ok["steps"] = json!([{"setWeight": 500}]);
        assert_problems(canary_problems(ok), &[]);
        let mut over = nginx;
        over["steps"] = json!([{"setWeight": 1001}]);
        assert_problems(
            canary_problems(over),
            &["spec.strategy.canary.steps[0].setWeight: must be between 0 and 1000, got 1001"],
        );
    }

    #[test]
    fn pause_durations_parse() {
        assert_problems(
            steps(
                json!([{"pause": {"duration": 10}}, {"pause": {"duration": "10"}}, {"pause": {"duration": "1h30m"}}]),
            ),
            &[],
        );
        assert_problems(
            steps(json!([{"pause": {"duration": "soon"}}, {"pause": {"duration": -5}}])),
            &[
                "spec.strategy.canary.steps[0].pause.duration: must be whole seconds or a duration such as 30s or 1h: invalid duration \"soon\"",
                "spec.strategy.canary.steps[1].pause.duration: must be whole seconds or a duration such as 30s or 1h: negative duration \"-5\"",
            ],
        );
    }

    #[test]
    fn analysis_steps_need_templates_and_valid_args() {
        assert_problems(
            steps(json!([{"analysis": {
                "templates": [{"templateName": "rate"}],
                "args": [
                    {"name": "svc", "value": "web"},
                    {"name": "hash", "valueFrom": {"podTemplateHashValue": "Latest"}},
                    {"name": "app", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "image", "valueFrom": {"fieldRef": {"fieldPath": "spec.template.spec.containers[0].image"}}}
                ]
            }}])),
            &[],
        );
        assert_problems(
            steps(json!([{"analysis": {
                "templates": [],
                "args": [
                    {"name": "a", "value": "x", "valueFrom": {"podTemplateHashValue": "Newest"}},
                    {"name": "a"},
                    {"name": "b", "valueFrom": {"fieldRef": {"fieldPath": "metadata.ownerReferences"}}},
                    {"valueFrom": {}}
                ],
                "dryRun": [{}],
                "measurementRetention": [{"metricName": "m", "limit": -1}]
            }}])),
            &[
                "spec.strategy.canary.steps[0].analysis.templates: must list at least one template",
                "spec.strategy.canary.steps[0].analysis.args[0]: set only one of value and valueFrom",
                "spec.strategy.canary.steps[0].analysis.args[0].valueFrom.podTemplateHashValue: must be Stable or Latest, got \"Newest\"",
                "spec.strategy.canary.steps[0].analysis.args[1].name: duplicate argument \"a\"",
                "spec.strategy.canary.steps[0].analysis.args[2].valueFrom.fieldRef.fieldPath: \"metadata.ownerReferences\" is not a metadata field an argument can refer to (name, namespace, uid, labels['key'], annotations['key'])",
                "spec.strategy.canary.steps[0].analysis.args[3].name: required",
                "spec.strategy.canary.steps[0].analysis.args[3].valueFrom: must set exactly one of podTemplateHashValue or fieldRef",
                "spec.strategy.canary.steps[0].analysis.dryRun[0].metricName: required",
                "spec.strategy.canary.steps[0].analysis.measurementRetention[0].limit: must not be negative, got -1",
            ],
        );
    }

    #[test]
    fn experiment_steps() {
        assert_problems(
            steps(json!([{"experiment": {
                "duration": "5m",
                "templates": [{"name": "baseline", "specRef": "stable"}, {"name": "canary", "specRef": "canary", "replicas": 1}],
                "analyses": [{"name": "compare", "templateName": "rate"}]
            }}])),
            &[],
        );
        assert_problems(
            steps(json!([{"experiment": {
                "duration": "5 minutes",
                "templates": [{"name": "a", "specRef": "previous"}, {"name": "a", "weight": 10, "replicas": -1}, {"specRef": "canary"}],
                "analyses": [{"name": "x"}, {"name": "x", "templateName": "t"}],
                "scaleDownDelaySeconds": -1
            }}])),
            &[
                "spec.strategy.canary.steps[0].experiment.templates[0].specRef: must be stable or canary, got \"previous\"",
                "spec.strategy.canary.steps[0].experiment.templates[1].name: duplicate template name \"a\"",
                "spec.strategy.canary.steps[0].experiment.templates[1].specRef: required: stable or canary",
                "spec.strategy.canary.steps[0].experiment.templates[1].replicas: must not be negative, got -1",
                "spec.strategy.canary.steps[0].experiment.templates[1].weight: needs trafficRouting with the alb, smi or istio router",
                "spec.strategy.canary.steps[0].experiment.templates[2].name: required",
                "spec.strategy.canary.steps[0].experiment.duration: unknown unit \" minutes\" in duration \"5 minutes\"",
                "spec.strategy.canary.steps[0].experiment.analyses[0].templateName: required",
                "spec.strategy.canary.steps[0].experiment.analyses[1].name: duplicate analysis name \"x\"",
                "spec.strategy.canary.steps[0].experiment.scaleDownDelaySeconds: must not be negative, got -1",
            ],
        );
        assert_problems(
            steps(json!([{"experiment": {"templates": []}}])),
            &[
                "spec.strategy.canary.steps[0].experiment.templates: must list at least one template",
            ],
        );
        assert_problems(
            routed_steps(
                json!([{"experiment": {"templates": [{"name": "a", "specRef": "canary", "weight": 10}]}}]),
            ),
            &[],
        );
    }

    #[test]
    fn set_canary_scale_needs_traffic_routing() {
        assert_problems(
            routed_steps(
                json!([{"setCanaryScale": {"weight": 20}}, {"setCanaryScale": {"matchTrafficWeight": true}}]),
            ),
            &[],
        );
        assert_problems(
            steps(json!([{"setCanaryScale": {"replicas": 2}}])),
            &[
                "spec.strategy.canary.steps[0].setCanaryScale: needs spec.strategy.canary.trafficRouting",
            ],
        );
        assert_problems(
            routed_steps(
                json!([{"setCanaryScale": {}}, {"setCanaryScale": {"weight": 101, "replicas": -1}}]),
            ),
            &[
                "spec.strategy.canary.steps[0].setCanaryScale: must set one of weight, replicas or matchTrafficWeight",
                "spec.strategy.canary.steps[1].setCanaryScale.weight: must be between 0 and 100, got 101",
                "spec.strategy.canary.steps[1].setCanaryScale.replicas: must not be negative, got -1",
            ],
        );
    }

    #[test]
    fn header_routes() {
        assert_problems(
            routed_steps(json!([{"setHeaderRoute": {"name": "header", "match": [
                {"headerName": "user", "headerValue": {"prefix": "test-"}}
            ]}}])),
            &[],
        );
        assert_problems(
            routed_steps(json!([{"setHeaderRoute": {"name": "other", "match": [
                {"headerValue": {"exact": "a", "regex": "b"}}, {"headerName": "x"}
            ]}}])),
            &[
                "spec.strategy.canary.steps[0].setHeaderRoute.name: route \"other\" is not listed in spec.strategy.canary.trafficRouting.managedRoutes",
                "spec.strategy.canary.steps[0].setHeaderRoute.match[0].headerName: required",
                "spec.strategy.canary.steps[0].setHeaderRoute.match[0].headerValue: must set exactly one of exact, prefix or regex, got 2",
                "spec.strategy.canary.steps[0].setHeaderRoute.match[1].headerValue: required: one of exact, prefix or regex",
            ],
        );
        assert_problems(
            steps(json!([{"setHeaderRoute": {"name": "header"}}])),
            &[
                "spec.strategy.canary.steps[0].setHeaderRoute: needs trafficRouting with the istio, alb or apisix router or router plugins",
            ],
        );
        let alb = json!({
            "canaryService": "c", "stableService": "s",
            "trafficRouting": {"alb": {"ingress": "web", "servicePort": 80}, "managedRoutes": [{"name": "h"}]},
            "steps": [{"setHeaderRoute": {"name": "h", "match": [
                {"headerName": "a", "headerValue": {"exact": "1"}},
                {"headerName": "b", "headerValue": {"prefix": "1"}}
            ]}}]
        });
        assert_problems(
            canary_problems(alb),
            &[
                "spec.strategy.canary.steps[0].setHeaderRoute.match[1].headerValue: the alb router only matches headers with exact",
            ],
        );
    }

    #[test]
    fn mirror_routes() {
        assert_problems(
            routed_steps(
                json!([{"setMirrorRoute": {"name": "mirror", "percentage": 50, "match": [
                    {"method": {"exact": "GET"}, "path": {"prefix": "/"}, "headers": {"x": {"regex": ".*"}}}
                ]}}]),
            ),
            &[],
        );
        assert_problems(
            routed_steps(json!([{"setMirrorRoute": {"percentage": 150, "match": [{"path": {}}]}}])),
            &[
                "spec.strategy.canary.steps[0].setMirrorRoute.name: required",
                "spec.strategy.canary.steps[0].setMirrorRoute.percentage: must be between 0 and 100, got 150",
                "spec.strategy.canary.steps[0].setMirrorRoute.match[0].path: must set exactly one of exact, prefix or regex, got 0",
            ],
        );
        assert_problems(
            canary_problems(json!({
                "canaryService": "c", "stableService": "s",
                "trafficRouting": {"nginx": {"stableIngress": "web"}},
                "steps": [{"setMirrorRoute": {"name": "m"}}]
            })),
            &[
                "spec.strategy.canary.steps[0].setMirrorRoute: needs trafficRouting with the istio router or router plugins",
            ],
        );
    }

    #[test]
    fn plugin_steps_are_named() {
        assert_problems(
            steps(json!([{"plugin": {"name": "org/step", "config": {}}}])),
            &[],
        );
        assert_problems(
            steps(json!([{"plugin": {"config": {}}}])),
            &["spec.strategy.canary.steps[0].plugin.name: required"],
        );
    }
}
