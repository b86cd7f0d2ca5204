//! PagerDuty (`service.pagerduty`: `token`, `from`, `serviceId`): an incident created through
//! PagerDuty's REST API (`POST https://api.pagerduty.com/incidents`, `Authorization: Token
//! token=<token>`, `From: <from>`) on the service whose ID is the recipient, as the engine's
//! PagerDuty client creates it.
//!
//! The template's `pagerduty` part gives the incident's `title`, `body` (its details),
//! `urgency` and `priorityId` (the documentation's `priorityID`: the engine matches field
//! names in any case). `serviceId` is read but, as in the engine, not used: the recipient is
//! the service.
//!
//! `apiURL` (Sluice's, not the engine's, whose client always calls `https://api.pagerduty.com`)
//! points the service at another server.
//!
//! Failures: a template without a `pagerduty` part (the engine crashes on it) and an empty
//! `token` (the engine sends it and PagerDuty refuses it) fail before sending. An answer
//! outside 2xx fails with the client's summary of PagerDuty's error object; a success whose
//! body is not JSON fails too.

use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::go_json;
use super::{NotificationService, SendContext, SendError};

const API_URL: &str = "https://api.pagerduty.com";

#[derive(Clone, Deserialize)]
pub struct PagerDutyOptions {
    #[serde(default, deserialize_with = "go_json::de_string")]
    token: String,
    #[serde(default, deserialize_with = "go_json::de_string")]
    from: String,
    #[serde(default, rename = "serviceId", deserialize_with = "go_json::de_string")]
    _service_id: String,
    #[serde(default, rename = "apiURL", deserialize_with = "go_json::de_string")]
    api_url: String,
}

impl fmt::Debug for PagerDutyOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PagerDutyOptions")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

pub fn parse(mut settings: Value) -> Result<PagerDutyOptions, String> {
    go_json::fold(&mut settings, &["token", "from", "serviceId", "apiURL"]);
    super::settings(settings)
}

/// The incident for the service `recipient`, as the engine fills the client's options.
fn incident(content: &Value, recipient: &str) -> Result<Value, String> {
    let Some(part) = go_json::get(content, "pagerduty").filter(|p| !p.is_null()) else {
        return Err("no config found for pagerduty".into());
    };
    let field = |name: &str| go_json::string(part, name).map_err(|e| format!("pagerduty.{e}"));
    let mut priority = Map::new();
    let priority_id = field("priorityId")?;
    if !priority_id.is_empty() {
        priority.insert("id".into(), priority_id.into());
    }
    priority.insert("type".into(), "priority".into());
    // The engine's details type, tab included: it is what PagerDuty has been accepting.
    let mut details = Map::new();
    details.insert("type".into(), "incident_details\t".into());
    let body = field("body")?;
    if !body.is_empty() {
        details.insert("details".into(), body.into());
    }
    let mut incident = Map::new();
    incident.insert("type".into(), "incident".into());
    incident.insert("title".into(), field("title")?.into());
    incident.insert(
        "service".into(),
        json!({"id": recipient, "type": "service_reference"}),
    );
    incident.insert("priority".into(), Value::Object(priority));
    let urgency = field("urgency")?;
    if !urgency.is_empty() {
        incident.insert("urgency".into(), urgency.into());
    }
    incident.insert("body".into(), Value::Object(details));
    Ok(json!({ "incident": incident }))
}

/// The client's summary of an answer outside 2xx (`APIError.Error()`).
fn api_error(status: u16, content_type: &str, body: &str) -> String {
    if !content_type.starts_with("application/json") {
        return format!(
            "HTTP response with status code {status} does not contain Content-Type: application/json"
        );
    }
    let decode_failed = |why: &str| {
        format!("HTTP response with status code {status}, JSON error object decode failed: {why}")
    };
    let doc: Value = match serde_json::from_str(body) {
        Ok(doc @ Value::Object(_)) => doc,
        Ok(_) => return decode_failed("not an object"),
        Err(e) => return decode_failed(&e.to_string()),
    };
    let Some(error) = doc.get("error") else {
        return format!(
            "HTTP response failed with status code {status} and no JSON error object was present"
        );
    };
    let (message, code, errors) = match error {
        // A list of texts is an error too (the client's fallback for what the API has sent).
        Value::Array(_) => match go_json::strings(&json!({ "e": error }), "e") {
            Ok(errors) => ("none".to_owned(), 0, errors),
            Err(_) => return decode_failed("errors are not texts"),
        },
        Value::Object(_) | Value::Null => {
            let code = match error.get("code") {
                None | Some(Value::Null) => 0,
                Some(c) => match c.as_i64() {
                    Some(c) => c,
                    None => return decode_failed("code is not a number"),
                },
            };
            let message = go_json::string(error, "message").unwrap_or_default();
            // `errors` may be one text instead of a list.
            let errors = match error.get("errors") {
                Some(Value::String(s)) => vec![s.clone()],
                _ => go_json::strings(error, "errors").unwrap_or_default(),
            };
            (message, code, errors)
        }
        _ => return decode_failed("not an error object"),
    };
    let head = format!(
        "HTTP response failed with status code {status}, message: {message} (code: {code})"
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

impl NotificationService for PagerDutyOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let permanent = |e: String| SendError::permanent(format!("pagerduty '{service}': {e}"));
            let transient = |e: String| SendError::transient(format!("pagerduty '{service}': {e}"));
            let body = incident(ctx.content, ctx.recipient).map_err(permanent)?;
            if self.token.is_empty() {
                return Err(permanent("no token configured".into()));
            }
            let base = if self.api_url.is_empty() {
                API_URL
            } else {
                self.api_url.trim_end_matches('/')
            };
            let response = ctx
                .http
                .client(false)
                .post(format!("{base}/incidents"))
                .header("Accept", "application/vnd.pagerduty+json;version=2")
                .header("Authorization", format!("Token token={}", self.token))
                .header("From", self.from.as_str())
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| {
                    transient(format!(
                        "error calling the API endpoint: {}",
                        super::kind(&e)
                    ))
                })?;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("Content-Type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let text = response.text().await.unwrap_or_default();
            if !(200..=299).contains(&status) {
                return Err(transient(api_error(status, &content_type, &text)));
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
    fn the_incident_is_the_clients_body() {
        let content = json!({"pagerduty": {"title": "t", "body": "b", "urgency": "high",
            "priorityID": "P1"}});
        assert_eq!(
            incident(&content, "PSVC").unwrap(),
            json!({"incident": {"type": "incident", "title": "t",
                "service": {"id": "PSVC", "type": "service_reference"},
                "priority": {"id": "P1", "type": "priority"}, "urgency": "high",
                "body": {"type": "incident_details\t", "details": "b"}}})
        );
        let bare = incident(&json!({"pagerduty": {"title": "t"}}), "PSVC").unwrap();
        assert_eq!(bare["incident"]["priority"], json!({"type": "priority"}));
        assert_eq!(
            bare["incident"]["body"],
            json!({"type": "incident_details\t"})
        );
        assert!(bare["incident"].get("urgency").is_none());
        assert_eq!(
            incident(&json!({"message": "m"}), "PSVC").unwrap_err(),
            "no config found for pagerduty"
        );
    }

    #[test]
    fn error_answers_are_summarised_as_the_client_does() {
        let json_ct = "application/json; charset=utf-8";
        assert_eq!(
            api_error(502, "text/html", "<html>"),
            "HTTP response with status code 502 does not contain Content-Type: application/json"
        );
        assert_eq!(
            api_error(
                400,
                json_ct,
                r#"{"error":{"message":"Invalid Input Provided","code":2001,"errors":["Service not found.","Title missing.","x"]}}"#
            ),
            "HTTP response failed with status code 400, message: Invalid Input Provided (code: 2001): Service not found. (and 2 more errors...)"
        );
        assert_eq!(
            api_error(
                400,
                json_ct,
                r#"{"error":{"message":"m","code":1,"errors":"one"}}"#
            ),
            "HTTP response failed with status code 400, message: m (code: 1): one"
        );
        assert_eq!(
            api_error(
                401,
                json_ct,
                r#"{"error":{"message":"Unauthorized","code":2006}}"#
            ),
            "HTTP response failed with status code 401, message: Unauthorized (code: 2006)"
        );
        assert_eq!(
            api_error(404, json_ct, r#"{"x":1}"#),
            "HTTP response failed with status code 404 and no JSON error object was present"
        );
        assert_eq!(
            api_error(400, json_ct, r#"{"error":["a","b"]}"#),
            "HTTP response failed with status code 400, message: none (code: 0): a (and 1 more error...)"
        );
        assert!(api_error(400, json_ct, "{").contains("JSON error object decode failed"));
    }
}
