//! `successCondition` / `failureCondition`: expr-lang expressions over a measurement's `result`.
//!
//! The environment is Argo's: the variable `result` and the helpers `asInt`, `asFloat`, `isNaN`,
//! `isInf`, `isNil` and `default`, next to expr's own builtins (`all`, `len`, `now`, ...).
//! `isNil(x)` and `default(x, fallback)` look at their argument; Argo's always look at `result`,
//! which gives the same answer for the documented forms `isNil(result)` and
//! `default(result, 0)`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::LazyLock;

use expr::{Context, Environment, Value};
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;

/// Conditions longer than this are refused rather than parsed.
const MAX_CONDITION_LEN: usize = 4096;
/// Deeper bracket nesting is refused: the parser is recursive and runs on small task stacks.
const MAX_NESTING: usize = 64;
/// Most elements a range (`a..b`) may have; Go's expr stops at the same memory budget. expr-lang
/// has no budget of its own and would allocate whatever the bounds ask for.
const MAX_RANGE_LEN: i64 = 1_000_000;

/// Why a condition could not be evaluated; the measurement becomes `Error` with this text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConditionError(pub String);

/// Judges a result against a metric's conditions (Argo's rules):
///
/// - no condition: Successful;
/// - only `successCondition`: Successful if true, else Failed;
/// - only `failureCondition`: Failed if true, else Successful;
/// - both: Failed if the failure condition holds, else Successful if the success condition
///   holds, else Inconclusive.
///
/// An empty string counts as no condition.
pub fn evaluate_metric(metric: &Metric, result: &Value) -> Result<AnalysisPhase, ConditionError> {
    evaluate(
        metric.success_condition.as_deref(),
        metric.failure_condition.as_deref(),
        result,
    )
}

/// [`evaluate_metric`] on the bare conditions.
pub fn evaluate(
    success: Option<&str>,
    failure: Option<&str>,
    result: &Value,
) -> Result<AnalysisPhase, ConditionError> {
    let success = success.filter(|c| !c.is_empty());
    let failure = failure.filter(|c| !c.is_empty());
    let succeeded = success.map(|c| eval_condition(c, result)).transpose()?;
    let failed = failure.map(|c| eval_condition(c, result)).transpose()?;
    let (succeeded, failed) = match (succeeded, failed) {
        (None, None) => return Ok(AnalysisPhase::Successful),
        (Some(s), None) => (s, !s),
        (None, Some(f)) => (!f, f),
        (Some(s), Some(f)) => (s, f),
    };
    Ok(if failed {
        AnalysisPhase::Failed
    } else if succeeded {
        AnalysisPhase::Successful
    } else {
        AnalysisPhase::Inconclusive
    })
}

/// Evaluates one condition; it must yield a bool.
pub fn eval_condition(condition: &str, result: &Value) -> Result<bool, ConditionError> {
    check_shape(condition)?;
    let mut ctx = Context::default();
    ctx.insert("result", result.clone());
    let outcome = catch_unwind(AssertUnwindSafe(|| ENVIRONMENT.eval(condition, &ctx)));
    match outcome {
        Ok(Ok(Value::Bool(b))) => Ok(b),
        Ok(Ok(other)) => Err(ConditionError(format!(
            "expected bool, but got {}",
            type_name(&other)
        ))),
        Ok(Err(err)) => {
            let mut message = format!("failed to evaluate {condition:?}: {}", describe(&err));
            match result {
                Value::Nil => message.push_str(" (result is nil)"),
                Value::Array(items) if items.is_empty() => {
                    message.push_str(" (result is an empty list)")
                }
                _ => {}
            }
            Err(ConditionError(message))
        }
        Err(_) => Err(ConditionError(format!(
            "evaluation of {condition:?} panicked"
        ))),
    }
}

/// Converts a JSON document (a web response, a New Relic row...) into an expr value.
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

static ENVIRONMENT: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.add_function("asInt", |call| {
        one_arg(&call.args, "asInt").and_then(as_int)
    });
    env.add_function("asFloat", |call| {
        one_arg(&call.args, "asFloat").and_then(as_float)
    });
    env.add_function("isNaN", |call| {
        number_arg(&call.args, "isNaN").map(|f| Value::Bool(f.is_nan()))
    });
    env.add_function("isInf", |call| {
        number_arg(&call.args, "isInf").map(|f| Value::Bool(f.is_infinite()))
    });
    env.add_function("isNil", |call| {
        one_arg(&call.args, "isNil").map(|v| Value::Bool(v.is_nil()))
    });
    env.add_function("default", |call| match call.args.as_slice() {
        [value, fallback] if value.is_nil() => Ok(fallback.clone()),
        [value, _] => Ok(value.clone()),
        args => Err(arity("default", 2, args.len())),
    });
    env
});

fn one_arg<'a>(args: &'a [Value], name: &str) -> expr::Result<&'a Value> {
    match args {
        [value] => Ok(value),
        _ => Err(arity(name, 1, args.len())),
    }
}

fn number_arg(args: &[Value], name: &str) -> expr::Result<f64> {
    match one_arg(args, name)? {
        Value::Float(f) => Ok(*f),
        Value::Integer(i) => Ok(*i as f64),
        other => Err(expr::Error::ExprError(format!(
            "{name}() expects a number, got {} {}",
            type_name(other),
            other
        ))),
    }
}

fn arity(name: &str, want: usize, got: usize) -> expr::Error {
    expr::Error::ExprError(format!(
        "{name}() takes {want} argument{}, got {got}",
        if want == 1 { "" } else { "s" }
    ))
}

fn as_int(value: &Value) -> expr::Result<Value> {
    let unsupported = || {
        expr::Error::ExprError(format!(
            "asInt() not supported on {} {}",
            type_name(value),
            value
        ))
    };
    match value {
        Value::Integer(i) => Ok(Value::Integer(*i)),
        // Go's int64(f) truncates toward zero; out-of-range values have no int form.
        Value::Float(f) if f.is_finite() && *f >= i64::MIN as f64 && *f < i64::MAX as f64 => {
            Ok(Value::Integer(f.trunc() as i64))
        }
        Value::String(s) => s
            .parse::<i64>()
            .map(Value::Integer)
            .map_err(|err| expr::Error::ExprError(format!("asInt() cannot parse {s:?}: {err}"))),
        _ => Err(unsupported()),
    }
}

fn as_float(value: &Value) -> expr::Result<Value> {
    match value {
        Value::Float(f) => Ok(Value::Float(*f)),
        Value::Integer(i) => Ok(Value::Float(*i as f64)),
        Value::String(s) => s
            .parse::<f64>()
            .map(Value::Float)
            .map_err(|err| expr::Error::ExprError(format!("asFloat() cannot parse {s:?}: {err}"))),
        other => Err(expr::Error::ExprError(format!(
            "asFloat() not supported on {} {}",
            type_name(other),
            other
        ))),
    }
}

/// expr's name for a value's type, as its `type()` builtin reports it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Integer(_) => "int",
        Value::Float(_) => "float",
        Value::Bool(_) => "bool",
        Value::Nil => "nil",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Bytes(_) => "bytes",
        Value::Map(_) | Value::KeyedMap(_) => "map",
        _ => "time",
    }
}

/// Refuses expressions the evaluator cannot be trusted with: very long ones, deeply nested ones
/// and ranges that would allocate without bound.
pub(crate) fn check_shape(condition: &str) -> Result<(), ConditionError> {
    if condition.len() > MAX_CONDITION_LEN {
        return Err(ConditionError(format!(
            "condition is longer than {MAX_CONDITION_LEN} characters"
        )));
    }
    let chars: Vec<char> = condition.chars().collect();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) => {
                if c == '\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => quote = Some(c),
                '(' | '[' | '{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(ConditionError(format!(
                            "condition nests brackets deeper than {MAX_NESTING} levels"
                        )));
                    }
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                '.' if chars.get(i + 1) == Some(&'.') => {
                    check_range(&chars, i)?;
                    i += 1;
                }
                _ => {}
            },
        }
        i += 1;
    }
    Ok(())
}

/// Allows `a..b` only between integer literals, and only up to [`MAX_RANGE_LEN`] elements.
fn check_range(chars: &[char], at: usize) -> Result<(), ConditionError> {
    let refuse = || {
        ConditionError(format!(
            "the range operator `..` needs integer literal bounds at most {MAX_RANGE_LEN} apart"
        ))
    };
    let mut start = at;
    while start > 0 && chars[start - 1].is_ascii_digit() {
        start -= 1;
    }
    if start > 0 && chars[start - 1] == '-' {
        start -= 1;
    }
    let mut end = at + 2;
    if chars.get(end) == Some(&'-') {
        end += 1;
    }
    while chars.get(end).is_some_and(char::is_ascii_digit) {
        end += 1;
    }
    let low: String = chars[start..at].iter().collect();
    let high: String = chars[at + 2..end].iter().collect();
    match (low.parse::<i64>(), high.parse::<i64>()) {
        (Ok(low), Ok(high)) if high.saturating_sub(low) < MAX_RANGE_LEN => Ok(()),
        _ => Err(refuse()),
    }
}

/// An expr error on one line. Syntax errors span several lines with a caret; they become
/// `syntax error at <line>:<col>: expected ...`.
fn describe(err: &expr::Error) -> String {
    let text = err.to_string();
    if !matches!(err, expr::Error::PestError(_)) {
        return text;
    }
    let position = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("-->"))
        .map(str::trim);
    let detail = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("= "))
        .map(str::trim);
    match (position, detail) {
        (Some(p), Some(d)) => format!("syntax error at {p}: {d}"),
        _ => text.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn floats(values: &[f64]) -> Value {
        Value::Array(values.iter().map(|f| Value::Float(*f)).collect())
    }

    fn phase(success: Option<&str>, failure: Option<&str>, result: &Value) -> AnalysisPhase {
        evaluate(success, failure, result).unwrap()
    }

    #[test]
    fn phase_rules() {
        let r = Value::Float(0.5);
        assert_eq!(phase(None, None, &r), AnalysisPhase::Successful);
        assert_eq!(phase(Some(""), Some(""), &r), AnalysisPhase::Successful);
        assert_eq!(
            phase(Some("result > 0.1"), None, &r),
            AnalysisPhase::Successful
        );
        assert_eq!(phase(Some("result > 0.9"), None, &r), AnalysisPhase::Failed);
        assert_eq!(
            phase(None, Some("result > 0.9"), &r),
            AnalysisPhase::Successful
        );
        assert_eq!(phase(None, Some("result > 0.1"), &r), AnalysisPhase::Failed);
        assert_eq!(
            phase(Some("result > 0.1"), Some("result > 0.2"), &r),
            AnalysisPhase::Failed
        );
        assert_eq!(
            phase(Some("result > 0.1"), Some("result > 0.9"), &r),
            AnalysisPhase::Successful
        );
        assert_eq!(
            phase(Some("result > 0.9"), Some("result < 0.1"), &r),
            AnalysisPhase::Inconclusive
        );
    }

    #[test]
    fn metric_fields_are_used() {
        let metric = Metric {
            success_condition: Some("result[0] >= 0.95".into()),
            failure_condition: Some("result[0] < 0.5".into()),
            ..Default::default()
        };
        let phase_of = |v: f64| evaluate_metric(&metric, &floats(&[v])).unwrap();
        assert_eq!(phase_of(0.99), AnalysisPhase::Successful);
        assert_eq!(phase_of(0.1), AnalysisPhase::Failed);
        assert_eq!(phase_of(0.7), AnalysisPhase::Inconclusive);
    }

    #[test]
    fn non_bool_result_is_an_error() {
        let err = eval_condition("result + 1", &Value::Float(1.0)).unwrap_err();
        assert_eq!(err.0, "expected bool, but got float");
        let err = evaluate(Some("'yes'"), None, &Value::Nil).unwrap_err();
        assert_eq!(err.0, "expected bool, but got string");
    }

    #[test]
    fn errors_in_either_condition_are_errors() {
        let r = Value::Float(1.0);
        let err = evaluate(Some("result >"), None, &r).unwrap_err();
        assert!(
            err.0
                .starts_with("failed to evaluate \"result >\": syntax error at 1:9: expected "),
            "{err}"
        );
        let err = evaluate(Some("reslt > 1"), None, &r).unwrap_err();
        assert!(err.0.contains("unknown variable: reslt"), "{err}");
        assert!(evaluate(Some("result > 0"), Some("result >>> 1"), &r).is_err());
    }

    #[test]
    fn prometheus_vectors_and_scalars() {
        // A vector is a list of floats, even with one element; a scalar is a float.
        let vector = floats(&[0.99]);
        assert!(eval_condition("result[0] >= 0.95", &vector).unwrap());
        assert!(eval_condition("len(result) == 1", &vector).unwrap());
        assert!(eval_condition("all(result, # < 1000)", &floats(&[1.0, 999.0])).unwrap());
        assert!(!eval_condition("all(result, # < 1000)", &floats(&[1.0, 1001.0])).unwrap());
        assert!(eval_condition("result >= 0.95", &Value::Float(0.99)).unwrap());
        // Comparing a list with a number is an error, not false.
        assert!(eval_condition("result >= 0.95", &vector).is_err());
    }

    #[test]
    fn indexing_an_empty_vector_is_an_error() {
        let err = evaluate(Some("result[0] >= 0.95"), None, &floats(&[])).unwrap_err();
        assert!(
            err.0
                .starts_with("failed to evaluate \"result[0] >= 0.95\": "),
            "{err}"
        );
        assert!(err.0.ends_with("(result is an empty list)"), "{err}");
        assert!(eval_condition("len(result) == 0", &floats(&[])).unwrap());
    }

    #[test]
    fn helpers() {
        let r = Value::String("42".into());
        assert!(eval_condition("asInt(result) == 42", &r).unwrap());
        assert!(eval_condition("asFloat(result) > 41.5", &r).unwrap());
        assert!(eval_condition("asInt(4.9) == 4", &Value::Nil).unwrap());
        assert!(eval_condition("asInt(-4.9) == -4", &Value::Nil).unwrap());
        assert!(eval_condition("asFloat(2) == 2.0", &Value::Nil).unwrap());
        assert!(eval_condition("isNaN(result[0])", &floats(&[f64::NAN])).unwrap());
        assert!(!eval_condition("isNaN(result)", &Value::Float(1.0)).unwrap());
        assert!(eval_condition("isInf(result)", &Value::Float(f64::NEG_INFINITY)).unwrap());
        assert!(!eval_condition("isInf(result)", &Value::Integer(3)).unwrap());
        assert!(eval_condition("isNil(result)", &Value::Nil).unwrap());
        assert!(!eval_condition("isNil(result)", &floats(&[])).unwrap());
        assert!(eval_condition("default(result, 0) < 0.05", &Value::Nil).unwrap());
        assert!(!eval_condition("default(result, 1) < 0.05", &Value::Nil).unwrap());
        assert!(eval_condition("default(result, 1) < 0.05", &Value::Float(0.01)).unwrap());
        let err = eval_condition("asInt('x1')", &Value::Nil).unwrap_err();
        assert!(err.0.contains("asInt() cannot parse"), "{err}");
        let err = eval_condition("asFloat(result) > 1", &Value::Bool(true)).unwrap_err();
        assert!(err.0.contains("asFloat() not supported on bool"), "{err}");
        let err = eval_condition("isNaN('a')", &Value::Nil).unwrap_err();
        assert!(err.0.contains("isNaN() expects a number"), "{err}");
        let err = eval_condition("default(result)", &Value::Nil).unwrap_err();
        assert!(
            err.0.contains("default() takes 2 arguments, got 1"),
            "{err}"
        );
    }

    #[test]
    fn nil_result_compared_with_number_is_an_error() {
        // Datadog's empty result: Argo reports "invalid operation: < (mismatched types ...)".
        assert!(evaluate(Some("result < 0.05"), None, &Value::Nil).is_err());
    }

    #[test]
    fn json_results() {
        let r = json_to_value(&json!({"major": "1", "Status": 0, "data": {"ok": true}}));
        assert!(eval_condition("result.major == '1'", &r).unwrap());
        assert!(eval_condition("result.data.ok", &r).unwrap());
        assert_eq!(
            evaluate(
                Some("result.Status == 999"),
                Some("result.Status == -1"),
                &r
            )
            .unwrap(),
            AnalysisPhase::Inconclusive
        );
        let big = json_to_value(&json!(18446744073709551615u64));
        assert!(matches!(big, Value::Float(_)));
        assert_eq!(json_to_value(&json!(null)), Value::Nil);
        assert_eq!(json_to_value(&json!(1.5)), Value::Float(1.5));
    }

    #[test]
    fn corpus_conditions() {
        // Every successCondition/failureCondition in Argo's v1.9.1 examples and e2e tests, with
        // the result shape its provider produces.
        let web_message = Value::String("It worked!".into());
        let k8s_version = json_to_value(&json!({"major": "1", "minor": "30"}));
        let dns = json_to_value(&json!({"Status": 0, "TC": false}));
        let cases: [(&str, &Value, bool); 5] = [
            ("result == 'It worked!'", &web_message, true),
            // `{{args.success-condition}}` after substitution.
            ("result == \"It worked!\"", &web_message, true),
            ("result[0] >= 0.99", &floats(&[0.995]), true),
            ("result.major == '1'", &k8s_version, true),
            ("result.Status == 999", &dns, false),
        ];
        for (condition, result, expected) in cases {
            assert_eq!(
                eval_condition(condition, result),
                Ok(expected),
                "{condition}"
            );
        }
        assert!(!eval_condition("result.Status == -1", &dns).unwrap());
        assert!(!eval_condition("result[0] >= 0.99", &floats(&[0.5])).unwrap());
    }

    #[test]
    fn expr_builtins_are_available() {
        let r = floats(&[0.1, 0.2, 0.3]);
        assert!(eval_condition("max(result) < 0.5", &r).unwrap());
        assert!(eval_condition("any(result, # > 0.25)", &r).unwrap());
        assert!(eval_condition("sum(result) > 0.5 && mean(result) < 0.3", &r).unwrap());
        assert!(eval_condition("now() > now() - duration('5m')", &r).unwrap());
        assert!(eval_condition("len(1..3) == 3 && len(-2..-1) == 2", &r).unwrap());
        assert!(eval_condition("result != '1..99999999999'", &r).unwrap());
    }

    #[test]
    fn odd_expressions_never_panic() {
        let results = [
            Value::Nil,
            Value::Float(f64::NAN),
            Value::Float(f64::INFINITY),
            Value::Integer(i64::MIN),
            floats(&[]),
            floats(&[1.0]),
            Value::String(String::new()),
            json_to_value(&json!({"a": [1, {"b": null}]})),
        ];
        let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
        let long = "1 + ".repeat(5000) + "1 > 0";
        let conditions = [
            "",
            " ",
            "(",
            ")",
            "[",
            "{",
            "}}}}",
            "result[",
            "result[-1] > 0",
            "result[99999999999999999999]",
            "result[1:0]",
            "result.a.b.c.d",
            "result[0][0][0]",
            "1 / 0 > 0",
            "1 % 0 == 0",
            "-9223372036854775808 / -1 > 0",
            "-(-9223372036854775807 - 1) > 0",
            "asInt(result) > 0",
            "asInt(1e300) > 0",
            "asInt(-1e300) > 0",
            "asFloat(nil) > 0",
            "asInt()",
            "asInt(1, 2)",
            "isNaN()",
            "isInf(nil)",
            "default()",
            "default(1,2,3)",
            "unknownFn(result)",
            "result matches '('",
            "result matches '[a-'",
            "'a' * 9999999999999",
            "repeat('a', -1) == ''",
            "duration('x') > 0",
            "date('nope') > now()",
            "fromJSON('{') == nil",
            "fromBase64('%%%') == ''",
            "toJSON(result) != ''",
            "len(result) > 0",
            "map(result, #.x) == nil",
            "filter(result, # > 0) == nil",
            "result ?? 1 > 0",
            "result?.a?.b == nil",
            "let x = result; x == x",
            "1..99999999999 == nil",
            "0..len(result) == nil",
            "-99999999999..99999999999 == nil",
            "$env.result == result",
            "\u{0}",
            "\"unterminated",
            "'\\u{ZZZZ}'",
            "🦀 == 1",
            "0x == 1",
            "1e999999 > 0",
            deep.as_str(),
            long.as_str(),
        ];
        for result in &results {
            for condition in conditions {
                let a = std::panic::catch_unwind(|| eval_condition(condition, result));
                assert!(a.is_ok(), "{condition:?} panicked on {result:?}");
                let b = std::panic::catch_unwind(|| evaluate(Some(condition), None, result));
                assert!(b.is_ok(), "{condition:?} panicked on {result:?}");
            }
        }
        assert!(eval_condition(&deep, &Value::Nil).is_err());
        assert!(eval_condition("1..99999999999 == nil", &Value::Nil).is_err());
        assert!(eval_condition(&long, &Value::Nil).is_err());
    }
}
