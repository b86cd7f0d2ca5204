//! The notifications engine's `.time` and `.strings` helpers and sprig's date functions, for
//! templates.
//!
//! `.time` and `.strings` are maps of functions, called as Go templates call a function held
//! in a map: `{{ call .time.Now }}`, `{{ call .time.Parse .rollout.status.x }}`,
//! `{{ call .strings.ToUpper .rollout.metadata.name }}`.
//!
//! A time in a template is the text Go prints for a `time.Time` (`2026-11-27 07:05:09 +0000
//! UTC`, what `{{ call .time.Now }}` shows in Argo). Go's methods on it (`.Format`, `.Unix`)
//! are not available; sprig's functions do the same: `{{ call .time.Now | date "15:04" }}`,
//! `{{ unixEpoch (call .time.Now) }}`.

use gtmpl::{Func, FuncError, Value};
use gtmpl_value::Function;
use jiff::Timestamp;

use super::sprig::{args_n, err, int, text};
use crate::go_time;

/// The template variables `time` and `strings`.
pub(super) fn vars() -> [(&'static str, Value); 2] {
    let map = |entries: &[(&str, Func)]| {
        Value::Map(
            entries
                .iter()
                .map(|(k, f)| ((*k).to_owned(), Value::Function(Function { f: *f })))
                .collect(),
        )
    };
    [
        ("time", map(&[("Now", field_now), ("Parse", field_parse)])),
        (
            "strings",
            map(&[
                ("ToUpper", field_to_upper),
                ("ToLower", field_to_lower),
                ("ReplaceAll", field_replace_all),
            ]),
        ),
    ]
}

/// sprig's date functions.
pub(super) const FUNCS: &[(&str, Func)] = &[
    ("now", now),
    ("date", date),
    ("dateInZone", date_in_zone),
    ("htmlDate", html_date),
    ("toDate", to_date),
    ("unixEpoch", unix_epoch),
    ("ago", ago),
    ("duration", duration),
];

// A template reads a map's function field by calling it with the map; it gives the function
// itself, for `call` to call with the arguments.
fn field_now(_: &[Value]) -> Result<Value, FuncError> {
    Ok(function(now))
}
fn field_parse(_: &[Value]) -> Result<Value, FuncError> {
    Ok(function(time_parse))
}
fn field_to_upper(_: &[Value]) -> Result<Value, FuncError> {
    Ok(function(to_upper))
}
fn field_to_lower(_: &[Value]) -> Result<Value, FuncError> {
    Ok(function(to_lower))
}
fn field_replace_all(_: &[Value]) -> Result<Value, FuncError> {
    Ok(function(replace_all))
}

fn function(f: Func) -> Value {
    Value::Function(Function { f })
}

fn time_value(t: Timestamp) -> Value {
    Value::String(go_time::go_string(t))
}

/// A time argument: a time's text (Go's printed form or RFC 3339) or Unix seconds.
fn time_arg(v: &Value) -> Result<Timestamp, FuncError> {
    match v {
        Value::Number(_) => Timestamp::from_second(int(v)).map_err(|e| err(e.to_string())),
        other => go_time::parse(&text(other)).map_err(err),
    }
}

fn now(_: &[Value]) -> Result<Value, FuncError> {
    Ok(time_value(go_time::now()))
}
/// `time.Parse`: RFC 3339, as the engine's helper parses.
fn time_parse(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("Parse", args, 1)?;
    text(&a[0])
        .trim()
        .parse::<Timestamp>()
        .map(time_value)
        .map_err(|e| err(format!("Parse: {e}")))
}
fn to_upper(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("ToUpper", args, 1)?;
    Ok(Value::String(text(&a[0]).to_uppercase()))
}
fn to_lower(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("ToLower", args, 1)?;
    Ok(Value::String(text(&a[0]).to_lowercase()))
}
fn replace_all(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("ReplaceAll", args, 3)?;
    Ok(Value::String(
        text(&a[0]).replace(&text(&a[1]), &text(&a[2])),
    ))
}
fn date(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("date", args, 2)?;
    go_time::format(time_arg(&a[1])?, &text(&a[0]), None)
        .map(Value::String)
        .map_err(err)
}
fn date_in_zone(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("dateInZone", args, 3)?;
    go_time::format(time_arg(&a[1])?, &text(&a[0]), Some(&text(&a[2])))
        .map(Value::String)
        .map_err(err)
}
fn html_date(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("htmlDate", args, 1)?;
    go_time::format(time_arg(&a[0])?, "2006-01-02", None)
        .map(Value::String)
        .map_err(err)
}
/// sprig's `toDate LAYOUT TEXT`: `TEXT` read with a Go layout.
fn to_date(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("toDate", args, 2)?;
    go_time::parse_layout(&text(&a[1]), &text(&a[0]))
        .map(time_value)
        .map_err(err)
}
fn unix_epoch(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("unixEpoch", args, 1)?;
    Ok(Value::String(time_arg(&a[0])?.as_second().to_string()))
}
/// sprig's `ago`: the time since, in whole seconds, as a Go duration.
fn ago(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("ago", args, 1)?;
    let since = go_time::now().as_second() - time_arg(&a[0])?.as_second();
    Ok(Value::String(go_time::go_duration(
        since.saturating_mul(1_000_000_000),
    )))
}
/// sprig's `duration SECONDS`.
fn duration(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("duration", args, 1)?;
    Ok(Value::String(go_time::go_duration(
        int(&a[0]).saturating_mul(1_000_000_000),
    )))
}
