//! A run's metrics as the state machine needs them: `{{args.x}}` placeholders in the
//! scheduling and limit fields resolved from the run's arguments, defaults applied, and the
//! spec checked as Argo checks it before measuring. A problem becomes the message of an
//! Error phase instead of a panic.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::AnalysisRun;
use sluice_api::analysis::placeholders::{self, PlaceholderError};
use sluice_api::analysis::{
    DEFAULT_CONSECUTIVE_ERROR_LIMIT, DEFAULT_MEASUREMENT_HISTORY_LIMIT, Metric,
};
use sluice_api::common::Argument;
use sluice_api::duration::parse_go_duration;

use super::rules;

/// Everything about one metric that decides when it is measured and how it is judged.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MetricSettings {
    pub name: String,
    pub interval: Option<Duration>,
    pub initial_delay: Option<Duration>,
    /// Measurements (Successful, Failed or Inconclusive) after which the metric is done;
    /// `None` measures until the run is terminated.
    pub count: Option<i32>,
    /// `-1` turns the limit off.
    pub failure_limit: i32,
    pub inconclusive_limit: i32,
    pub consecutive_error_limit: i32,
    /// `0` turns the limit off.
    pub consecutive_success_limit: i32,
    pub dry_run: bool,
    /// Measurements kept in the status.
    pub retention: usize,
}

impl MetricSettings {
    pub fn failure_limit_applies(&self) -> bool {
        self.failure_limit >= 0
    }

    pub fn success_limit_applies(&self) -> bool {
        self.consecutive_success_limit > 0
    }

    pub fn count_reached(&self, measured: i32) -> bool {
        self.count.is_some_and(|count| measured >= count)
    }
}

/// The settings of every metric, in spec order, or the message the run fails with.
pub(crate) fn metric_settings(run: &AnalysisRun) -> Result<Vec<MetricSettings>, String> {
    let metrics = run.spec.metrics.as_deref().unwrap_or_default();
    let args = run.spec.args.as_deref().unwrap_or_default();
    let resolved = metrics
        .iter()
        .map(|m| Resolved::new(m, args))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("Unable to resolve metric arguments: {e}"))?;
    let invalid = |e: String| format!("Analysis spec invalid: {e}");
    let mut settings = check_metrics(metrics, &resolved).map_err(invalid)?;

    let names: Vec<&str> = metrics.iter().filter_map(|m| m.name.as_deref()).collect();
    let dry_run = rules::dry_run_metrics(run.spec.dry_run.as_deref().unwrap_or_default(), &names)
        .map_err(invalid)?;
    let retention = rules::retention_limits(
        run.spec
            .measurement_retention
            .as_deref()
            .unwrap_or_default(),
        &names,
    )
    .map_err(invalid)?;
    for s in &mut settings {
        s.dry_run = dry_run.contains(&s.name);
        if let Some(limit) = retention.get(&s.name) {
            s.retention = *limit;
        }
    }
    Ok(settings)
}

/// Whether `metrics` (their placeholders already resolved) pass Argo's checks, with the
/// problem in Argo's words (without the run's "Analysis spec invalid: ").
pub fn validate_metrics(metrics: &[Metric]) -> Result<(), String> {
    let resolved = metrics
        .iter()
        .map(|m| Resolved::new(m, &[]))
        .collect::<Result<Vec<_>, _>>()?;
    check_metrics(metrics, &resolved).map(drop)
}

/// The scheduling and limit fields of a metric with placeholders substituted.
struct Resolved {
    interval: Option<String>,
    initial_delay: Option<String>,
    count: Option<IntOrString>,
    failure_limit: Option<IntOrString>,
    inconclusive_limit: Option<IntOrString>,
    consecutive_error_limit: Option<IntOrString>,
    consecutive_success_limit: Option<IntOrString>,
}

impl Resolved {
    fn new(metric: &Metric, args: &[Argument]) -> Result<Self, String> {
        let text =
            |value: &Option<String>| value.as_deref().map(|v| substitute(v, args)).transpose();
        let int = |value: &Option<IntOrString>| -> Result<Option<IntOrString>, String> {
            Ok(match value {
                Some(IntOrString::String(s)) => Some(IntOrString::String(substitute(s, args)?)),
                other => other.clone(),
            })
        };
        Ok(Self {
            interval: text(&metric.interval)?,
            initial_delay: text(&metric.initial_delay)?,
            count: int(&metric.count)?,
            failure_limit: int(&metric.failure_limit)?,
            inconclusive_limit: int(&metric.inconclusive_limit)?,
            consecutive_error_limit: int(&metric.consecutive_error_limit)?,
            consecutive_success_limit: int(&metric.consecutive_success_limit)?,
        })
    }
}

/// Replaces `{{args.<name>}}` with the argument's value. Arguments whose value comes from a
/// Secret are not available here: a limit or interval cannot depend on one.
pub(crate) fn substitute(text: &str, args: &[Argument]) -> Result<String, String> {
    let value = |name: &str| {
        args.iter()
            .find(|a| a.name.as_deref() == Some(name))
            .and_then(|a| a.value.as_deref())
    };
    placeholders::substitute(text, value).map_err(|e| match e {
        PlaceholderError::Unterminated { .. } => format!("unterminated placeholder in {text:?}"),
        PlaceholderError::Unresolved { tag } => {
            format!("failed to resolve {{{{{}}}}}", tag.trim())
        }
    })
}

/// The metrics checked as Argo checks them before measuring, in its order and words (an
/// unnamed metric is allowed, as in Argo: only a repeated name is refused).
fn check_metrics(metrics: &[Metric], resolved: &[Resolved]) -> Result<Vec<MetricSettings>, String> {
    if metrics.is_empty() {
        return Err("no metrics specified".into());
    }
    let mut seen = BTreeSet::new();
    let mut settings = Vec::with_capacity(metrics.len());
    for (i, (metric, fields)) in metrics.iter().zip(resolved).enumerate() {
        let name = metric.name.as_deref().unwrap_or_default();
        if !seen.insert(name) {
            return Err(format!("metrics[{i}]: duplicate name '{name}'"));
        }
        let s = check_metric(name, metric, fields).map_err(|e| format!("metrics[{i}]: {e}"))?;
        settings.push(s);
    }
    Ok(settings)
}

fn check_metric(name: &str, metric: &Metric, f: &Resolved) -> Result<MetricSettings, String> {
    let count = int_field(f.count.as_ref()).unwrap_or(0);
    let failure_limit = int_field(f.failure_limit.as_ref()).unwrap_or(0);
    let inconclusive_limit = int_field(f.inconclusive_limit.as_ref()).unwrap_or(0);
    let consecutive_error_limit =
        int_field(f.consecutive_error_limit.as_ref()).unwrap_or(DEFAULT_CONSECUTIVE_ERROR_LIMIT);
    let consecutive_success_limit = int_field(f.consecutive_success_limit.as_ref()).unwrap_or(0);

    if consecutive_success_limit < 0 {
        return Err("consecutiveSuccessLimit must be >= 0".into());
    }
    if failure_limit < -1 {
        return Err("failureLimit must be >= 0, or -1 to be disabled".into());
    }
    if consecutive_success_limit == 0 && failure_limit == -1 {
        return Err("failureLimit and consecutiveSuccessLimit cannot both be disabled".into());
    }
    if inconclusive_limit < 0 {
        return Err("inconclusiveLimit must be >= 0".into());
    }
    if consecutive_error_limit < 0 {
        return Err("consecutiveErrorLimit must be >= 0".into());
    }
    if count > 0 {
        if failure_limit >= 0 {
            if count < failure_limit + consecutive_success_limit {
                return Err(format!(
                    "count ({count}) must be >= failureLimit + consecutiveSuccessLimit \
                     ({failure_limit} + {consecutive_success_limit}) if both >= 0"
                ));
            }
        } else if count < consecutive_success_limit {
            return Err("count must be >= consecutiveSuccessLimit".into());
        }
        if count < inconclusive_limit {
            return Err("count must be >= inconclusiveLimit".into());
        }
    }
    let interval_text = f.interval.as_deref().unwrap_or_default();
    if count > 1 && interval_text.is_empty() {
        return Err("interval must be specified when count > 1".into());
    }
    let interval = duration_field("interval", f.interval.as_deref())?;
    let initial_delay = duration_field("startDelay", f.initial_delay.as_deref())?;
    match metric.provider.as_ref().map_or(0, |p| p.kinds().len()) {
        0 => return Err("no provider specified".into()),
        1 => {}
        _ => return Err("multiple providers specified".into()),
    }

    // No count (or a negative one, which Argo lets through): one measurement, or endless
    // when an interval is set.
    let count = match (count.max(0), interval) {
        (0, None) => Some(1),
        (0, Some(_)) => None,
        (n, _) => Some(n),
    };
    Ok(MetricSettings {
        name: name.to_owned(),
        interval,
        initial_delay,
        count,
        failure_limit,
        inconclusive_limit,
        consecutive_error_limit,
        consecutive_success_limit,
        dry_run: false,
        retention: DEFAULT_MEASUREMENT_HISTORY_LIMIT as usize,
    })
}

/// An int-or-string field as Go's `IntValue` reads it: a string that is not a whole number
/// counts as 0 (Argo checks and runs the metric with that), an absent field as unset.
fn int_field(value: Option<&IntOrString>) -> Option<i32> {
    match value {
        None => None,
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(s)) => Some(s.parse().unwrap_or(0)),
    }
}

/// A Go duration field; an empty string counts as unset.
fn duration_field(field: &str, value: Option<&str>) -> Result<Option<Duration>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => parse_go_duration(text)
            .map(Some)
            // Go's error, which names its package.
            .map_err(|e| format!("invalid {field} string: time: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> AnalysisRun {
        serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": spec})).unwrap()
    }

    fn web() -> serde_json::Value {
        json!({"web": {"url": "http://x"}})
    }

    fn one(metric: serde_json::Value) -> Result<MetricSettings, String> {
        let mut metric = metric;
        metric["provider"] = web();
        metric_settings(&run(json!({"metrics": [metric]}))).map(|mut v| v.remove(0))
    }

    #[test]
    fn defaults() {
        let s = one(json!({"name": "m"})).unwrap();
        assert_eq!(s.count, Some(1));
        assert_eq!(s.interval, None);
        assert_eq!(s.failure_limit, 0);
        assert_eq!(s.inconclusive_limit, 0);
        assert_eq!(s.consecutive_error_limit, 4);
        assert_eq!(s.consecutive_success_limit, 0);
        assert_eq!(s.retention, 10);
        assert!(!s.dry_run);
    }

    #[test]
    fn effective_count() {
        let endless = one(json!({"name": "m", "interval": "30s"})).unwrap();
        assert_eq!(endless.count, None);
        assert_eq!(endless.interval, Some(Duration::from_secs(30)));
        let zero = one(json!({"name": "m", "count": 0, "interval": "30s"})).unwrap();
        assert_eq!(zero.count, None);
        let three = one(json!({"name": "m", "count": "3", "interval": "1m"})).unwrap();
        assert_eq!(three.count, Some(3));
    }

    #[test]
    fn placeholders_resolve_from_run_args() {
        let r = run(json!({
            "args": [{"name": "n", "value": "5"}, {"name": "every", "value": "10s"},
                     {"name": "secret", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "metrics": [{"name": "m", "count": "{{args.n}}", "interval": "{{ args.every }}",
                         "failureLimit": "{{args.n}}", "provider": web()}]
        }));
        let s = metric_settings(&r).unwrap().remove(0);
        assert_eq!(s.count, Some(5));
        assert_eq!(s.failure_limit, 5);
        assert_eq!(s.interval, Some(Duration::from_secs(10)));

        let mut r = r;
        r.spec.metrics.as_mut().unwrap()[0].count =
            Some(IntOrString::String("{{args.secret}}".into()));
        assert_eq!(
            metric_settings(&r).unwrap_err(),
            "Unable to resolve metric arguments: failed to resolve {{args.secret}}"
        );
    }

    #[test]
    fn invalid_specs() {
        let cases = [
            (
                json!({"metrics": []}),
                "Analysis spec invalid: no metrics specified",
            ),
            (
                json!({"metrics": [{"name": "a", "provider": web()}, {"name": "a", "provider": web()}]}),
                "Analysis spec invalid: metrics[1]: duplicate name 'a'",
            ),
            (
                json!({"metrics": [{"name": "a"}]}),
                "Analysis spec invalid: metrics[0]: no provider specified",
            ),
            (
                json!({"metrics": [{"name": "a", "provider": {"web": {"url": "u"}, "prometheus": {"query": "q"}}}]}),
                "Analysis spec invalid: metrics[0]: multiple providers specified",
            ),
            (
                json!({"metrics": [{"name": "a", "count": 3, "provider": web()}]}),
                "Analysis spec invalid: metrics[0]: interval must be specified when count > 1",
            ),
            (
                json!({"metrics": [{"name": "a", "count": 2, "interval": "1s", "failureLimit": 3, "provider": web()}]}),
                "Analysis spec invalid: metrics[0]: count (2) must be >= failureLimit + consecutiveSuccessLimit (3 + 0) if both >= 0",
            ),
            (
                json!({"metrics": [{"name": "a", "interval": "soon", "provider": web()}]}),
                "Analysis spec invalid: metrics[0]: invalid interval string: ",
            ),
            (
                json!({"metrics": [{"name": "a", "failureLimit": -1, "provider": web()}]}),
                "Analysis spec invalid: metrics[0]: failureLimit and consecutiveSuccessLimit cannot both be disabled",
            ),
            (
                json!({"metrics": [{"name": "a", "provider": web()}], "dryRun": [{"metricName": "b"}]}),
                "Analysis spec invalid: dryRun[0]: Rule didn't match any metric name(s)",
            ),
        ];
        for (spec, want) in cases {
            let got = metric_settings(&run(spec.clone())).unwrap_err();
            assert!(got.starts_with(want), "{spec}: got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn dry_run_and_retention_rules_apply() {
        let r = run(json!({
            "metrics": [{"name": "a", "provider": web()}, {"name": "b", "provider": web()}],
            "dryRun": [{"metricName": "b"}],
            "measurementRetention": [{"metricName": "*", "limit": 3}]
        }));
        let s = metric_settings(&r).unwrap();
        assert_eq!((s[0].dry_run, s[1].dry_run), (false, true));
        assert_eq!((s[0].retention, s[1].retention), (3, 3));
    }
}
