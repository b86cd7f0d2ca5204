//! Analysis specs: the analysis a Rollout runs (template references and arguments) and the
//! AnalysisTemplate, ClusterAnalysisTemplate and AnalysisRun kinds with their metrics.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::non_negative;
use super::{BadValue, FieldError, Problems};
use crate::analysis::{AnalysisRunSpec, AnalysisTemplateSpec, Metric};
use crate::common::{
    AnalysisRunArgument, AnalysisTemplateRef, Argument, DryRun, MeasurementRetention,
    PodTemplateHashValue,
};
use crate::duration::parse_go_duration;
use crate::rollout::RolloutAnalysis;

/// Argo's detail for an argument whose `fieldRef` names Rollout metadata the downward API
/// cannot give.
pub(super) const UNSUPPORTED_METADATA: &str =
    "Analyses arguments must refer to valid object metadata supported by downwardAPI";

/// An analysis step, background analysis or blue-green promotion analysis of a Rollout.
/// Argo's spec validation checks none of this, so these are Sluice's checks.
pub(super) fn check_rollout_analysis(
    analysis: &RolloutAnalysis,
    at: &str,
    problems: &mut Problems,
) {
    let templates = analysis.templates.as_deref().unwrap_or_default();
    if templates.is_empty() {
        problems.sluice(FieldError::required(
            &format!("{at}.templates"),
            "at least one template is required",
        ));
    }
    check_template_refs(templates, &format!("{at}.templates"), problems);
    check_run_arguments(
        analysis.args.as_deref().unwrap_or_default(),
        &format!("{at}.args"),
        problems,
    );
    check_dry_run(
        analysis.dry_run.as_deref().unwrap_or_default(),
        at,
        problems,
    );
    check_retention(
        analysis
            .measurement_retention
            .as_deref()
            .unwrap_or_default(),
        at,
        problems,
    );
}

fn check_template_refs(templates: &[AnalysisTemplateRef], at: &str, problems: &mut Problems) {
    for (i, template) in templates.iter().enumerate() {
        if template.template_name.as_deref().is_none_or(str::is_empty) {
            problems.required(&format!("{at}[{i}].templateName"));
        }
    }
}

/// The form of the arguments a Rollout passes to an analysis (Sluice's checks; whether a
/// `fieldRef` names supported metadata is checked by the callers, by Argo's rule in steps).
pub(super) fn check_run_arguments(args: &[AnalysisRunArgument], at: &str, problems: &mut Problems) {
    let mut names = BTreeSet::new();
    for (i, arg) in args.iter().enumerate() {
        let a_at = format!("{at}[{i}]");
        check_argument_name(arg.name.as_deref(), &mut names, &a_at, problems);
        let Some(from) = &arg.value_from else {
            continue;
        };
        let from_at = format!("{a_at}.valueFrom");
        if arg.value.is_some() {
            problems.sluice(FieldError::forbidden(
                &from_at,
                "may not be specified when `value` is set",
            ));
        }
        match (&from.pod_template_hash_value, &from.field_ref) {
            (Some(_), Some(_)) | (None, None) => problems.sluice(FieldError::invalid(
                &from_at,
                BadValue::json(from),
                "must set exactly one of podTemplateHashValue or fieldRef",
            )),
            (Some(PodTemplateHashValue::Other(other)), None) => {
                problems.sluice(FieldError::not_supported(
                    &format!("{from_at}.podTemplateHashValue"),
                    other.as_str(),
                    &["Stable", "Latest"],
                ))
            }
            (None, Some(field_ref))
                if field_ref.field_path.as_deref().is_none_or(str::is_empty) =>
            {
                problems.sluice(FieldError::required(
                    &format!("{from_at}.fieldRef.fieldPath"),
                    "",
                ))
            }
            _ => {}
        }
    }
}

/// Arguments outside canary steps whose `fieldRef` names unsupported metadata: the check Argo
/// makes for steps, made by Sluice for background and promotion analyses too.
pub(super) fn check_metadata_field_refs(
    args: &[AnalysisRunArgument],
    at: &str,
    problems: &mut Problems,
) {
    for (i, arg) in args.iter().enumerate() {
        if let Some(path) = unsupported_metadata_ref(arg) {
            problems.sluice(FieldError::invalid(
                &format!("{at}[{i}].valueFrom.fieldRef.fieldPath"),
                path,
                UNSUPPORTED_METADATA,
            ));
        }
    }
}

/// The argument's `fieldRef` path when it points into the Rollout's `metadata` at something
/// the downward API does not offer (name, namespace, uid, labels, annotations, or one label or
/// annotation by key). Other paths (`spec...`, `status...`) are resolved when the run is
/// created.
pub(super) fn unsupported_metadata_ref(arg: &AnalysisRunArgument) -> Option<&str> {
    let path = arg
        .value_from
        .as_ref()?
        .field_ref
        .as_ref()?
        .field_path
        .as_deref()?;
    if !path.starts_with("metadata") {
        return None;
    }
    let keyed = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['"))
            .and_then(|r| r.strip_suffix("']"))
            .is_some_and(|key| !key.is_empty())
    };
    let supported = matches!(
        path,
        "metadata.name"
            | "metadata.namespace"
            | "metadata.uid"
            | "metadata.labels"
            | "metadata.annotations"
    ) || keyed("metadata.labels")
        || keyed("metadata.annotations");
    (!supported).then_some(path)
}

fn check_argument_name<'a>(
    name: Option<&'a str>,
    seen: &mut BTreeSet<&'a str>,
    at: &str,
    problems: &mut Problems,
) {
    match name {
        None | Some("") => problems.required(&format!("{at}.name")),
        Some(name) if !seen.insert(name) => {
            problems.duplicate(&format!("{at}.name"), "argument", name)
        }
        Some(_) => {}
    }
}

fn check_dry_run(entries: &[DryRun], at: &str, problems: &mut Problems) {
    for (i, entry) in entries.iter().enumerate() {
        if entry.metric_name.as_deref().is_none_or(str::is_empty) {
            problems.required(&format!("{at}.dryRun[{i}].metricName"));
        }
    }
}

fn check_retention(entries: &[MeasurementRetention], at: &str, problems: &mut Problems) {
    for (i, entry) in entries.iter().enumerate() {
        let e_at = format!("{at}.measurementRetention[{i}]");
        if entry.metric_name.as_deref().is_none_or(str::is_empty) {
            problems.required(&format!("{e_at}.metricName"));
        }
        match entry.limit {
            None => problems.required(&format!("{e_at}.limit")),
            Some(limit) => non_negative(problems, &format!("{e_at}.limit"), Some(limit)),
        }
    }
}

/// The spec of an AnalysisTemplate or ClusterAnalysisTemplate.
pub(super) fn check_template_spec(spec: &AnalysisTemplateSpec, problems: &mut Problems) {
    let metrics = spec.metrics.as_deref().unwrap_or_default();
    let nested = spec.templates.as_deref().unwrap_or_default();
    if metrics.is_empty() && nested.is_empty() {
        problems.add(
            "spec.metrics",
            "must list at least one metric (or nest templates)",
        );
    }
    check_metrics(metrics, problems);
    check_template_refs(nested, "spec.templates", problems);
    check_template_arguments(spec.args.as_deref().unwrap_or_default(), problems);
    check_dry_run(
        spec.dry_run.as_deref().unwrap_or_default(),
        "spec",
        problems,
    );
    check_retention(
        spec.measurement_retention.as_deref().unwrap_or_default(),
        "spec",
        problems,
    );
}

/// The spec of an AnalysisRun.
pub(super) fn check_run_spec(spec: &AnalysisRunSpec, problems: &mut Problems) {
    let metrics = spec.metrics.as_deref().unwrap_or_default();
    if metrics.is_empty() {
        problems.add("spec.metrics", "must list at least one metric");
    }
    check_metrics(metrics, problems);
    check_template_arguments(spec.args.as_deref().unwrap_or_default(), problems);
    check_dry_run(
        spec.dry_run.as_deref().unwrap_or_default(),
        "spec",
        problems,
    );
    check_retention(
        spec.measurement_retention.as_deref().unwrap_or_default(),
        "spec",
        problems,
    );
    if let Some(ttl) = &spec.ttl_strategy {
        non_negative(
            problems,
            "spec.ttlStrategy.secondsAfterCompletion",
            ttl.seconds_after_completion,
        );
        non_negative(
            problems,
            "spec.ttlStrategy.secondsAfterFailure",
            ttl.seconds_after_failure,
        );
        non_negative(
            problems,
            "spec.ttlStrategy.secondsAfterSuccess",
            ttl.seconds_after_success,
        );
    }
}

/// Arguments declared by a template or run.
fn check_template_arguments(args: &[Argument], problems: &mut Problems) {
    let mut names = BTreeSet::new();
    for (i, arg) in args.iter().enumerate() {
        let at = format!("spec.args[{i}]");
        check_argument_name(arg.name.as_deref(), &mut names, &at, problems);
        let Some(from) = &arg.value_from else {
            continue;
        };
        if arg.value.is_some() {
            problems.add(&at, "set only one of value and valueFrom");
        }
        match (&from.secret_key_ref, &from.field_ref) {
            (Some(_), Some(_)) | (None, None) => problems.add(
                &format!("{at}.valueFrom"),
                "must set exactly one of secretKeyRef or fieldRef",
            ),
            (Some(secret), None) => {
                if secret.name.as_deref().is_none_or(str::is_empty) {
                    problems.add(&format!("{at}.valueFrom.secretKeyRef.name"), "required");
                }
                if secret.key.as_deref().is_none_or(str::is_empty) {
                    problems.add(&format!("{at}.valueFrom.secretKeyRef.key"), "required");
                }
            }
            (None, Some(field_ref)) => {
                if field_ref.field_path.as_deref().is_none_or(str::is_empty) {
                    problems.add(&format!("{at}.valueFrom.fieldRef.fieldPath"), "required");
                }
            }
        }
    }
}

fn check_metrics(metrics: &[Metric], problems: &mut Problems) {
    let mut names = BTreeSet::new();
    for (i, metric) in metrics.iter().enumerate() {
        let at = format!("spec.metrics[{i}]");
        match metric.name.as_deref() {
            None | Some("") => problems.add(&format!("{at}.name"), "required"),
            Some(name) if !names.insert(name) => problems.add(
                &format!("{at}.name"),
                format!("duplicate metric name {name:?}"),
            ),
            Some(_) => {}
        }
        check_metric(metric, &at, problems);
    }
}

fn check_metric(metric: &Metric, at: &str, problems: &mut Problems) {
    match metric.provider.as_ref().map(|p| p.kinds()) {
        None => problems.add(&format!("{at}.provider"), "required"),
        Some(kinds) if kinds.is_empty() => problems.add(
            &format!("{at}.provider"),
            "must configure one metric provider",
        ),
        Some(kinds) if kinds.len() > 1 => {
            let names: Vec<&str> = kinds.iter().map(|k| k.type_name()).collect();
            problems.add(
                &format!("{at}.provider"),
                format!(
                    "must configure exactly one metric provider, got {}",
                    names.join(", ")
                ),
            );
        }
        Some(_) => {}
    }
    for (field, value) in [
        ("interval", &metric.interval),
        ("initialDelay", &metric.initial_delay),
    ] {
        if let Some(text) = value
            && !is_placeholder(text)
            && let Err(e) = parse_go_duration(text)
        {
            problems.add(&format!("{at}.{field}"), e);
        }
    }
    let int = |problems: &mut Problems, field: &str, value: &Option<IntOrString>| {
        resolve_int(value.as_ref(), &format!("{at}.{field}"), problems)
    };
    let count = int(problems, "count", &metric.count);
    let failure_limit = int(problems, "failureLimit", &metric.failure_limit);
    let inconclusive_limit = int(problems, "inconclusiveLimit", &metric.inconclusive_limit);
    let error_limit = int(
        problems,
        "consecutiveErrorLimit",
        &metric.consecutive_error_limit,
    );
    let success_limit = int(
        problems,
        "consecutiveSuccessLimit",
        &metric.consecutive_success_limit,
    );

    non_negative(problems, &format!("{at}.count"), count);
    // -1 turns the failure limit off.
    if let Some(limit) = failure_limit
        && limit < -1
    {
        problems.add(
            &format!("{at}.failureLimit"),
            format!("must be -1 (no limit) or more, got {limit}"),
        );
    }
    non_negative(
        problems,
        &format!("{at}.inconclusiveLimit"),
        inconclusive_limit,
    );
    non_negative(
        problems,
        &format!("{at}.consecutiveErrorLimit"),
        error_limit,
    );
    non_negative(
        problems,
        &format!("{at}.consecutiveSuccessLimit"),
        success_limit,
    );
    if let Some(count) = count.filter(|c| *c > 0) {
        for (field, limit) in [
            ("failureLimit", failure_limit),
            ("inconclusiveLimit", inconclusive_limit),
        ] {
            if let Some(limit) = limit
                && limit > count
            {
                problems.add(
                    &format!("{at}.{field}"),
                    format!("must not exceed count ({count}), got {limit}"),
                );
            }
        }
        if count > 1 && metric.interval.as_deref().is_none_or(str::is_empty) {
            problems.add(
                &format!("{at}.interval"),
                format!("required when count is more than 1 (count is {count})"),
            );
        }
    }
}

/// The integer value of an int-or-string field; `None` when unset or still an argument
/// placeholder such as `{{args.count}}`.
fn resolve_int(value: Option<&IntOrString>, at: &str, problems: &mut Problems) -> Option<i32> {
    match value? {
        IntOrString::Int(n) => Some(*n),
        IntOrString::String(text) if is_placeholder(text) => None,
        IntOrString::String(text) => match text.trim().parse() {
            Ok(n) => Some(n),
            Err(_) => {
                problems.add(at, format!("must be an integer, got {text:?}"));
                None
            }
        },
    }
}

/// Whether a value still holds an argument placeholder, resolved only when a run is created.
fn is_placeholder(text: &str) -> bool {
    text.contains("{{")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::test_support::{assert_problems, merge};
    use crate::validation::{
        validate_analysis_run, validate_analysis_template, validate_cluster_analysis_template,
    };

    fn template(patch: Value) -> Value {
        let mut base = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "rate"},
            "spec": {
                "args": [{"name": "service"}],
                "metrics": [{
                    "name": "success-rate",
                    "interval": "1m",
                    "count": 5,
                    "failureLimit": 1,
                    "successCondition": "result[0] >= 0.95",
                    "provider": {"prometheus": {"address": "http://prometheus", "query": "up"}}
                }]
            }
        });
        merge(&mut base, json!({ "spec": patch }));
        base
    }

    fn template_problems(patch: Value) -> Vec<String> {
        validate_analysis_template(&serde_json::from_value(template(patch)).unwrap())
    }

    fn metric_problems(metric: Value) -> Vec<String> {
        let mut full = json!({"name": "m", "provider": {"web": {"url": "http://x"}}});
        merge(&mut full, metric);
        template_problems(json!({ "metrics": [full] }))
    }

    #[test]
    fn base_template_is_valid_in_every_kind() {
        assert_problems(template_problems(json!({})), &[]);
        let cluster = serde_json::from_value(template(json!({}))).unwrap();
        assert_problems(validate_cluster_analysis_template(&cluster), &[]);
        let run = serde_json::from_value(template(
            json!({"args": [{"name": "service", "value": "web"}]}),
        ))
        .unwrap();
        assert_problems(validate_analysis_run(&run), &[]);
    }

    #[test]
    fn metrics_are_required_unless_templates_are_nested() {
        assert_problems(
            template_problems(json!({"metrics": []})),
            &["spec.metrics: must list at least one metric (or nest templates)"],
        );
        assert_problems(
            template_problems(json!({"metrics": [], "templates": [{"templateName": "base"}]})),
            &[],
        );
        assert_problems(
            template_problems(json!({"metrics": [], "templates": [{}]})),
            &["spec.templates[0].templateName: required"],
        );
        let run = serde_json::from_value(template(json!({"metrics": []}))).unwrap();
        assert_problems(
            validate_analysis_run(&run),
            &["spec.metrics: must list at least one metric"],
        );
    }

    #[test]
    fn metric_names_are_unique_and_required() {
        let metric = json!({"name": "m", "provider": {"web": {"url": "http://x"}}});
        let mut unnamed = metric.clone();
        unnamed["name"] = Value::Null;
        assert_problems(
            template_problems(json!({"metrics": [metric.clone(), metric, unnamed]})),
            &[
                "spec.metrics[1].name: duplicate metric name \"m\"",
                "spec.metrics[2].name: required",
            ],
        );
    }

    #[test]
    fn exactly_one_provider() {
        assert_problems(
            metric_problems(json!({"provider": null})),
            &["spec.metrics[0].provider: required"],
        );
        assert_problems(
            metric_problems(json!({"provider": {"web": null}})),
            &["spec.metrics[0].provider: must configure one metric provider"],
        );
        assert_problems(
            metric_problems(
                json!({"provider": {"job": {"spec": {"template": {"spec": {"containers": []}}}}}}),
            ),
            &["spec.metrics[0].provider: must configure exactly one metric provider, got Web, Job"],
        );
        assert_problems(
            metric_problems(json!({"provider": {"web": null, "plugin": {"org/metric": {}}}})),
            &[],
        );
    }

    #[test]
    fn durations_parse_unless_still_placeholders() {
        assert_problems(
            metric_problems(json!({"interval": "{{args.interval}}", "initialDelay": "30s"})),
            &[],
        );
        assert_problems(
            metric_problems(json!({"interval": "1 minute", "initialDelay": "-5s"})),
            &[
                "spec.metrics[0].interval: unknown unit \" minute\" in duration \"1 minute\"",
                "spec.metrics[0].initialDelay: negative duration \"-5s\"",
            ],
        );
    }

    #[test]
    fn count_and_limits() {
        assert_problems(
            metric_problems(json!({"count": 3, "interval": "10s", "failureLimit": -1})),
            &[],
        );
        assert_problems(
            metric_problems(json!({"count": "{{args.count}}", "failureLimit": "2"})),
            &[],
        );
        assert_problems(
            metric_problems(json!({"count": 3})),
            &["spec.metrics[0].interval: required when count is more than 1 (count is 3)"],
        );
        assert_problems(
            metric_problems(
                json!({"count": 2, "interval": "1m", "failureLimit": 3, "inconclusiveLimit": 4}),
            ),
            &[
                "spec.metrics[0].failureLimit: must not exceed count (2), got 3",
                "spec.metrics[0].inconclusiveLimit: must not exceed count (2), got 4",
            ],
        );
        assert_problems(
            metric_problems(json!({
                "count": -1, "failureLimit": -2, "inconclusiveLimit": -1,
                "consecutiveErrorLimit": "many", "consecutiveSuccessLimit": -1
            })),
            &[
                "spec.metrics[0].consecutiveErrorLimit: must be an integer, got \"many\"",
                "spec.metrics[0].count: must not be negative, got -1",
                "spec.metrics[0].failureLimit: must be -1 (no limit) or more, got -2",
                "spec.metrics[0].inconclusiveLimit: must not be negative, got -1",
                "spec.metrics[0].consecutiveSuccessLimit: must not be negative, got -1",
            ],
        );
    }

    #[test]
    fn template_arguments() {
        assert_problems(
            template_problems(json!({"args": [
                {"name": "a", "value": "1"},
                {"name": "token", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                {"name": "ns", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
            ]})),
            &[],
        );
        assert_problems(
            template_problems(json!({"args": [
                {"name": "a", "value": "1", "valueFrom": {"secretKeyRef": {}}},
                {"name": "a"},
                {"name": "b", "valueFrom": {}},
                {"valueFrom": {"fieldRef": {}}}
            ]})),
            &[
                "spec.args[0]: set only one of value and valueFrom",
                "spec.args[0].valueFrom.secretKeyRef.name: required",
                "spec.args[0].valueFrom.secretKeyRef.key: required",
                "spec.args[1].name: duplicate argument \"a\"",
                "spec.args[2].valueFrom: must set exactly one of secretKeyRef or fieldRef",
                "spec.args[3].name: required",
                "spec.args[3].valueFrom.fieldRef.fieldPath: required",
            ],
        );
    }

    #[test]
    fn run_settings() {
        let run = serde_json::from_value(template(json!({
            "dryRun": [{"metricName": "*"}],
            "measurementRetention": [{"metricName": "success-rate"}],
            "ttlStrategy": {"secondsAfterCompletion": -1, "secondsAfterSuccess": 60}
        })))
        .unwrap();
        assert_problems(
            validate_analysis_run(&run),
            &[
                "spec.measurementRetention[0].limit: required",
                "spec.ttlStrategy.secondsAfterCompletion: must not be negative, got -1",
            ],
        );
    }
}
