//! `spec.strategy.canary.steps[]`: one action per step, each with its own constraints. Argo
//! names steps from `spec.strategy` (`spec.strategy.steps[2].setWeight`); Sluice's own checks
//! use the real path.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::non_negative;
use super::traffic::has_plugins;
use super::{BadValue, FieldError, Problems, analysis};
use crate::common::AnalysisRunArgument;
use crate::duration::parse_go_duration;
use crate::rollout::{
    CanaryStep, CanaryStrategy, DEFAULT_MAX_TRAFFIC_WEIGHT, NginxTrafficRouting, ReplicaSetSpecRef,
    RolloutExperimentStep, RolloutPause, RolloutTrafficRouting, SetCanaryScale, SetHeaderRoute,
    SetMirrorRoute, StringMatch,
};

/// Argo's detail for a step with no action, or with more than one of the actions it counts.
const INVALID_STEP: &str = "Step must have one of the following set: experiment, setWeight, setCanaryScale, plugin or pause";
const STRING_MATCH_MISSED: &str =
    "StringMatch value missed, match value must have one of the following: exact, regex, prefix";
const STRING_MATCH_MULTIPLE: &str =
    "StringMatch match value must have exactly one of the following: exact, regex, prefix";
const ROUTE_NOT_MANAGED: &str =
    "Steps define a route that does not exist in spec.strategy.canary.trafficRouting.managedRoutes";

pub(super) fn check(steps: &[CanaryStep], canary: &CanaryStrategy, problems: &mut Problems) {
    let routing = canary.traffic_routing.as_ref();
    let max_weight = routing.map_or(DEFAULT_MAX_TRAFFIC_WEIGHT, |r| r.max_traffic_weight());
    for (i, step) in steps.iter().enumerate() {
        let at = format!("spec.strategy.steps[{i}]");
        let real = format!("spec.strategy.canary.steps[{i}]");
        check_actions(step, &at, &real, problems);
        if let Some(weight) = step.set_weight
            && !(0..=max_weight).contains(&weight)
        {
            problems.argo(FieldError::invalid(
                &format!("{at}.setWeight"),
                weight,
                &format!("SetWeight needs to be between 0 and {max_weight}"),
            ));
        }
        if let Some(pause) = &step.pause {
            check_pause(pause, &at, &real, problems);
        }
        if let Some(scale) = &step.set_canary_scale {
            if routing.is_none() && !problems.node_counts {
                problems.argo(FieldError::required(
                    "spec.strategy.trafficRouting",
                    "SetCanaryScale requires TrafficRouting to be set",
                ));
            }
            check_canary_scale(scale, &format!("{real}.setCanaryScale"), problems);
        }
        if let Some(route) = &step.set_header_route {
            check_header_route(route, routing, &at, &real, problems);
        }
        if let Some(route) = &step.set_mirror_route {
            check_mirror_route(route, routing, &at, &real, problems);
        }
        check_managed_route_names(step, routing, &at, problems);
        if let Some(experiment) = &step.experiment {
            check_experiment(experiment, routing, &at, &real, problems);
        }
        if let Some(step_analysis) = &step.analysis {
            analysis::check_rollout_analysis(step_analysis, &format!("{real}.analysis"), problems);
        }
        check_analysis_arguments(step, &at, problems);
        if let Some(plugin) = &step.plugin
            && plugin.name.as_deref().is_none_or(str::is_empty)
        {
            problems.sluice(FieldError::required(&format!("{real}.plugin.name"), ""));
        }
    }
}

/// A step needs an action. Argo allows at most one of setWeight, pause, experiment and
/// analysis; Sluice also keeps a plugin step to itself, as the plugin decides when the step
/// completes. setCanaryScale, setHeaderRoute and setMirrorRoute may accompany any of them, as
/// Argo's own examples do.
fn check_actions(step: &CanaryStep, at: &str, real: &str, problems: &mut Problems) {
    if step.action_count() == 0 {
        problems.argo(FieldError::invalid(
            at,
            "step.Experiment: true step.Pause: true step.SetWeight: true step.Analysis: true step.SetCanaryScale: true step.SetHeaderRoute: true step.SetMirrorRoute: true step.Plugin: true",
            INVALID_STEP,
        ));
        return;
    }
    let completing = [
        (step.experiment.is_some(), "experiment"),
        (step.pause.is_some(), "pause"),
        (step.set_weight.is_some(), "setWeight"),
        (step.analysis.is_some(), "analysis"),
    ];
    let count = completing.iter().filter(|(set, _)| *set).count();
    if count > 1 {
        let value = format!(
            "step.Experiment: {} step.Pause: {} step.SetWeight: {} step.Analysis: {}",
            step.experiment.is_some(),
            step.pause.is_some(),
            step.set_weight.is_some(),
            step.analysis.is_some()
        );
        problems.argo(FieldError::invalid(at, value, INVALID_STEP));
    } else if count == 1 && step.plugin.is_some() {
        let other = completing
            .iter()
            .find_map(|(set, name)| set.then_some(*name))
            .unwrap_or_default();
        problems.sluice(FieldError::invalid(
            real,
            format!("plugin, {other}"),
            "a plugin step may not also set experiment, pause, setWeight or analysis",
        ));
    }
}

/// Argo reads the duration as whole seconds and refuses a negative count; a string that is
/// neither an integer nor a Go duration counts as -1.
fn check_pause(pause: &RolloutPause, at: &str, real: &str, problems: &mut Problems) {
    let Some(duration) = &pause.duration else {
        return;
    };
    let seconds = argo_pause_seconds(duration);
    if seconds < 0 {
        problems.argo(FieldError::invalid(
            &format!("{at}.pause.duration"),
            seconds,
            "Duration needs to be greater than 0",
        ));
    } else if pause.duration().is_some_and(|d| d.is_err()) {
        // A negative fraction of a second, which Argo rounds to zero.
        problems.sluice(FieldError::invalid(
            &format!("{real}.pause.duration"),
            BadValue::json(duration),
            "must not be negative",
        ));
    }
}

fn argo_pause_seconds(duration: &IntOrString) -> i64 {
    match duration {
        IntOrString::Int(seconds) => i64::from(*seconds),
        IntOrString::String(text) => match text.parse::<i32>() {
            Ok(seconds) => i64::from(seconds),
            Err(_) => crate::duration::parse_go_duration_nanos(text)
                .map_or(-1, |nanos| nanos / 1_000_000_000),
        },
    }
}

fn check_canary_scale(scale: &SetCanaryScale, at: &str, problems: &mut Problems) {
    if scale.weight.is_none() && scale.replicas.is_none() && scale.match_traffic_weight.is_none() {
        problems.sluice(FieldError::required(
            at,
            "one of weight, replicas or matchTrafficWeight is required",
        ));
    }
    if let Some(weight) = scale.weight
        && !(0..=100).contains(&weight)
    {
        problems.sluice(FieldError::invalid(
            &format!("{at}.weight"),
            weight,
            "must be between 0 and 100",
        ));
    }
    non_negative(problems, &format!("{at}.replicas"), scale.replicas);
}

fn check_header_route(
    route: &SetHeaderRoute,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    real: &str,
    problems: &mut Problems,
) {
    let at = format!("{at}.setHeaderRoute");
    // NGINX is Sluice's addition (Argo's #2830): Argo refuses the step there, with the message
    // below, so accepting it is never stricter than Argo.
    let supported = routing.filter(|r| {
        r.istio.is_some()
            || r.alb.is_some()
            || r.apisix.is_some()
            || r.nginx.is_some()
            || has_plugins(r)
    });
    let Some(routing) = supported else {
        problems.argo(FieldError::invalid(
            &at,
            BadValue::Json(go_header_route(route)),
            "SetHeaderRoute requires TrafficRouting, supports Istio and ALB and Apisix",
        ));
        return;
    };
    if let Some(nginx) = &routing.nginx {
        check_nginx_header_route(route, nginx, &at, problems);
    }
    for (j, condition) in route.match_.iter().flatten().enumerate() {
        let m_at = format!("{at}.match[{j}]");
        let value = condition.header_value.as_ref();
        if routing.alb.is_some() {
            match value {
                None => missed_string_match(&m_at, problems),
                Some(v) if is_blank(&v.exact) || !is_blank(&v.prefix) || !is_blank(&v.regex) => {
                    problems.argo(FieldError::invalid(
                        &m_at,
                        BadValue::json(v),
                        "SetHeaderRoute match value invalid. ALB supports 'exact' value only",
                    ))
                }
                Some(_) => {}
            }
        } else {
            check_string_match(value, &m_at, problems);
        }
        if condition.header_name.as_deref().is_none_or(str::is_empty) {
            problems.sluice(FieldError::required(
                &format!("{real}.setHeaderRoute.match[{j}].headerName"),
                "",
            ));
        }
    }
}

/// What an NGINX canary Ingress can hold: one header (ingress-nginx reads one per Ingress), and
/// no header of the user's own in `additionalIngressAnnotations`, which every weight change
/// writes back over the step's.
fn check_nginx_header_route(
    route: &SetHeaderRoute,
    nginx: &NginxTrafficRouting,
    at: &str,
    problems: &mut Problems,
) {
    let matches = route.match_.as_deref().unwrap_or_default();
    if matches.len() > 1 || route.match_.as_ref().is_some_and(Vec::is_empty) {
        problems.sluice(FieldError::invalid(
            &format!("{at}.match"),
            BadValue::json(&route.match_),
            "NGINX routes by one header: setHeaderRoute needs exactly one match",
        ));
    }
    let own_header = nginx
        .additional_ingress_annotations
        .iter()
        .flatten()
        .any(|(key, _)| key.starts_with("canary-by-header"));
    if own_header && !matches.is_empty() {
        problems.sluice(FieldError::invalid(
            at,
            BadValue::Json(go_header_route(route)),
            "NGINX: additionalIngressAnnotations already set canary-by-header, which setHeaderRoute would replace",
        ));
    }
}

fn check_mirror_route(
    route: &SetMirrorRoute,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    real: &str,
    problems: &mut Problems,
) {
    let at = format!("{at}.setMirrorRoute");
    if !routing.is_some_and(|r| r.istio.is_some() || has_plugins(r)) {
        problems.argo(FieldError::invalid(
            &at,
            BadValue::Json(go_mirror_route(route)),
            "SetMirrorRoute requires TrafficRouting, supports Istio and Plugins",
        ));
    }
    let real = format!("{real}.setMirrorRoute");
    for (j, condition) in route.match_.iter().flatten().enumerate() {
        let m_at = format!("{at}.match[{j}]");
        if let Some(method) = &condition.method {
            check_string_match(Some(method), &m_at, problems);
        }
        if let Some(path) = &condition.path {
            check_string_match(Some(path), &m_at, problems);
        }
        for (name, value) in condition.headers.iter().flatten() {
            if match_count(value) != 1 {
                problems.sluice(FieldError::invalid(
                    &format!("{real}.match[{j}].headers[{name}]"),
                    BadValue::json(value),
                    STRING_MATCH_MULTIPLE,
                ));
            }
        }
    }
    if let Some(percentage) = route.percentage
        && !(0..=100).contains(&percentage)
    {
        problems.sluice(FieldError::invalid(
            &format!("{real}.percentage"),
            percentage,
            "must be between 0 and 100",
        ));
    }
}

/// A `setHeaderRoute` as Go encodes Argo's type: `name` and `match` only when set, but each
/// match's `headerName` and `headerValue` always (`""` and `null` when unset).
fn go_header_route(route: &SetHeaderRoute) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    if let Some(name) = route.name.as_deref().filter(|n| !n.is_empty()) {
        out.insert("name".into(), name.into());
    }
    if let Some(matches) = route.match_.as_ref().filter(|m| !m.is_empty()) {
        let matches = matches
            .iter()
            .map(|m| {
                serde_json::json!({
                    "headerName": m.header_name.as_deref().unwrap_or_default(),
                    "headerValue": m.header_value.as_ref().map(go_string_match),
                })
            })
            .collect::<Vec<_>>();
        out.insert("match".into(), matches.into());
    }
    serde_json::Value::Object(out)
}

/// A `setMirrorRoute` as Go encodes Argo's type: `name` always, `match` and `percentage`
/// only when set.
fn go_mirror_route(route: &SetMirrorRoute) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert(
        "name".into(),
        route.name.as_deref().unwrap_or_default().into(),
    );
    if let Some(matches) = route.match_.as_ref().filter(|m| !m.is_empty()) {
        let value = serde_json::to_value(matches).unwrap_or_default();
        out.insert("match".into(), super::omit_empty(value));
    }
    if let Some(percentage) = route.percentage {
        out.insert("percentage".into(), percentage.into());
    }
    serde_json::Value::Object(out)
}

/// A string match as Go encodes it: each of its fields only when not empty.
fn go_string_match(m: &StringMatch) -> serde_json::Value {
    super::omit_empty(serde_json::to_value(m).unwrap_or_default())
}

/// Header and mirror steps act on a route the controller manages, declared up front.
fn check_managed_route_names(
    step: &CanaryStep,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    problems: &mut Problems,
) {
    let Some(routing) = routing else {
        return;
    };
    let routes = [
        (
            "setHeaderRoute",
            step.set_header_route.as_ref().map(|r| &r.name),
        ),
        (
            "setMirrorRoute",
            step.set_mirror_route.as_ref().map(|r| &r.name),
        ),
    ];
    if routes.iter().all(|(_, name)| name.is_none()) {
        return;
    }
    let Some(managed) = &routing.managed_routes else {
        problems.argo(FieldError::required(
            "spec.strategy.trafficRouting.managedRoutes",
            "Rollout has missing field 'spec.strategy.canary.trafficRouting.managedRoutes'",
        ));
        return;
    };
    for (field, name) in routes {
        let Some(name) = name else {
            continue;
        };
        let name = name.as_deref().unwrap_or_default();
        if !managed
            .iter()
            .any(|route| route.name.as_deref() == Some(name))
        {
            problems.argo(FieldError::invalid(
                &format!("{at}.{field}"),
                name,
                ROUTE_NOT_MANAGED,
            ));
        }
    }
}

fn check_experiment(
    experiment: &RolloutExperimentStep,
    routing: Option<&RolloutTrafficRouting>,
    at: &str,
    real: &str,
    problems: &mut Problems,
) {
    let real = format!("{real}.experiment");
    let templates = experiment.templates.as_deref().unwrap_or_default();
    for (k, template) in templates.iter().enumerate() {
        let Some(weight) = template.weight else {
            continue;
        };
        let weight_at = format!("{at}.experiment.templates[{k}].weight");
        match routing {
            None => problems.argo(FieldError::invalid(
                &weight_at,
                weight,
                "Experiment template weight cannot be set unless TrafficRouting is enabled",
            )),
            Some(r) if r.alb.is_none() && r.smi.is_none() && r.istio.is_none() && !has_plugins(r) => {
                problems.argo(FieldError::invalid(
                    &weight_at,
                    weight,
                    "Experiment template weight is only available for TrafficRouting with SMI, ALB, Istio and Plugins at this time",
                ))
            }
            Some(_) => {}
        }
    }

    if templates.is_empty() {
        problems.sluice(FieldError::required(
            &format!("{real}.templates"),
            "at least one template is required",
        ));
    }
    let mut names = BTreeSet::new();
    for (k, template) in templates.iter().enumerate() {
        let t_at = format!("{real}.templates[{k}]");
        match template.name.as_deref() {
            None | Some("") => problems.sluice(FieldError::required(&format!("{t_at}.name"), "")),
            Some(name) if !names.insert(name) => {
                problems.sluice(FieldError::duplicate(&format!("{t_at}.name"), name))
            }
            Some(_) => {}
        }
        match &template.spec_ref {
            None => problems.sluice(FieldError::required(&format!("{t_at}.specRef"), "")),
            Some(ReplicaSetSpecRef::Other(other)) => problems.sluice(FieldError::not_supported(
                &format!("{t_at}.specRef"),
                other.as_str(),
                &["canary", "stable"],
            )),
            Some(_) => {}
        }
        non_negative(problems, &format!("{t_at}.replicas"), template.replicas);
        if let Some(weight) = template.weight
            && !(0..=100).contains(&weight)
        {
            problems.sluice(FieldError::invalid(
                &format!("{t_at}.weight"),
                weight,
                "must be between 0 and 100",
            ));
        }
    }
    if let Some(duration) = &experiment.duration
        && let Err(e) = parse_go_duration(duration)
    {
        problems.sluice(FieldError::invalid(
            &format!("{real}.duration"),
            duration.as_str(),
            &e.to_string(),
        ));
    }
    let mut analysis_names = BTreeSet::new();
    for (k, analysis_ref) in experiment.analyses.iter().flatten().enumerate() {
        let a_at = format!("{real}.analyses[{k}]");
        match analysis_ref.name.as_deref() {
            None | Some("") => problems.sluice(FieldError::required(&format!("{a_at}.name"), "")),
            Some(name) if !analysis_names.insert(name) => {
                problems.sluice(FieldError::duplicate(&format!("{a_at}.name"), name))
            }
            Some(_) => {}
        }
        if analysis_ref
            .template_name
            .as_deref()
            .is_none_or(str::is_empty)
        {
            problems.sluice(FieldError::required(&format!("{a_at}.templateName"), ""));
        }
        analysis::check_run_arguments(
            analysis_ref.args.as_deref().unwrap_or_default(),
            &format!("{a_at}.args"),
            problems,
        );
    }
    non_negative(
        problems,
        &format!("{real}.scaleDownDelaySeconds"),
        experiment.scale_down_delay_seconds,
    );
}

/// Arguments of the step's experiment analyses and analysis that name Rollout metadata the
/// downward API does not offer. Argo reports each at `analyses`, showing all the step's
/// arguments.
fn check_analysis_arguments(step: &CanaryStep, at: &str, problems: &mut Problems) {
    let experiment_args = step
        .experiment
        .iter()
        .flat_map(|e| e.analyses.iter().flatten())
        .flat_map(|a| a.args.iter().flatten());
    let analysis_args = step.analysis.iter().flat_map(|a| a.args.iter().flatten());
    let args: Vec<&AnalysisRunArgument> = experiment_args.chain(analysis_args).collect();
    let unsupported = args
        .iter()
        .filter(|arg| analysis::unsupported_metadata_ref(arg).is_some())
        .count();
    // The arguments as Go encodes Argo's types: `name` always (`""` when unset), `value` and
    // `valueFrom` only when set.
    let go_args: Vec<serde_json::Value> = args
        .iter()
        .map(|arg| {
            let mut out = serde_json::Map::new();
            out.insert(
                "name".into(),
                arg.name.as_deref().unwrap_or_default().into(),
            );
            if let Some(value) = arg.value.as_deref().filter(|v| !v.is_empty()) {
                out.insert("value".into(), value.into());
            }
            if let Some(from) = &arg.value_from {
                // `podTemplateHashValue` and `fieldRef` only when set; a fieldRef's
                // `fieldPath` always.
                let mut go_from = serde_json::Map::new();
                if let Some(hash) = &from.pod_template_hash_value {
                    go_from.insert(
                        "podTemplateHashValue".into(),
                        serde_json::to_value(hash).unwrap_or_default(),
                    );
                }
                if let Some(field_ref) = &from.field_ref {
                    let path = field_ref.field_path.as_deref().unwrap_or_default();
                    go_from.insert("fieldRef".into(), serde_json::json!({ "fieldPath": path }));
                }
                out.insert("valueFrom".into(), serde_json::Value::Object(go_from));
            }
            serde_json::Value::Object(out)
        })
        .collect();
    for _ in 0..unsupported {
        problems.argo(FieldError::invalid(
            &format!("{at}.analyses"),
            BadValue::Json(serde_json::Value::Array(go_args.clone())),
            analysis::UNSUPPORTED_METADATA,
        ));
    }
}

/// A header or request-part match with exactly one of exact, prefix or regex.
fn check_string_match(value: Option<&StringMatch>, at: &str, problems: &mut Problems) {
    let Some(value) = value else {
        missed_string_match(at, problems);
        return;
    };
    match match_count(value) {
        0 => problems.argo(FieldError::invalid(
            at,
            BadValue::json(value),
            STRING_MATCH_MISSED,
        )),
        1 => {}
        _ => problems.argo(FieldError::invalid(
            at,
            BadValue::json(value),
            STRING_MATCH_MULTIPLE,
        )),
    }
}

fn missed_string_match(at: &str, problems: &mut Problems) {
    problems.argo(FieldError::invalid(
        at,
        BadValue::Json(serde_json::Value::Null),
        STRING_MATCH_MISSED,
    ));
}

fn match_count(value: &StringMatch) -> usize {
    [&value.exact, &value.prefix, &value.regex]
        .into_iter()
        .filter(|v| !is_blank(v))
        .count()
}

fn is_blank(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests;
