//! Static checks of user-written specs, the ones Argo's controller and its lint command make
//! before acting on an object.
//!
//! A Rollout's problems read as Argo Rollouts reports them: Kubernetes field errors
//! (`<path>: Invalid value: <value>: <detail>`, `<path>: Required value: <detail>`, ...), with
//! Argo's field paths and texts. Argo shows only the first problem (in the `InvalidSpec`
//! condition), so its checks run in the order its validator runs them: the pod-template
//! reference, spec-level fields, the strategy (presence first, then the strategy's own fields,
//! then each step, then anti-affinity), then what its controller checks while looking up the
//! traffic router's objects. Argo's canary and blue-green validators name fields from
//! `spec.strategy` (`spec.strategy.stableService`, `spec.strategy.steps[2].setWeight`), so those
//! problems do too.
//!
//! Sluice also makes checks Argo lacks. A Rollout Argo runs keeps running under Sluice, so
//! these never stop one ([`RolloutProblems::blocking`] is Argo's first problem only): the
//! controller reports them in a `SpecWarning` event and `kubectl sluice lint` lists them. They
//! come after all of Argo's and name the field by its full path
//! (`spec.strategy.canary...`, `spec.strategy.blueGreen...`). The conformance tests
//! (`crates/conformance`) hold the verdicts and messages to Argo's own code; what still
//! differs is in `docs/differences-from-argo.md`. They are:
//! - `spec`: `rollbackWindow.revisions`, `analysis.successfulRunHistoryLimit` and
//!   `analysis.unsuccessfulRunHistoryLimit` not negative; `workloadRef` has a name and a known
//!   `scaleDown`.
//! - `spec.strategy.blueGreen`: an `activeService` (when only a preview is named); counts and
//!   delays not negative; `maxUnavailable` an int or percentage of at most 100%; the promotion
//!   analyses well formed (as for steps, below).
//! - `spec.strategy.canary`: `maxSurge`/`maxUnavailable` ints or percentages, `maxUnavailable`
//!   at most 100%; delays, `minPodsPerReplicaSet` and `scaleDownDelayRevisionLimit` not
//!   negative; `abortScaleDownDelaySeconds`, `minPodsPerReplicaSet` and `pingPong` only with
//!   traffic routing; `replicaProgressThreshold` well formed; background analysis well formed
//!   with a `startingStep` within the steps.
//! - `trafficRouting`: a router configured; `maxTrafficWeight` positive; `managedRoutes` named
//!   once each; each router's required fields (Istio VirtualService names and DestinationRule
//!   subsets, ALB `servicePort`, Ambassador mappings, App Mesh, Traefik and APISIX names).
//! - steps: a plugin step sets no other completing action; a plugin is named; pause durations
//!   parse; setCanaryScale sets one of its fields with weight 0-100 and replicas not negative;
//!   header matches name a header; mirror `percentage` 0-100 and mirror header values have
//!   exactly one of exact/prefix/regex; experiment templates are listed, named once, with a
//!   `specRef`, replicas not negative and weight 0-100, a Go `duration`, named analyses with a
//!   `templateName`, `scaleDownDelaySeconds` not negative; analyses list templates, each named,
//!   with well-formed arguments, dry-run and retention entries (and, outside steps, argument
//!   field paths the downward API supports).
//! - a Rollout with `rollouts.sluice.dev/statefulset` or `rollouts.sluice.dev/daemonset` (it
//!   drives a StatefulSet or a DaemonSet): what a partitioned or node-by-node update cannot do
//!   is refused first, naming the field (`driven.rs`), and its template, selector and replicas
//!   are the workload's, not checked here.
//!
//! AnalysisTemplates, ClusterAnalysisTemplates and AnalysisRuns keep Sluice's own wording,
//! `<field path>: <message>`.
//!
//! The checks never fail themselves: any input, however malformed, gives a list of problems.

mod analysis;
mod blue_green;
mod canary;
pub mod coverage;
mod driven;
mod int_or_percent;
mod rollout;
mod selector;
mod steps;
mod traffic;

use std::fmt::Display;

use serde::Serialize;

use crate::rollout::AntiAffinity;
use crate::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate, Rollout};

/// Problems with a Rollout's spec, as Kubernetes field errors; the first is the one Argo
/// would report. Empty means valid.
pub fn validate_rollout(rollout: &Rollout) -> Vec<String> {
    // A Rollout driving a StatefulSet takes its template, selector and replicas from it:
    // what cannot map onto a partitioned update is refused first, then the rest of the spec
    // is checked as for a `workloadRef`.
    let RolloutProblems { mut argo, sluice } = check_rollout(rollout);
    argo.extend(sluice);
    argo
}

/// A Rollout's problems in their two groups: those Argo's controller finds too, in its words
/// and order (the first is its `InvalidSpec` message), and those only Sluice looks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutProblems {
    pub argo: Vec<String>,
    pub sluice: Vec<String>,
}

impl RolloutProblems {
    /// The problem that stops the Rollout (its `InvalidSpec` message), if any: the first of
    /// Argo's. Sluice's own problems are warnings, since an object Argo runs must keep running.
    pub fn blocking(&self) -> Option<&str> {
        self.argo.first().map(String::as_str)
    }
}

/// Both groups of a Rollout's problems; [`validate_rollout`] is the two in one list.
pub fn check_rollout(rollout: &Rollout) -> RolloutProblems {
    let mut problems = Problems::default();
    let driven = driven::driven(rollout);
    problems.node_counts = driven.is_some_and(|(kind, _)| kind == driven::Driven::DaemonSet);
    if let Some((kind, name)) = driven {
        driven::check(rollout, kind, name, &mut problems);
    }
    driven::check_config_rollout(rollout, driven.map(|(kind, _)| kind), &mut problems);
    rollout::check_spec(&rollout.spec, driven.is_some(), &mut problems);
    RolloutProblems {
        argo: problems.argo,
        sluice: problems.sluice,
    }
}

/// Problems with an AnalysisTemplate's spec. Argument placeholders (`{{args.x}}`) are
/// accepted wherever a value is only known once a run is created.
pub fn validate_analysis_template(template: &AnalysisTemplate) -> Vec<String> {
    let mut problems = Problems::plain();
    analysis::check_template_spec(&template.spec, &mut problems);
    problems.into_messages()
}

/// Problems with a ClusterAnalysisTemplate's spec (the same rules as an AnalysisTemplate).
pub fn validate_cluster_analysis_template(template: &ClusterAnalysisTemplate) -> Vec<String> {
    let mut problems = Problems::plain();
    analysis::check_template_spec(&template.spec, &mut problems);
    problems.into_messages()
}

/// Problems with an AnalysisRun's spec.
pub fn validate_analysis_run(run: &AnalysisRun) -> Vec<String> {
    let mut problems = Problems::plain();
    analysis::check_run_spec(&run.spec, &mut problems);
    problems.into_messages()
}

/// Collects problems. A Rollout's are field errors in two groups, Argo's checks first and
/// Sluice's own after them; the analysis kinds' are plain `<field path>: <message>` lines.
#[derive(Debug, Default)]
struct Problems {
    plain: bool,
    /// The Rollout drives a DaemonSet: `setCanaryScale.replicas` is a number of its nodes,
    /// which needs no traffic router.
    node_counts: bool,
    argo: Vec<String>,
    sluice: Vec<String>,
}

impl Problems {
    /// For the analysis kinds, whose messages are `<field path>: <message>`.
    fn plain() -> Self {
        Problems {
            plain: true,
            ..Problems::default()
        }
    }

    /// A problem Argo's validator reports too, in its words.
    #[track_caller]
    fn argo(&mut self, error: FieldError) {
        coverage::record(std::panic::Location::caller());
        self.argo.push(error.0);
    }

    /// A problem Argo reports without naming a field.
    #[track_caller]
    fn argo_unplaced(&mut self, message: String) {
        coverage::record(std::panic::Location::caller());
        self.argo.push(message);
    }

    /// A problem only Sluice checks for.
    #[track_caller]
    fn sluice(&mut self, error: FieldError) {
        coverage::record(std::panic::Location::caller());
        if self.plain {
            self.argo.push(error.0);
        } else {
            self.sluice.push(error.0);
        }
    }

    /// A plain `<path>: <message>` problem of the analysis kinds.
    #[track_caller]
    fn add(&mut self, path: &str, message: impl Display) {
        coverage::record(std::panic::Location::caller());
        self.argo.push(format!("{path}: {message}"));
    }

    /// A missing value, in checks the analysis kinds share with a Rollout's analyses.
    #[track_caller]
    fn required(&mut self, path: &str) {
        coverage::record(std::panic::Location::caller());
        if self.plain {
            self.add(path, "required");
        } else {
            self.sluice(FieldError::required(path, ""));
        }
    }

    /// A name used twice (`what` says what it names), in the shared checks.
    #[track_caller]
    fn duplicate(&mut self, path: &str, what: &str, name: &str) {
        coverage::record(std::panic::Location::caller());
        if self.plain {
            self.add(path, format!("duplicate {what} {name:?}"));
        } else {
            self.sluice(FieldError::duplicate(path, name));
        }
    }

    /// A negative count, in the shared checks. Kubernetes words it as it does for a
    /// Deployment's counts.
    #[track_caller]
    fn negative(&mut self, path: &str, value: i32) {
        coverage::record(std::panic::Location::caller());
        if self.plain {
            self.add(path, format!("must not be negative, got {value}"));
        } else {
            self.sluice(FieldError::invalid(path, value, NOT_NEGATIVE));
        }
    }

    fn into_messages(self) -> Vec<String> {
        let mut messages = self.argo;
        messages.extend(self.sluice);
        messages
    }
}

/// Kubernetes' detail for a negative count.
const NOT_NEGATIVE: &str = "must be greater than or equal to 0";

/// One Kubernetes field error (`field.Error` of k8s.io/apimachinery), rendered as its `Error()`
/// renders it: `<path>: <type>[: <value>][: <detail>]`.
#[derive(Debug)]
struct FieldError(String);

impl FieldError {
    fn required(path: &str, detail: &str) -> Self {
        Self::new(path, "Required value", None, detail)
    }

    fn invalid(path: &str, value: impl Into<BadValue>, detail: &str) -> Self {
        Self::new(path, "Invalid value", Some(value.into()), detail)
    }

    fn duplicate(path: &str, value: impl Into<BadValue>) -> Self {
        Self::new(path, "Duplicate value", Some(value.into()), "")
    }

    fn not_supported(path: &str, value: impl Into<BadValue>, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = format!("supported values: {}", quoted.join(", "));
        Self::new(path, "Unsupported value", Some(value.into()), &detail)
    }

    fn forbidden(path: &str, detail: &str) -> Self {
        Self::new(path, "Forbidden", None, detail)
    }

    fn internal(path: &str, detail: &str) -> Self {
        Self::new(path, "Internal error", None, detail)
    }

    fn new(path: &str, kind: &str, value: Option<BadValue>, detail: &str) -> Self {
        let mut text = format!("{path}: {kind}");
        if let Some(value) = value {
            text.push_str(": ");
            text.push_str(&value.render());
        }
        if !detail.is_empty() {
            text.push_str(": ");
            text.push_str(detail);
        }
        FieldError(text)
    }
}

/// The offending value of a field error. Kubernetes prints strings quoted (Go's `%q`),
/// numbers and booleans bare, and anything else as its JSON encoding (`ErrorBody` of
/// apimachinery's `field.Error`; v0.34 in Argo 1.9.1). Go's `%#v` (`map[string]string{...}`)
/// is only its last resort, for a value JSON cannot encode, which none of Argo's checks
/// passes; Argo's older test fixtures show it from before apimachinery used JSON.
#[derive(Debug)]
enum BadValue {
    Text(String),
    Number(i64),
    Bool(bool),
    Json(serde_json::Value),
}

impl BadValue {
    /// A structured value, shown as Go's `encoding/json` would write the Go object: empty
    /// strings are left out, as Argo's types mark their string fields `omitempty`.
    fn json(value: &impl Serialize) -> Self {
        BadValue::Json(serde_json::to_value(value).map_or(serde_json::Value::Null, omit_empty))
    }

    fn render(&self) -> String {
        match self {
            BadValue::Text(text) => go_quote(text),
            BadValue::Number(n) => n.to_string(),
            BadValue::Bool(b) => b.to_string(),
            BadValue::Json(value) => go_json(value),
        }
    }
}

impl From<&str> for BadValue {
    fn from(text: &str) -> Self {
        BadValue::Text(text.to_owned())
    }
}

impl From<String> for BadValue {
    fn from(text: String) -> Self {
        BadValue::Text(text)
    }
}

impl From<i32> for BadValue {
    fn from(n: i32) -> Self {
        BadValue::Number(n.into())
    }
}

impl From<i64> for BadValue {
    fn from(n: i64) -> Self {
        BadValue::Number(n)
    }
}

impl From<bool> for BadValue {
    fn from(b: bool) -> Self {
        BadValue::Bool(b)
    }
}

fn omit_empty(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| v.as_str() != Some(""))
                .map(|(k, v)| (k, omit_empty(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(omit_empty).collect()),
        other => other,
    }
}

/// JSON as Go's `encoding/json` writes it: compact, with `<`, `>`, `&`, U+2028 and U+2029
/// escaped (they can only occur inside strings, so replacing them everywhere is safe).
fn go_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// A string quoted as Go's `%q` (`strconv.Quote`) quotes it.
fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Sluice's own check of a count that must not be negative (shared by every part of the
/// Rollout's checks, so it lives here, below them).
fn non_negative(problems: &mut Problems, path: &str, value: Option<i32>) {
    if let Some(value) = value
        && value < 0
    {
        problems.negative(path, value);
    }
}

/// `antiAffinity` of either strategy: exactly one kind, a soft one weighted 1 to 100. `at` is
/// Argo's path, `spec.strategy.antiAffinity`.
fn check_anti_affinity(anti_affinity: &AntiAffinity, at: &str, problems: &mut Problems) {
    let preferred = &anti_affinity.preferred_during_scheduling_ignored_during_execution;
    let required = &anti_affinity.required_during_scheduling_ignored_during_execution;
    if preferred.is_some() == required.is_some() {
        let value = format!(
            "antiAffinity.PreferredDuringSchedulingIgnoredDuringExecution: {} antiAffinity.RequiredDuringSchedulingIgnoredDuringExecution: {}",
            preferred.is_some(),
            required.is_some()
        );
        problems.argo(FieldError::invalid(
            at,
            value,
            "AntiAffinity must have exactly one strategy listed",
        ));
    }
    if let Some(preferred) = preferred {
        // An unset weight is Go's zero value.
        let weight = preferred.weight.unwrap_or(0);
        if !(1..=100).contains(&weight) {
            problems.argo(FieldError::invalid(
                &format!("{at}.weight"),
                weight,
                "AntiAffinity weight must be between 1-100",
            ));
        }
    }
}

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod tests;
