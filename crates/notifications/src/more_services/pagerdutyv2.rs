//! PagerDuty Events API v2 (`service.pagerdutyv2`: `serviceKeys`): a `trigger` event sent to
//! `POST https://events.pagerduty.com/v2/enqueue` with the integration (routing) key
//! `serviceKeys` holds for the recipient, as the engine's PagerDuty client sends it.
//!
//! The template's `pagerdutyv2` part gives the payload's `summary`, `severity` and `source`
//! (always sent), `component`, `group` and `class` (when not empty) and the event's `dedupKey`
//! (`dedup_key`) and `url` (`client_url`). The client is `ArgoCD`, as the engine sends it.
//! PagerDuty checks the values (a severity of `critical`, `error`, `warning` or `info`); the
//! engine and its client do not.
//!
//! `apiURL` (Sluice's, not the engine's, whose client always calls
//! `https://events.pagerduty.com`) points the service at another server.
//!
//! Failures: a recipient without a key and a template without a `pagerdutyv2` part fail before
//! sending, in the engine's words. Any answer but 202 Accepted fails with the client's summary
//! of PagerDuty's answer (`status`, `message`, `errors`); a 202 whose body is not JSON fails
//! too.

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::go_json;
use super::{NotificationService, SendContext, SendError};

const API_URL: &str = "https://events.pagerduty.com";

#[derive(Clone, Deserialize)]
pub struct PagerDutyV2Options {
    #[serde(
        default,
        rename = "serviceKeys",
        deserialize_with = "go_json::de_string_map"
    )]
    service_keys: BTreeMap<String, String>,
    #[serde(default, rename = "apiURL", deserialize_with = "go_json::de_string")]
    api_url: String,
}

impl fmt::Debug for PagerDutyV2Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PagerDutyV2Options")
            .field("recipients", &self.service_keys.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

pub fn parse(mut settings: Value) -> Result<PagerDutyV2Options, String> {
    go_json::fold(&mut settings, &["serviceKeys", "apiURL"]);
    super::settings(settings)
}

/// The event for `routing_key`, as the engine builds it.
fn event(content: &Value, routing_key: &str) -> Result<Value, String> {
    let Some(part) = go_json::get(content, "pagerdutyv2").filter(|p| !p.is_null()) else {
        return Err("no config found for pagerdutyv2".into());
    };
    let field = |name: &str| go_json::string(part, name).map_err(|e| format!("pagerdutyv2.{e}"));
    let mut payload = Map::new();
    for name in ["summary", "source", "severity"] {
        payload.insert(name.into(), field(name)?.into());
    }
    for name in ["component", "group", "class"] {
        let value = field(name)?;
        if !value.is_empty() {
            payload.insert(name.into(), value.into());
        }
    }
    let mut event = Map::new();
    event.insert("routing_key".into(), routing_key.into());
    event.insert("event_action".into(), "trigger".into());
    let dedup_key = field("dedupKey")?;
    if !dedup_key.is_empty() {
        event.insert("dedup_key".into(), dedup_key.into());
    }
    event.insert("client".into(), "ArgoCD".into());
    let url = field("url")?;
    if !url.is_empty() {
        event.insert("client_url".into(), url.into());
    }
    event.insert("payload".into(), Value::Object(payload));
    Ok(Value::Object(event))
}

/// The client's summary of an answer other than 202 (`EventsAPIV2Error.Error()`).
fn api_error(status: u16, body: &str) -> String {
    let object = match serde_json::from_str::<Value>(body) {
        Ok(v @ (Value::Object(_) | Value::Null)) => {
            let status = go_json::string(&v, "status");
            let message = go_json::string(&v, "message");
            let errors = go_json::strings(&v, "errors");
            match (status, message, errors) {
                (Ok(s), Ok(m), Ok(e)) => Some((s, m, e)),
                _ => None,
            }
        }
        _ => None,
    };
    let Some((answer_status, message, errors)) = object else {
        let body: String = body.chars().take(200).collect();
        return format!(
            "HTTP response with status code: {status}, JSON unmarshal object body failed: not an error object, body: {body}"
        );
    };
    let head = format!(
        "HTTP response failed with status code {status}, status: {answer_status}, message: {message}"
    );
    match errors.as_slice() {
        [] => head,
        [one] => format!("{head}: {one}"),
        [first, rest @ ..] => format!(
            "{head}: {first} (and {} more {}...)",
            rest.len(),
            if rest.len() > 1 { "errors" } else { "error" }
        ),
    }
}

impl NotificationService for PagerDutyV2Options {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let permanent =
                |e: String| SendError::permanent(format!("pagerdutyv2 '{service}': {e}"));
            let transient =
                |e: String| SendError::transient(format!("pagerdutyv2 '{service}': {e}"));
            let Some(routing_key) = self.service_keys.get(ctx.recipient) else {
                return Err(permanent(format!(
                    "no API key configured for recipient {}",
                    ctx.recipient
                )));
            };
            let body = event(ctx.content, routing_key).map_err(permanent)?;
            let base = if self.api_url.is_empty() {
                API_URL
            } else {
                self.api_url.trim_end_matches('/')
            };
            let response = ctx
                .http
                .client(false)
                .post(format!("{base}/v2/enqueue"))
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| transient(format!("request failed: {}", super::kind(&e))))?;
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            if status != 202 {
                return Err(transient(api_error(status, &text)));
            }
            serde_json::from_str::<Value>(&text)
                .map_err(|_| transient(format!("the answer (status {status}) is not JSON")))?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_event_leaves_out_what_the_engine_leaves_out() {
        let content = json!({"pagerdutyv2": {"summary": "s", "severity": "critical",
            "source": "web"}});
        assert_eq!(
            event(&content, "K").unwrap(),
            json!({"routing_key": "K", "event_action": "trigger", "client": "ArgoCD",
                "payload": {"summary": "s", "severity": "critical", "source": "web"}})
        );
        assert_eq!(
            event(&json!({"message": "m"}), "K").unwrap_err(),
            "no config found for pagerdutyv2"
        );
    }

    #[test]
    fn error_answers_are_summarised_as_the_client_does() {
        assert_eq!(
            api_error(
                400,
                r#"{"status":"invalid event","message":"Event object is invalid","errors":["Length of 'routing_key' is incorrect (should be 32 characters)"]}"#
            ),
            "HTTP response failed with status code 400, status: invalid event, message: Event object is invalid: Length of 'routing_key' is incorrect (should be 32 characters)"
        );
        assert_eq!(
            api_error(429, r#"{"status":"throttled","message":"slow down"}"#),
            "HTTP response failed with status code 429, status: throttled, message: slow down"
        );
        assert_eq!(
            api_error(503, "<html>busy</html>"),
            "HTTP response with status code: 503, JSON unmarshal object body failed: not an error object, body: <html>busy</html>"
        );
    }
}
