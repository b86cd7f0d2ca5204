//! Microsoft Teams Workflows (`service.teams-workflows`: `recipientUrls`,
//! `insecureSkipVerify`): an Adaptive Card in a `message` envelope POSTed to the recipient's
//! Workflows (Power Automate) webhook, the replacement for the retired Office 365 connectors of
//! [`teams`](super::teams).
//!
//! The template's `teams-workflows.adaptiveCard`, when set, is the card as written (checked to
//! be JSON, not rebuilt, so any Adaptive Card element goes through). Otherwise the card is
//! built as the engine builds it from `title` (a large bold TextBlock coloured by
//! `themeColor`), `text` (else the template's `message`), `facts` (a FactSet), the facts of each
//! of `sections`, and the `OpenUri` entries of `potentialAction` (as `Action.OpenUrl`).
//! `summary` and `template` are read by the engine but never sent, so not here either.
//!
//! The webhook URL is checked first, as the engine checks it (HTTPS unless on the local host,
//! and one of the Workflows hosts or a `/powerautomate/` path): a URL that fails, an unknown
//! recipient or a field that is not JSON is a permanent failure. Any status outside 2xx is a
//! failure carrying the answer. Messages never quote the URL, whose signature is its secret.

mod go_url;

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{NotificationService, SendContext, SendError};

#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamsWorkflowsOptions {
    #[serde(default)]
    recipient_urls: BTreeMap<String, String>,
    #[serde(default)]
    insecure_skip_verify: bool,
}

impl fmt::Debug for TeamsWorkflowsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TeamsWorkflowsOptions")
            .field(
                "recipients",
                &self.recipient_urls.keys().collect::<Vec<_>>(),
            )
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<TeamsWorkflowsOptions, String> {
    super::settings(settings)
}

impl NotificationService for TeamsWorkflowsOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let (service, recipient) = (ctx.service, ctx.recipient);
            let fail =
                |m: String| SendError::permanent(format!("teams-workflows '{service}': {m}"));
            let url = self.recipient_urls.get(recipient).ok_or_else(|| {
                fail(format!(
                    "no teams-workflows webhook configured for recipient {recipient}"
                ))
            })?;
            let invalid = |e: String| {
                fail(format!(
                    "invalid webhook URL for recipient {recipient}: {e}"
                ))
            };
            go_url::validate(url).map_err(invalid)?;
            let url = reqwest::Url::parse(url)
                .map_err(|_| invalid("webhook URL cannot be used for a request".into()))?;
            let body = body(ctx.content).map_err(|e| {
                fail(format!(
                    "failed to generate message payload for teams-workflows: {e}"
                ))
            })?;
            let response = ctx
                .http
                .client(self.insecure_skip_verify)
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| {
                    SendError::transient(format!(
                        "teams-workflows '{service}': failed to post message to teams-workflows webhook: {}",
                        super::kind(&e)
                    ))
                })?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            let answer = response.text().await.unwrap_or_default();
            let details = if answer.is_empty() {
                "no error details provided".to_owned()
            } else {
                answer.chars().take(200).collect()
            };
            Err(SendError::transient(format!(
                "teams-workflows '{service}': teams workflows webhook post error (status {}): {details}",
                status.as_u16()
            )))
        })
    }
}

const CARD_CONTENT_TYPE: &str = "application/vnd.microsoft.card.adaptive";

/// The request's body: the `message` envelope around the template's own card or the card
/// built from its fields.
fn body(content: &Value) -> Result<String, String> {
    let part = content.get("teams-workflows");
    let field = |k: &str| {
        part.and_then(|p| p.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let own = field("adaptiveCard");
    if !own.is_empty() {
        let own = own.trim();
        serde_json::from_str::<Value>(own)
            .map_err(|e| format!("teams-workflows adaptiveCard unmarshalling error: {e}"))?;
        // Spliced in as written (it was just checked to be one JSON value), so that its keys
        // keep their order and nothing of it is lost to a round trip.
        return Ok(format!(
            r#"{{"type":"message","attachments":[{{"contentType":"{CARD_CONTENT_TYPE}","content":{own}}}]}}"#
        ));
    }
    let message = content
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = Some(field("text"))
        .filter(|t| !t.is_empty())
        .unwrap_or(message);
    let sections = objects(field("sections"), "sections")?;
    let facts = objects(field("facts"), "facts")?;
    let actions = objects(field("potentialAction"), "potential action")?;
    let card = card(
        field("title"),
        field("themeColor"),
        text,
        &facts,
        &sections,
        &actions,
    );
    Ok(json!({
        "type": "message",
        "attachments": [{"contentType": CARD_CONTENT_TYPE, "content": card}],
    })
    .to_string())
}

/// A field holding a JSON list of objects (`[]map[string]any` in the engine): its objects, a
/// `null` entry being an empty one.
fn objects(raw: &str, what: &str) -> Result<Vec<Map<String, Value>>, String> {
    if raw.is_empty() {
        return Ok(Vec::new());
    }
    let error = |reason: String| format!("teams-workflows {what} unmarshalling error: {reason}");
    let items = match serde_json::from_str::<Value>(raw).map_err(|e| error(e.to_string()))? {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(error("not a JSON list".into())),
    };
    items
        .into_iter()
        .map(|item| match item {
            Value::Object(map) => Ok(map),
            Value::Null => Ok(Map::new()),
            _ => Err(error("an entry of the list is not a JSON object".into())),
        })
        .collect()
}

/// The engine's `buildAdaptiveCard`.
fn card(
    title: &str,
    color: &str,
    text: &str,
    facts: &[Map<String, Value>],
    sections: &[Map<String, Value>],
    actions: &[Map<String, Value>],
) -> Value {
    let mut body = Vec::new();
    if !title.is_empty() {
        let mut block = Map::new();
        block.insert("type".into(), json!("TextBlock"));
        block.insert("text".into(), json!(title));
        block.insert("size".into(), json!("Large"));
        block.insert("weight".into(), json!("Bolder"));
        if !color.is_empty() {
            block.insert("color".into(), json!(color));
        }
        block.insert("wrap".into(), json!(true));
        body.push(Value::Object(block));
    }
    if !text.is_empty() {
        body.push(json!({"type": "TextBlock", "text": text, "wrap": true}));
    }
    body.extend(fact_set(facts.iter()));
    for section in sections {
        if let Some(Value::Array(facts)) = section.get("facts") {
            body.extend(fact_set(facts.iter().filter_map(Value::as_object)));
        }
    }
    let mut card = Map::new();
    card.insert("type".into(), json!("AdaptiveCard"));
    card.insert("version".into(), json!("1.4"));
    card.insert("body".into(), Value::Array(body));
    let actions: Vec<Value> = actions.iter().filter_map(open_url).collect();
    if !actions.is_empty() {
        card.insert("actions".into(), Value::Array(actions));
    }
    Value::Object(card)
}

/// A FactSet of the facts with a string `name` (their `value` printed as Go's `%v` prints
/// it), or none when no fact has one.
fn fact_set<'a>(facts: impl Iterator<Item = &'a Map<String, Value>>) -> Option<Value> {
    let facts: Vec<Value> = facts
        .filter_map(|fact| {
            let name = fact.get("name")?.as_str()?;
            let value = match fact.get("value") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => go_v(v),
                None => String::new(),
            };
            Some(json!({"title": name, "value": value}))
        })
        .collect();
    (!facts.is_empty()).then(|| json!({"type": "FactSet", "facts": facts}))
}

/// An `OpenUri` action with a URL in its first target, as an `Action.OpenUrl`.
fn open_url(action: &Map<String, Value>) -> Option<Value> {
    if action.get("@type")?.as_str()? != "OpenUri" {
        return None;
    }
    let url = action
        .get("targets")?
        .as_array()?
        .first()?
        .get("uri")?
        .as_str()?;
    if url.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("type".into(), json!("Action.OpenUrl"));
    if let Some(name) = action.get("name").and_then(Value::as_str)
        && !name.is_empty()
    {
        out.insert("title".into(), json!(name));
    }
    out.insert("url".into(), json!(url));
    Some(Value::Object(out))
}

/// A decoded JSON value as Go's `fmt` `%v` prints it (numbers are `float64` there).
fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_float(n.as_f64().unwrap_or_default()),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_v).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_v(v)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// `%v` of a float64: the shortest digits that read back as `f`, in exponent form when the
/// exponent is below -4 or at least 6 (`1e+06`, `1.5e-05`), else plain (`42`, `0.25`).
fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Rust's `{:e}` gives the same shortest digits: `d.ddde<exp>`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = point as usize;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

#[cfg(test)]
mod tests;
