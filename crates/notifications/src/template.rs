//! Notification templates: a `template.<name>` entry is a YAML document (`message`,
//! `email.subject`, `slack.attachments`, `webhook.<service>.body`, ...) whose strings are Go
//! `text/template` templates over `.rollout`, `.analysisRuns`, `.secrets`, `.recipient` and
//! `.serviceType`.
//!
//! Rendering uses the `gtmpl` crate, a Rust implementation of Go's `text/template`: actions,
//! pipelines, variables, `if`/`else`/`with`/`range` (with `$index, $value :=`), `define` and
//! `template`, comments, trimming markers, and Go's builtins (`and`, `or`, `not`, `len`,
//! `index`, `print`, `printf`, `println`, `urlquery`, `eq`, `ne`, `lt`, `le`, `gt`, `ge`,
//! `call`). A missing map key renders `<no value>` and is false, as in Go.
//!
//! Of sprig's helpers (the engine passes sprig's text functions), these are provided: `add`,
//! `add1`, `sub`, `mul`, `div`, `mod`, `max`, `min`, `upper`, `lower`, `title`, `trim`,
//! `trimPrefix`, `trimSuffix`, `replace`, `contains`, `hasPrefix`, `hasSuffix`, `quote`,
//! `squote`, `default`, `empty`, `coalesce`, `toString`, `toJson`, `toPrettyJson`, `join`,
//! `repeat`, `trunc`, `substr`, `b64enc`, `b64dec`, `list`, `dict`, `indent`, `nindent`. Any
//! other function name fails the template when it is parsed, with the function's name (Go
//! does the same for an unknown function), and only that template is left out.
//!
//! Known differences: a field of a missing value (`.a.b` where `.a` is missing) and a `range`
//! over a missing value are errors (Go renders `<no value>` and nothing); the Rollout is given
//! Go's shape first (`status`, `spec.strategy`, `spec.template.spec` present even when empty),
//! so the catalog's templates render for a Rollout without a status. Ranging over a map visits
//! keys in an unspecified order (Go sorts them);
//! Go methods on values (`.Format` on a time) are not available; `printf` follows gtmpl's
//! implementation of Go's verbs.

use std::collections::BTreeMap;

use base64::Engine as _;
use gtmpl::{Context, Func, FuncError, Template, Value};
use serde_json::Value as Json;

/// A template entry: its YAML tree, every string of which was checked to parse.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledTemplate {
    tree: Json,
}

impl CompiledTemplate {
    /// Parses a `template.<name>` value; an error names the field whose template is bad.
    pub fn parse(yaml: &str) -> Result<CompiledTemplate, String> {
        let tree: Json = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        if !tree.is_object() {
            return Err("a template must be a mapping (message, slack, webhook, ...)".into());
        }
        check(&tree, "")?;
        Ok(CompiledTemplate { tree })
    }

    /// The first line of the template's message (100 characters at most), or of its JSON when
    /// it has no message, as Argo's `template get` previews it.
    pub fn preview(&self) -> String {
        let text = match self.tree.get("message").and_then(Json::as_str) {
            Some(m) if !m.is_empty() => m.to_owned(),
            _ => self.tree.to_string(),
        };
        let first = text.split('\n').next().unwrap_or_default();
        if first.chars().count() > 100 {
            format!("{}...", first.chars().take(99).collect::<String>())
        } else {
            first.to_owned()
        }
    }

    /// Renders every string of the template with `vars`.
    pub fn render(&self, vars: &Json) -> Result<Json, String> {
        let context = to_gtmpl(vars);
        render_tree(&self.tree, &context, "")
    }
}

fn check(tree: &Json, path: &str) -> Result<(), String> {
    match tree {
        Json::String(s) => new_template(s)
            .map(drop)
            .map_err(|e| format!("{}: {e}", field(path))),
        Json::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| check(v, &join_path(path, k))),
        Json::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check(v, &format!("{path}[{i}]"))),
        _ => Ok(()),
    }
}

fn render_tree(tree: &Json, context: &Value, path: &str) -> Result<Json, String> {
    Ok(match tree {
        Json::String(s) => {
            Json::String(render(s, context).map_err(|e| format!("{}: {e}", field(path)))?)
        }
        Json::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                out.insert(k.clone(), render_tree(v, context, &join_path(path, k))?);
            }
            Json::Object(out)
        }
        Json::Array(items) => Json::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| render_tree(v, context, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

fn field(path: &str) -> &str {
    if path.is_empty() { "template" } else { path }
}

fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn new_template(text: &str) -> Result<Template, String> {
    let mut t = Template::default();
    t.add_funcs(FUNCS);
    t.parse(text).map_err(|e| e.to_string())?;
    Ok(t)
}

/// Renders one Go template string.
pub fn render(text: &str, context: &Value) -> Result<String, String> {
    if !text.contains("{{") {
        return Ok(text.to_owned());
    }
    let t = new_template(text)?;
    t.render(&Context::from(context.clone()))
        .map_err(|e| e.to_string())
}

/// A JSON document as a template value.
pub fn to_gtmpl(json: &Json) -> Value {
    match json {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(u)) => Value::from(u),
            _ => Value::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => Value::Array(items.iter().map(to_gtmpl).collect()),
        Json::Object(map) => {
            Value::Map(map.iter().map(|(k, v)| (k.clone(), to_gtmpl(v))).collect())
        }
    }
}

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

const FUNCS: &[(&str, Func)] = &[
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

fn err(msg: impl Into<String>) -> FuncError {
    FuncError::Generic(msg.into())
}

/// sprig's `toInt64`: numbers, numeric strings, bools; anything else is 0.
fn int(v: &Value) -> i64 {
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
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::NoValue | Value::Nil => String::new(),
        other => other.to_string(),
    }
}

fn args_n<'a>(name: &str, args: &'a [Value], n: usize) -> Result<&'a [Value], FuncError> {
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

#[cfg(test)]
mod tests;
