use serde_json::{Value, json};

use super::super::test_support::*;

fn steps(list: Value) -> Vec<String> {
    canary_problems(json!({ "steps": list }))
}

fn routed_steps(list: Value) -> Vec<String> {
    canary_problems(with_istio(json!({ "steps": list })))
}

const INVALID_STEP: &str = "Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause";

#[test]
fn each_step_has_an_action() {
    assert_problems(
        steps(json!([{}])),
        &[&format!(
            "spec.strategy.steps[0]: Invalid value: \"step.Experiment: true step.Pause: true step.SetWeight: true step.Analysis: true step.SetCanaryScale: true step.SetHeaderRoute: true step.SetMirrorRoute: true step.Plugin: true\": {INVALID_STEP}"
        )],
    );
    assert_problems(
        steps(json!([{"setWeight": 10, "pause": {"duration": 10}}])),
        &[&format!(
            "spec.strategy.steps[0]: Invalid value: \"step.Experiment: false step.Pause: true step.SetWeight: true step.Analysis: false\": {INVALID_STEP}"
        )],
    );
    assert_problems(
        steps(json!([{"setWeight": 10, "plugin": {"name": "org/step"}}])),
        &[
            "spec.strategy.canary.steps[0]: Invalid value: \"plugin, setWeight\": a plugin step may not also set experiment, pause, setWeight or analysis",
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
            "spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100",
            "spec.strategy.steps[1].setWeight: Invalid value: -1: SetWeight needs to be between 0 and 100",
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
        &[
            "spec.strategy.steps[0].setWeight: Invalid value: 1001: SetWeight needs to be between 0 and 1000",
        ],
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
    // Argo counts what it cannot read as -1 seconds.
    assert_problems(
        steps(json!([
            {"pause": {"duration": "soon"}}, {"pause": {"duration": -5}},
            {"pause": {"duration": "-90s"}}, {"pause": {"duration": "-0.5s"}}
        ])),
        &[
            "spec.strategy.steps[0].pause.duration: Invalid value: -1: Duration needs to be greater than 0",
            "spec.strategy.steps[1].pause.duration: Invalid value: -5: Duration needs to be greater than 0",
            "spec.strategy.steps[2].pause.duration: Invalid value: -90: Duration needs to be greater than 0",
            "spec.strategy.canary.steps[3].pause.duration: Invalid value: \"-0.5s\": must not be negative",
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
            "spec.strategy.steps[0].analyses: Invalid value: [{\"name\":\"a\",\"value\":\"x\",\"valueFrom\":{\"podTemplateHashValue\":\"Newest\"}},{\"name\":\"a\"},{\"name\":\"b\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.ownerReferences\"}}},{\"name\":\"\",\"valueFrom\":{}}]: Analyses arguments must refer to valid object metadata supported by downwardAPI",
            "spec.strategy.canary.steps[0].analysis.templates: Required value: at least one template is required",
            "spec.strategy.canary.steps[0].analysis.args[0].valueFrom: Forbidden: may not be specified when `value` is set",
            "spec.strategy.canary.steps[0].analysis.args[0].valueFrom.podTemplateHashValue: Unsupported value: \"Newest\": supported values: \"Stable\", \"Latest\"",
            "spec.strategy.canary.steps[0].analysis.args[1].name: Duplicate value: \"a\"",
            "spec.strategy.canary.steps[0].analysis.args[3].name: Required value",
            "spec.strategy.canary.steps[0].analysis.args[3].valueFrom: Invalid value: {}: must set exactly one of podTemplateHashValue or fieldRef",
            "spec.strategy.canary.steps[0].analysis.dryRun[0].metricName: Required value",
            "spec.strategy.canary.steps[0].analysis.measurementRetention[0].limit: Invalid value: -1: must be greater than or equal to 0",
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
            "spec.strategy.steps[0].experiment.templates[1].weight: Invalid value: 10: Experiment template weight cannot be set unless TrafficRouting is enabled",
            "spec.strategy.canary.steps[0].experiment.templates[0].specRef: Unsupported value: \"previous\": supported values: \"canary\", \"stable\"",
            "spec.strategy.canary.steps[0].experiment.templates[1].name: Duplicate value: \"a\"",
            "spec.strategy.canary.steps[0].experiment.templates[1].specRef: Required value",
            "spec.strategy.canary.steps[0].experiment.templates[1].replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.strategy.canary.steps[0].experiment.templates[2].name: Required value",
            "spec.strategy.canary.steps[0].experiment.duration: Invalid value: \"5 minutes\": unknown unit \" minutes\" in duration \"5 minutes\"",
            "spec.strategy.canary.steps[0].experiment.analyses[0].templateName: Required value",
            "spec.strategy.canary.steps[0].experiment.analyses[1].name: Duplicate value: \"x\"",
            "spec.strategy.canary.steps[0].experiment.scaleDownDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
        ],
    );
    assert_problems(
        steps(json!([{"experiment": {"templates": []}}])),
        &[
            "spec.strategy.canary.steps[0].experiment.templates: Required value: at least one template is required",
        ],
    );
    assert_problems(
        routed_steps(
            json!([{"experiment": {"templates": [{"name": "a", "specRef": "canary", "weight": 10}]}}]),
        ),
        &[],
    );
    assert_problems(
        canary_problems(json!({
            "canaryService": "c", "stableService": "s",
            "trafficRouting": {"nginx": {"stableIngress": "web"}},
            "steps": [{"experiment": {"templates": [{"name": "a", "specRef": "canary", "weight": 101}]}}]
        })),
        &[
            "spec.strategy.steps[0].experiment.templates[0].weight: Invalid value: 101: Experiment template weight is only available for TrafficRouting with SMI, ALB, Istio and Plugins at this time",
            "spec.strategy.canary.steps[0].experiment.templates[0].weight: Invalid value: 101: must be between 0 and 100",
        ],
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
            "spec.strategy.trafficRouting: Required value: SetCanaryScale requires TrafficRouting to be set",
        ],
    );
    assert_problems(
        routed_steps(
            json!([{"setCanaryScale": {}}, {"setCanaryScale": {"weight": 101, "replicas": -1}}]),
        ),
        &[
            "spec.strategy.canary.steps[0].setCanaryScale: Required value: one of weight, replicas or matchTrafficWeight is required",
            "spec.strategy.canary.steps[1].setCanaryScale.weight: Invalid value: 101: must be between 0 and 100",
            "spec.strategy.canary.steps[1].setCanaryScale.replicas: Invalid value: -1: must be greater than or equal to 0",
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
            "spec.strategy.steps[0].setHeaderRoute.match[0]: Invalid value: {\"exact\":\"a\",\"regex\":\"b\"}: StringMatch match value must have exactly one of the following: exact, regex, prefix",
            "spec.strategy.steps[0].setHeaderRoute.match[1]: Invalid value: null: StringMatch value missed, match value must have one of the following: exact, regex, prefix",
            "spec.strategy.steps[0].setHeaderRoute: Invalid value: \"other\": Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes",
            "spec.strategy.canary.steps[0].setHeaderRoute.match[0].headerName: Required value",
        ],
    );
    assert_problems(
        steps(json!([{"setHeaderRoute": {"name": "header"}}])),
        &[
            "spec.strategy.steps[0].setHeaderRoute: Invalid value: {\"name\":\"header\"}: SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix",
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
            "spec.strategy.steps[0].setHeaderRoute.match[1]: Invalid value: {\"prefix\":\"1\"}: SetHeaderRoute match value invalid. ALB supports 'exact' value only",
        ],
    );
    let nginx = |annotations: Value, matches: Value| {
        json!({
            "canaryService": "c", "stableService": "s",
            "trafficRouting": {
                "nginx": {"stableIngress": "web", "additionalIngressAnnotations": annotations},
                "managedRoutes": [{"name": "h"}]
            },
            "steps": [{"setHeaderRoute": {"name": "h", "match": matches}}, {"setHeaderRoute": {"name": "h"}}]
        })
    };
    let one = json!([{"headerName": "a", "headerValue": {"regex": "1|2"}}]);
    // Argo refuses the step for NGINX; Sluice runs what ingress-nginx can hold.
    assert_problems(canary_problems(nginx(Value::Null, one.clone())), &[]);
    assert_problems(
        canary_problems(nginx(
            Value::Null,
            json!([
                {"headerName": "a", "headerValue": {"exact": "1"}},
                {"headerName": "b", "headerValue": {"exact": "2"}}
            ]),
        )),
        &[
            "spec.strategy.steps[0].setHeaderRoute.match: Invalid value: [{\"headerName\":\"a\",\"headerValue\":{\"exact\":\"1\"}},{\"headerName\":\"b\",\"headerValue\":{\"exact\":\"2\"}}]: NGINX routes by one header: setHeaderRoute needs exactly one match",
        ],
    );
    assert_problems(
        canary_problems(nginx(json!({"canary-by-header": "x"}), one)),
        &[
            "spec.strategy.steps[0].setHeaderRoute: Invalid value: {\"name\":\"h\",\"match\":[{\"headerName\":\"a\",\"headerValue\":{\"regex\":\"1|2\"}}]}: NGINX: additionalIngressAnnotations already set canary-by-header, which setHeaderRoute would replace",
        ],
    );
    let mut unmanaged = with_istio(json!({"steps": [{"setHeaderRoute": {"name": "header"}}]}));
    unmanaged["trafficRouting"]["managedRoutes"] = Value::Null;
    assert_problems(
        canary_problems(unmanaged),
        &[
            "spec.strategy.trafficRouting.managedRoutes: Required value: Rollout has missing field 'spec.strategy.canary.trafficRouting.managedRoutes'",
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
        routed_steps(json!([{"setMirrorRoute": {"percentage": 150, "match": [
            {"path": {}, "headers": {"x-user": {"exact": "a", "prefix": "b"}}}
        ]}}])),
        &[
            "spec.strategy.steps[0].setMirrorRoute.match[0]: Invalid value: {}: StringMatch value missed, match value must have one of the following: exact, regex, prefix",
            "spec.strategy.steps[0].setMirrorRoute: Invalid value: \"\": Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes",
            "spec.strategy.canary.steps[0].setMirrorRoute.match[0].headers[x-user]: Invalid value: {\"exact\":\"a\",\"prefix\":\"b\"}: StringMatch match value must have exactly one of the following: exact, regex, prefix",
            "spec.strategy.canary.steps[0].setMirrorRoute.percentage: Invalid value: 150: must be between 0 and 100",
        ],
    );
    assert_problems(
        canary_problems(json!({
            "canaryService": "c", "stableService": "s",
            "trafficRouting": {"nginx": {"stableIngress": "web"}, "managedRoutes": [{"name": "m"}]},
            "steps": [{"setMirrorRoute": {"name": "m"}}]
        })),
        &[
            "spec.strategy.steps[0].setMirrorRoute: Invalid value: {\"name\":\"m\"}: SetMirrorRoute requires TrafficRouting, supports Istio and Plugins",
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
        &["spec.strategy.canary.steps[0].plugin.name: Required value"],
    );
}
