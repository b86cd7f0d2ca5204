//! Trigger conditions: a `when` predicate and an optional `oncePer` value, expr-lang
//! expressions over the Rollout (`rollout`) and its current AnalysisRuns (`analysisRuns`), as
//! the engine evaluates them. An empty `when` is a condition that holds on every event of its
//! trigger (Argo Rollouts sends the trigger's templates whenever its event happens).
//!
//! What the expressions may use is expr-lang's language and builtins (`any`, `all`, `filter`,
//! `len`, `in`, `matches`, string functions, ...) and the engine's helpers: `time.Now()`,
//! `time.Parse(text)` (RFC 3339) with Go's methods on the times and durations they give
//! (`.Sub()`, `.Add()`, `.Before()`, `.After()`, `.Format()`, `.Minutes()`, ...), and
//! `strings.ToUpper`, `strings.ToLower`, `strings.ReplaceAll`. "Now" is the time the caller
//! evaluates at. A condition that fails is reported with its error, and its trigger sends
//! nothing.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::LazyLock;

use base64::Engine as _;
use expr::{Context, Environment, Program, Value};
use jiff::Timestamp;
use sha1::Digest as _;

/// A compiled condition.
#[derive(Debug, Clone)]
pub struct Condition {
    when: Option<Program>,
    once_per: Option<Program>,
    /// The engine's key of the condition: `sha1(when)`, base64 (URL alphabet, unpadded).
    pub when_hash: String,
}

/// What a condition says about one Rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub triggered: bool,
    /// The `oncePer` value, when the condition has one and holds.
    pub once_per: Option<String>,
}

/// Longest expression accepted (the parser is recursive).
const MAX_LEN: usize = 4096;

impl Condition {
    /// Compiles `when` and `once_per` (empty strings: none). A syntax error is returned as a
    /// message naming the expression.
    pub fn compile(when: &str, once_per: &str) -> Result<Condition, String> {
        Ok(Condition {
            when: compile(when, "when")?,
            once_per: compile(once_per, "oncePer")?,
            when_hash: hash(when),
        })
    }

    /// Evaluates the condition over `vars` (`rollout`, `analysisRuns`) at `now`.
    pub fn evaluate(&self, vars: &serde_json::Value, now: Timestamp) -> Result<Outcome, String> {
        let ctx = context(vars, now);
        let Some(when) = &self.when else {
            return Ok(Outcome {
                triggered: true,
                once_per: None,
            });
        };
        let triggered = match run(when, &ctx)? {
            Value::Bool(b) => b,
            _ => false,
        };
        let once_per = match (&self.once_per, triggered) {
            (Some(p), true) => Some(display(&run(p, &ctx)?)),
            _ => None,
        };
        Ok(Outcome {
            triggered,
            once_per,
        })
    }

    /// Whether the condition has a `when` (an empty one holds on every event).
    pub fn has_when(&self) -> bool {
        self.when.is_some()
    }
}

/// The engine's hash of a condition: sha1, base64 URL alphabet without padding.
pub fn hash(input: &str) -> String {
    let digest = sha1::Sha1::digest(input.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

fn compile(code: &str, what: &str) -> Result<Option<Program>, String> {
    if code.trim().is_empty() {
        return Ok(None);
    }
    if code.len() > MAX_LEN {
        return Err(format!(
            "{what} expression longer than {MAX_LEN} characters"
        ));
    }
    let code = &member_shorthand(&go_helpers(code));
    match catch_unwind(|| expr::compile(code)) {
        Ok(Ok(p)) => Ok(Some(p)),
        Ok(Err(e)) => Err(format!(
            "cannot compile {what} {code:?}: {}",
            one_line(&e.to_string())
        )),
        Err(_) => Err(format!("cannot compile {what} {code:?}")),
    }
}

/// The context variable holding "now" (RFC 3339) for the rewritten `time.Now()`.
const NOW_VAR: &str = "__sluice_now";

/// The engine's helpers, each spelled as the expr-lang builtin that does the same.
const HELPERS: &[(&str, &str)] = &[
    ("time.Now()", "date(__sluice_now)"),
    ("now()", "date(__sluice_now)"),
    ("time.Parse(", "date("),
    ("strings.ToUpper(", "upper("),
    ("strings.ToLower(", "lower("),
    ("strings.ReplaceAll(", "replace("),
];

/// Rewrites the engine's Go helpers (`time.Now()`, `strings.ToUpper(...)`) where they start
/// a name, outside string literals.
fn go_helpers(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 16);
    let mut quote: Option<char> = None;
    let mut prev: Option<char> = None;
    let mut rest = code;
    while let Some(c) = rest.chars().next() {
        let starts_name = !prev.is_some_and(|p| p.is_alphanumeric() || "_.#$".contains(p));
        if quote.is_none()
            && starts_name
            && let Some((from, to)) = HELPERS.iter().find(|(from, _)| rest.starts_with(from))
        {
            out.push_str(to);
            rest = &rest[from.len()..];
            prev = Some('(');
            continue;
        }
        match quote {
            Some(q) if c == q && prev != Some('\\') => quote = None,
            None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
            _ => {}
        }
        out.push(c);
        prev = Some(if prev == Some('\\') && c == '\\' {
            ' '
        } else {
            c
        });
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Go's expr lets a closure name its element's fields as `.field` (`any(list, .type == 'x')`,
/// `{.type == 'x'}`); expr-lang knows them as `#.field`. A `.` that starts an operand (after an
/// operator, an opening bracket, a comma or at the start) outside string literals becomes `#.`.
fn member_shorthand(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 8);
    let mut quote: Option<char> = None;
    let mut prev: Option<char> = None;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == q {
                quote = None;
            }
            prev = Some(c);
            continue;
        }
        if c == '\'' || c == '"' || c == '`' {
            quote = Some(c);
        }
        let starts_operand = prev.is_none_or(|p| "({[,!&|=<>+-*/%?:".contains(p));
        if c == '.'
            && starts_operand
            && chars.peek().is_some_and(|n| n.is_alphabetic() || *n == '_')
        {
            out.push('#');
        }
        out.push(c);
        if !c.is_whitespace() {
            prev = Some(c);
        }
    }
    out
}

fn run(program: &Program, ctx: &Context) -> Result<Value, String> {
    match catch_unwind(AssertUnwindSafe(|| ENVIRONMENT.run(program, ctx))) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(one_line(&e.to_string())),
        Err(_) => Err("the expression's evaluation failed".into()),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

static ENVIRONMENT: LazyLock<Environment<'static>> = LazyLock::new(Environment::new);

fn context(vars: &serde_json::Value, now: Timestamp) -> Context {
    let mut ctx = Context::default();
    ctx.insert(NOW_VAR.to_owned(), Value::String(now.to_string()));
    if let serde_json::Value::Object(map) = vars {
        for (k, v) in map {
            ctx.insert(k.clone(), json_to_value(v));
        }
    }
    ctx
}

/// A JSON document as an expr value.
pub fn json_to_value(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(json_to_value).collect()),
        serde_json::Value::Object(map) => Value::Map(
            map.iter()
                .map(|(k, v)| (k.clone(), json_to_value(v)))
                .collect(),
        ),
    }
}

/// How Go's `fmt.Sprintf("%v")` shows a value, for `oncePer`.
fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Nil => "<nil>".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> serde_json::Value {
        json!({"rollout": {
            "metadata": {"name": "web", "annotations": {"rollout.argoproj.io/revision": "3"}},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "argoproj/rollouts-demo:purple"}]}}},
            "status": {"phase": "Paused", "conditions": [
                {"type": "Progressing", "status": "True", "reason": "RolloutPaused"},
                {"type": "Available", "status": "False"}
            ]}
        }})
    }

    fn at() -> Timestamp {
        "2026-11-27T07:30:00Z".parse().unwrap()
    }

    #[test]
    fn the_engines_time_and_strings_helpers_evaluate_as_go_calls() {
        let vars = serde_json::json!({"rollout": {
            "metadata": {"name": "web"},
            "status": {"pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-11-27T07:10:00Z"}]}
        }});
        for (when, expected) in [
            (
                "time.Now().Sub(time.Parse(rollout.status.pauseConditions[0].startTime)).Minutes() >= 20",
                true,
            ),
            (
                "time.Now().Sub(time.Parse(rollout.status.pauseConditions[0].startTime)).Minutes() > 20",
                false,
            ),
            (
                "time.Parse('2026-11-27T07:00:00Z').Before(time.Now())",
                true,
            ),
            ("time.Now().Format('2006-01-02') == '2026-11-27'", true),
            ("now().Hour() == 7", true),
            ("strings.ToUpper(rollout.metadata.name) == 'WEB'", true),
            ("strings.ToLower('WEB') == rollout.metadata.name", true),
            (
                "strings.ReplaceAll(rollout.metadata.name, 'w', 'W') == 'Web'",
                true,
            ),
            // Inside a string literal or as a field, the names are left alone.
            ("'time.Now()' == 'time.Now()'", true),
            ("rollout.metadata.name != 'strings.ToUpper(x)'", true),
        ] {
            let c = Condition::compile(when, "").unwrap_or_else(|e| panic!("{when}: {e}"));
            let outcome = c
                .evaluate(&vars, at())
                .unwrap_or_else(|e| panic!("{when}: {e}"));
            assert_eq!(outcome.triggered, expected, "{when}");
        }
        let c = Condition::compile("true", "time.Now().Format('2006-01-02T15')").unwrap();
        assert_eq!(
            c.evaluate(&vars, at()).unwrap().once_per.as_deref(),
            Some("2026-11-27T07")
        );
    }

    #[test]
    fn the_documented_conditions_evaluate_over_the_rollout() {
        for (when, expected) in [
            (
                "rollout.spec.template.spec.containers[0].image == 'argoproj/rollouts-demo:purple'",
                true,
            ),
            ("rollout.status.phase == 'Paused'", true),
            ("rollout.status.phase == 'Healthy'", false),
            (
                "any(rollout.status.conditions, {.type == 'Progressing' && .reason == 'RolloutPaused'})",
                true,
            ),
            (
                "any(rollout.status.conditions, .type == 'Progressing' && .reason == 'RolloutPaused')",
                true,
            ),
            (
                "any(rollout.status.conditions, {#.type == 'Progressing'})",
                true,
            ),
            (
                "any(rollout.status.conditions, #.type == 'Available' && #.status == 'True')",
                false,
            ),
        ] {
            let c = Condition::compile(when, "").unwrap();
            assert_eq!(
                c.evaluate(&vars(), at()).unwrap().triggered,
                expected,
                "{when}"
            );
        }
    }

    #[test]
    fn once_per_is_the_value_of_its_expression_when_the_condition_holds() {
        let c = Condition::compile(
            "rollout.status.phase == 'Paused'",
            "rollout.metadata.annotations['rollout.argoproj.io/revision']",
        )
        .unwrap();
        assert_eq!(
            c.evaluate(&vars(), at()).unwrap(),
            Outcome {
                triggered: true,
                once_per: Some("3".into())
            }
        );
        let c = Condition::compile("rollout.status.phase == 'Healthy'", "rollout.metadata.name")
            .unwrap();
        assert_eq!(c.evaluate(&vars(), at()).unwrap().once_per, None);
    }

    #[test]
    fn an_empty_condition_holds_on_every_event() {
        let c = Condition::compile("", "").unwrap();
        assert!(!c.has_when());
        assert!(c.evaluate(&vars(), at()).unwrap().triggered);
        assert_eq!(c.when_hash, "2jmj7l5rSw0yVb_vlWAYkK_YBwk");
    }

    #[test]
    fn a_syntax_error_is_reported_at_compile_time_and_an_unknown_function_at_run_time() {
        let err = Condition::compile("rollout.status.phase == ", "").unwrap_err();
        assert!(err.contains("cannot compile when"), "{err}");
        let c = Condition::compile("rollout.nowhere() > 0", "").unwrap_or_else(|e| panic!("{e}"));
        assert!(c.evaluate(&vars(), at()).is_err());
    }
}
