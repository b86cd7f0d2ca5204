//! Opsgenie (`service.opsgenie`: `apiUrl`, `apiKeys`, `insecureSkipVerify`): an alert created
//! through Opsgenie's Alert API, `POST <apiUrl>/v2/alerts`, with the API key `apiKeys` holds
//! for the recipient (a team, which is also the alert's responder), as the engine's Opsgenie
//! client creates it.
//!
//! The alert's `message` is the template's `message`; the template's `opsgenie` part gives
//! `description` (required when the part is there), `priority`, `alias`, `note`, `actions`,
//! `tags`, `details`, `entity`, `user` and `visibleTo` (`type`, `id`, `name`, `username`).
//! The source is `Argo CD`, as the engine sends it.
//!
//! `apiUrl` is a host, as the client takes it (`api.opsgenie.com` when empty, or
//! `api.eu.opsgenie.com`): https, or http for a host without `api` in its name, as the client
//! decides. Sluice also takes a full base URL (with `://`) as it is.
//!
//! Failures: a recipient without an API key, a blank key, an `opsgenie` part without a
//! description and an empty message fail before sending, in the engine's and the client's
//! words. An answer with a status of 400 or more fails with the client's summary of Opsgenie's
//! error; a success whose body is not JSON fails too. The client retries 5xx and 429 answers
//! itself; Sluice makes one request and leaves retrying to its own retries of a failed send.

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::go_json;
use super::{NotificationService, SendContext, SendError};

const API_HOST: &str = "api.opsgenie.com";

#[derive(Clone, Deserialize)]
pub struct OpsgenieOptions {
    #[serde(default, rename = "apiUrl", deserialize_with = "go_json::de_string")]
    api_url: String,
    #[serde(
        default,
        rename = "apiKeys",
        deserialize_with = "go_json::de_string_map"
    )]
    api_keys: BTreeMap<String, String>,
    #[serde(default, rename = "insecureSkipVerify")]
    insecure_skip_verify: Option<bool>,
    #[serde(flatten)]
    _transport: go_json::TransportOptions,
}

impl fmt::Debug for OpsgenieOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpsgenieOptions")
            .field("recipients", &self.api_keys.keys().collect::<Vec<_>>())
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish_non_exhaustive()
    }
}

pub fn parse(mut settings: Value) -> Result<OpsgenieOptions, String> {
    go_json::fold(&mut settings, &["apiUrl", "apiKeys", "insecureSkipVerify"]);
    go_json::fold(&mut settings, &go_json::TRANSPORT_FIELDS);
    super::settings(settings)
}

/// Where alerts are created: the client's `https://<host>/v2/alerts`, http for a host
/// without `api` in its name.
fn alerts_url(api_url: &str) -> String {
    let host = if api_url.is_empty() {
        API_HOST
    } else {
        api_url
    };
    if host.contains("://") {
        return format!("{}/v2/alerts", host.trim_end_matches('/'));
    }
    let scheme = if host.contains("api") {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{host}/v2/alerts")
}

/// The alert for `recipient` from the rendered templates, or why it cannot be sent.
fn alert(content: &Value, recipient: &str) -> Result<Value, String> {
    let mut body = Map::new();
    let message = go_json::string(content, "message")?;
    if let Some(part) = go_json::get(content, "opsgenie").filter(|p| !p.is_null()) {
        let field = |name: &str| go_json::string(part, name).map_err(|e| format!("opsgenie.{e}"));
        let description = field("description")?;
        if description.is_empty() {
            return Err("opsgenie notification description is missing".into());
        }
        body.insert("description".into(), description.into());
        for name in ["alias", "note", "entity", "user", "priority"] {
            let value = field(name)?;
            if !value.is_empty() {
                body.insert(name.into(), value.into());
            }
        }
        for name in ["actions", "tags"] {
            let list = go_json::strings(part, name).map_err(|e| format!("opsgenie.{e}"))?;
            if !list.is_empty() {
                body.insert(name.into(), list.into());
            }
        }
        let details = go_json::string_map(part, "details").map_err(|e| format!("opsgenie.{e}"))?;
        if !details.is_empty() {
            body.insert("details".into(), json!(details));
        }
        let visible_to = visible_to(part)?;
        if !visible_to.is_empty() {
            body.insert("visibleTo".into(), visible_to.into());
        }
    }
    // The client's own check, made before any request.
    if message.is_empty() {
        return Err("message can not be empty".into());
    }
    body.insert("message".into(), message.into());
    body.insert(
        "responders".into(),
        json!([responder("team", "", recipient, "")]),
    );
    body.insert("source".into(), "Argo CD".into());
    Ok(Value::Object(body))
}

/// A responder as the client encodes it: its `type` and `username` tags carry a space before
/// `omitempty`, which Go does not read as the option, so both are always sent.
fn responder(type_: &str, name: &str, id: &str, username: &str) -> Value {
    let mut r = Map::new();
    r.insert("type".into(), type_.into());
    if !name.is_empty() {
        r.insert("name".into(), name.into());
    }
    if !id.is_empty() {
        r.insert("id".into(), id.into());
    }
    r.insert("username".into(), username.into());
    Value::Object(r)
}

fn visible_to(part: &Value) -> Result<Vec<Value>, String> {
    const WRONG: &str = "opsgenie.visibleTo has the wrong type";
    let items = match go_json::get(part, "visibleTo") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(WRONG.into()),
    };
    items
        .iter()
        .map(|item| {
            if !item.is_object() && !item.is_null() {
                return Err(WRONG.to_owned());
            }
            let field = |name: &str| go_json::string(item, name).map_err(|_| WRONG.to_owned());
            Ok(responder(
                &field("type")?,
                &field("name")?,
                &field("id")?,
                &field("username")?,
            ))
        })
        .collect()
}

/// The client's summary of an error answer (`ApiError.Error()`).
fn api_error(status: u16, error_type: &str, body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = go_json::string(&v, "message").unwrap_or_default();
    let took = go_json::get(&v, "took")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let request_id = go_json::string(&v, "requestId").unwrap_or_default();
    let mut text = format!(
        "Error occurred with Status code: {status}, Message: {message}, Took: {:.6}, RequestId: {request_id}",
        took as f32
    );
    if !error_type.is_empty() {
        text.push_str(&format!(", Error Header: {error_type}"));
    }
    if let Ok(errors) = go_json::string_map(&v, "errors")
        && go_json::get(&v, "errors").is_some_and(Value::is_object)
    {
        let pairs: Vec<String> = errors.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        text.push_str(&format!(", Error Detail: map[{}]", pairs.join(" ")));
    }
    text
}

impl NotificationService for OpsgenieOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let permanent = |e: String| SendError::permanent(format!("opsgenie '{service}': {e}"));
            let transient = |e: String| SendError::transient(format!("opsgenie '{service}': {e}"));
            let Some(key) = self.api_keys.get(ctx.recipient) else {
                return Err(permanent(format!(
                    "no API key configured for recipient {}",
                    ctx.recipient
                )));
            };
            // The engine checks the template part before the client checks the key.
            let body = alert(ctx.content, ctx.recipient).map_err(permanent)?;
            if key.is_empty() {
                return Err(permanent("API key cannot be blank.".into()));
            }
            let response = ctx
                .http
                .client(self.insecure_skip_verify.unwrap_or(false))
                .post(alerts_url(&self.api_url))
                .header("Content-Type", "application/json; charset=utf-8")
                .header("Accept", "application/json")
                .header("Authorization", format!("GenieKey {key}"))
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| transient(format!("request failed: {}", super::kind(&e))))?;
            let status = response.status().as_u16();
            let error_type = response
                .headers()
                .get("X-Opsgenie-Errortype")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let text = response.text().await.unwrap_or_default();
            if status >= 400 {
                return Err(transient(api_error(status, &error_type, &text)));
            }
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(_) | Value::Null) => Ok(()),
                Ok(_) => Err(transient(
                    "Response could not be parsed, not a JSON object".into(),
                )),
                Err(e) => Err(transient(format!("Response could not be parsed, {e}"))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_api_url_is_a_host_as_the_client_takes_it() {
        assert_eq!(alerts_url(""), "https://api.opsgenie.com/v2/alerts");
        assert_eq!(
            alerts_url("api.eu.opsgenie.com"),
            "https://api.eu.opsgenie.com/v2/alerts"
        );
        assert_eq!(
            alerts_url("127.0.0.1:8080"),
            "http://127.0.0.1:8080/v2/alerts"
        );
        assert_eq!(
            alerts_url("https://og.example.com/"),
            "https://og.example.com/v2/alerts"
        );
    }

    #[test]
    fn the_part_is_checked_before_the_message() {
        let none = json!({"message": ""});
        assert_eq!(alert(&none, "t").unwrap_err(), "message can not be empty");
        let no_description = json!({"message": "m", "opsgenie": {"priority": "P1"}});
        assert_eq!(
            alert(&no_description, "t").unwrap_err(),
            "opsgenie notification description is missing"
        );
        let wrong = json!({"message": "m", "opsgenie": {"description": "d", "tags": "x"}});
        assert_eq!(
            alert(&wrong, "t").unwrap_err(),
            "opsgenie.tags has the wrong type"
        );
    }

    #[test]
    fn an_error_answer_is_summarised_as_the_client_does() {
        let body = r#"{"message":"Key format is not valid!","took":0.302,"requestId":"r1","errors":{"b":"2","a":"1"}}"#;
        assert_eq!(
            api_error(422, "InvalidKey", body),
            "Error occurred with Status code: 422, Message: Key format is not valid!, Took: 0.302000, RequestId: r1, Error Header: InvalidKey, Error Detail: map[a:1 b:2]"
        );
        assert_eq!(
            api_error(502, "", "<html>"),
            "Error occurred with Status code: 502, Message: , Took: 0.000000, RequestId: "
        );
    }
}
