//! sprig's text helpers, as the notifications engine passes them to templates (sprig's
//! `TxtFuncMap`): the ones Argo's catalog and documentation call. Each behaves as sprig's:
//! numbers convert as `toInt64` does, strings as `fmt.Sprint`, emptiness as sprig's `empty`.

use std::collections::BTreeMap;

use base64::Engine as _;
use gtmpl::{Func, FuncError, Value};
use serde_json::Value as Json;

/// A template value as JSON (for `toJson`).
fn to_json(v: &Value) -> Json {
    match v {
        Value::NoValue | Value::Nil | Value::Function(_) => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::String(s) => Json::String(s.clone()),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Json::from(i),
            (_, Some(u), _) => Json::from(u),
            (_, _, Some(f)) => serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number),
            _ => Json::Null,
        },
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Object(map) | Value::Map(map) => Json::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        ),
    }
}

pub(super) const FUNCS: &[(&str, Func)] = &[
    ("add", add),
    ("add1", add1),
    ("sub", sub),
    ("mul", mul),
    ("div", div),
    ("mod", modulo),
    ("max", max),
    ("min", min),
    ("upper", upper),
    ("lower", lower),
    ("title", title),
    ("trim", trim),
    ("trimPrefix", trim_prefix),
    ("trimSuffix", trim_suffix),
    ("replace", replace),
    ("contains", contains),
    ("hasPrefix", has_prefix),
    ("hasSuffix", has_suffix),
    ("quote", quote),
    ("squote", squote),
    ("default", default),
    ("empty", empty),
    ("coalesce", coalesce),
    ("toString", to_string),
    ("toJson", to_json_fn),
    ("toPrettyJson", to_pretty_json),
    ("join", join),
    ("repeat", repeat),
    ("trunc", trunc),
    ("substr", substr),
    ("b64enc", b64enc),
    ("b64dec", b64dec),
    ("list", list),
    ("dict", dict),
    ("indent", indent),
    ("nindent", nindent),
];

pub(super) fn err(msg: impl Into<String>) -> FuncError {
    FuncError::Generic(msg.into())
}

/// sprig's `toInt64`: numbers, numeric strings, bools; anything else is 0.
pub(super) fn int(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .unwrap_or(0),
        Value::String(s) => s.trim().parse().unwrap_or(0),
        Value::Bool(b) => i64::from(*b),
        _ => 0,
    }
}

/// Go's `fmt.Sprint` of one value (sprig's `toString`).
pub(super) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::NoValue | Value::Nil => String::new(),
        other => other.to_string(),
    }
}

pub(super) fn args_n<'a>(
    name: &str,
    args: &'a [Value],
    n: usize,
) -> Result<&'a [Value], FuncError> {
    if args.len() == n {
        Ok(args)
    } else {
        Err(FuncError::ExactlyXArgs(name.into(), n))
    }
}

fn add(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::from(
        args.iter().map(int).fold(0i64, i64::wrapping_add),
    ))
}
fn add1(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("add1", args, 1)?;
    Ok(Value::from(int(&a[0]).wrapping_add(1)))
}
fn sub(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("sub", args, 2)?;
    Ok(Value::from(int(&a[0]).wrapping_sub(int(&a[1]))))
}
fn mul(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::from(
        args.iter().map(int).fold(1i64, i64::wrapping_mul),
    ))
}
fn div(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("div", args, 2)?;
    let d = int(&a[1]);
    if d == 0 {
        return Err(err("div: division by zero"));
    }
    Ok(Value::from(int(&a[0]).wrapping_div(d)))
}
fn modulo(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("mod", args, 2)?;
    let d = int(&a[1]);
    if d == 0 {
        return Err(err("mod: division by zero"));
    }
    Ok(Value::from(int(&a[0]).wrapping_rem(d)))
}
fn max(args: &[Value]) -> Result<Value, FuncError> {
    args.iter()
        .map(int)
        .max()
        .map(Value::from)
        .ok_or_else(|| FuncError::AtLeastXArgs("max".into(), 1))
}
fn min(args: &[Value]) -> Result<Value, FuncError> {
    args.iter()
        .map(int)
        .min()
        .map(Value::from)
        .ok_or_else(|| FuncError::AtLeastXArgs("min".into(), 1))
}
fn upper(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("upper", args, 1)?;
    Ok(Value::String(text(&a[0]).to_uppercase()))
}
fn lower(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("lower", args, 1)?;
    Ok(Value::String(text(&a[0]).to_lowercase()))
}
fn title(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("title", args, 1)?;
    let mut out = String::new();
    let mut start = true;
    for c in text(&a[0]).chars() {
        if start {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        start = c.is_whitespace();
    }
    Ok(Value::String(out))
}
fn trim(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("trim", args, 1)?;
    Ok(Value::String(text(&a[0]).trim().to_owned()))
}
fn trim_prefix(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("trimPrefix", args, 2)?;
    let (p, s) = (text(&a[0]), text(&a[1]));
    Ok(Value::String(s.strip_prefix(&p).unwrap_or(&s).to_owned()))
}
fn trim_suffix(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("trimSuffix", args, 2)?;
    let (p, s) = (text(&a[0]), text(&a[1]));
    Ok(Value::String(s.strip_suffix(&p).unwrap_or(&s).to_owned()))
}
fn replace(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("replace", args, 3)?;
    Ok(Value::String(
        text(&a[2]).replace(&text(&a[0]), &text(&a[1])),
    ))
}
fn contains(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("contains", args, 2)?;
    Ok(Value::Bool(text(&a[1]).contains(&text(&a[0]))))
}
fn has_prefix(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("hasPrefix", args, 2)?;
    Ok(Value::Bool(text(&a[1]).starts_with(&text(&a[0]))))
}
fn has_suffix(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("hasSuffix", args, 2)?;
    Ok(Value::Bool(text(&a[1]).ends_with(&text(&a[0]))))
}
fn quote(args: &[Value]) -> Result<Value, FuncError> {
    let parts: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| Json::String(text(v)).to_string())
        .collect();
    Ok(Value::String(parts.join(" ")))
}
fn squote(args: &[Value]) -> Result<Value, FuncError> {
    let parts: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::Nil | Value::NoValue))
        .map(|v| format!("'{}'", text(v)))
        .collect();
    Ok(Value::String(parts.join(" ")))
}
/// sprig's emptiness: zero, "", empty collections, nil, false.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::NoValue | Value::Nil => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) | Value::Map(m) => m.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Function(_) => false,
    }
}
fn default(args: &[Value]) -> Result<Value, FuncError> {
    match args {
        [fallback] => Ok(fallback.clone()),
        [fallback, given] => Ok(if is_empty(given) {
            fallback.clone()
        } else {
            given.clone()
        }),
        _ => Err(FuncError::ExactlyXArgs("default".into(), 2)),
    }
}
fn empty(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("empty", args, 1)?;
    Ok(Value::Bool(is_empty(&a[0])))
}
fn coalesce(args: &[Value]) -> Result<Value, FuncError> {
    Ok(args
        .iter()
        .find(|v| !is_empty(v))
        .cloned()
        .unwrap_or(Value::Nil))
}
fn to_string(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("toString", args, 1)?;
    Ok(Value::String(text(&a[0])))
}
fn to_json_fn(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("toJson", args, 1)?;
    Ok(Value::String(to_json(&a[0]).to_string()))
}
fn to_pretty_json(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("toPrettyJson", args, 1)?;
    serde_json::to_string_pretty(&to_json(&a[0]))
        .map(Value::String)
        .map_err(|e| err(e.to_string()))
}
fn join(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("join", args, 2)?;
    let sep = text(&a[0]);
    let items: Vec<String> = match &a[1] {
        Value::Array(items) => items.iter().map(text).collect(),
        other => vec![text(other)],
    };
    Ok(Value::String(items.join(&sep)))
}
fn repeat(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("repeat", args, 2)?;
    let n = usize::try_from(int(&a[0]).clamp(0, 10_000)).unwrap_or(0);
    Ok(Value::String(text(&a[1]).repeat(n)))
}
fn trunc(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("trunc", args, 2)?;
    let s: Vec<char> = text(&a[1]).chars().collect();
    let n = int(&a[0]);
    let len = s.len() as i64;
    let out: String = if n >= 0 {
        s.iter().take(n.min(len) as usize).collect()
    } else {
        s.iter().skip((len + n).max(0) as usize).collect()
    };
    Ok(Value::String(out))
}
fn substr(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("substr", args, 3)?;
    let s: Vec<char> = text(&a[2]).chars().collect();
    let len = s.len() as i64;
    let (start, end) = (int(&a[0]), int(&a[1]));
    let start = if start < 0 { 0 } else { start.min(len) };
    let end = if end < 0 || end > len { len } else { end };
    if start > end {
        return Ok(Value::String(String::new()));
    }
    Ok(Value::String(
        s[start as usize..end as usize].iter().collect(),
    ))
}
fn b64enc(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("b64enc", args, 1)?;
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(text(&a[0])),
    ))
}
fn b64dec(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("b64dec", args, 1)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text(&a[0]))
        .map_err(|e| err(e.to_string()))?;
    Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}
fn list(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::Array(args.to_vec()))
}
fn dict(args: &[Value]) -> Result<Value, FuncError> {
    Ok(Value::Map(
        args.chunks(2)
            .map(|kv| {
                (
                    text(&kv[0]),
                    kv.get(1).cloned().unwrap_or(Value::String(String::new())),
                )
            })
            .collect(),
    ))
}
fn indent(args: &[Value]) -> Result<Value, FuncError> {
    let a = args_n("indent", args, 2)?;
    let pad = " ".repeat(usize::try_from(int(&a[0]).clamp(0, 1000)).unwrap_or(0));
    let out: Vec<String> = text(&a[1])
        .split('\n')
        .map(|l| format!("{pad}{l}"))
        .collect();
    Ok(Value::String(out.join("\n")))
}
fn nindent(args: &[Value]) -> Result<Value, FuncError> {
    let indented = indent(args)?;
    Ok(Value::String(format!("\n{}", text(&indented))))
}
