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
//! `repeat`, `trunc`, `substr`, `b64enc`, `b64dec`, `list`, `dict`, `indent`, `nindent`, and
//! the date functions `now`, `date`, `dateInZone`, `htmlDate`, `toDate`, `unixEpoch`, `ago`,
//! `duration`. The engine's helpers are there too: `{{ call .time.Now }}`,
//! `{{ call .time.Parse TEXT }}`, `{{ call .strings.ToUpper|ToLower|ReplaceAll ... }}`. Any
//! other function name fails the template when it is parsed, with the function's name (Go
//! does the same for an unknown function), and only that template is left out.
//!
//! Known differences: a field of a missing value (`.a.b` where `.a` is missing) and a `range`
//! over a missing value are errors (Go renders `<no value>` and nothing); the Rollout is given
//! Go's shape first (`status`, `spec.strategy`, `spec.template.spec` present even when empty),
//! so the catalog's templates render for a Rollout without a status. Ranging over a map visits
//! keys in an unspecified order (Go sorts them);
//! Go methods on values (`(call .time.Now).Format "15:04"`) are not available: a time is the
//! text Go prints for it, and sprig's `date` formats it (`{{ call .time.Now | date "15:04" }}`);
//! `printf` follows gtmpl's implementation of Go's verbs.
//!
//! A few fields are not templates in the engine, which copies them as written: GitHub's
//! `github.pullRequestComment.commentTag` and `github.deployment.requiredContexts`
//! ([`KEPT_AS_WRITTEN`]). They are neither parsed nor rendered here either, so a comment tag
//! reading `{{.app.metadata.name}}` is that text, as it is in Argo.

use gtmpl::{Context, Template, Value};
use serde_json::Value as Json;

use crate::go_time;

mod go_helpers;
mod sprig;

/// Fields (paths in the template's tree) the engine copies without rendering.
pub const KEPT_AS_WRITTEN: &[&str] = &[
    "github.pullRequestComment.commentTag",
    "github.deployment.requiredContexts",
];

fn kept_as_written(path: &str) -> bool {
    KEPT_AS_WRITTEN.iter().any(|k| {
        path.strip_prefix(k)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('['))
    })
}

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

    /// The template's YAML tree, unrendered.
    pub fn tree(&self) -> &Json {
        &self.tree
    }

    /// Renders every string of the template with `vars` (and `.time`, `.strings`) at `now`.
    pub fn render(&self, vars: &Json, now: jiff::Timestamp) -> Result<Json, String> {
        let mut context = to_gtmpl(vars);
        if let Value::Map(map) = &mut context {
            for (name, helpers) in go_helpers::vars() {
                map.insert(name.to_owned(), helpers);
            }
        }
        go_time::at(now, || render_tree(&self.tree, &context, ""))
    }
}

fn check(tree: &Json, path: &str) -> Result<(), String> {
    if kept_as_written(path) {
        return Ok(());
    }
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
    if kept_as_written(path) {
        return Ok(tree.clone());
    }
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
    t.add_funcs(sprig::FUNCS);
    t.add_funcs(go_helpers::FUNCS);
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

#[cfg(test)]
mod tests;
