//! Mattermost (`service.mattermost`: `apiURL`, `token`, `insecureSkipVerify`): the
//! template's `message` POSTed to `<apiURL>/api/v4/posts` for the recipient channel id, with
//! the bot token as a bearer token, as the engine sends it: `{"channel_id", "message",
//! "props": {"attachments": [...]}}`. The template's `mattermost.attachments` is a JSON array
//! (Slack's attachments); text that is not JSON is a permanent failure, as is an unset
//! `apiURL`. An answer outside 2xx is a failure carrying the server's answer.

use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{NotificationService, SendContext, SendError};

#[derive(Clone, Deserialize)]
pub struct MattermostOptions {
    #[serde(default, rename = "apiURL")]
    api_url: String,
    #[serde(default)]
    token: String,
    #[serde(default, rename = "insecureSkipVerify")]
    insecure_skip_verify: bool,
}

impl fmt::Debug for MattermostOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MattermostOptions")
            .field("api_url", &self.api_url)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<MattermostOptions, String> {
    super::settings(settings)
}

/// The attachments of the template's `mattermost.attachments`: none when it is empty.
fn attachments(content: &Value) -> Result<Value, String> {
    let text = content
        .pointer("/mattermost/attachments")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if text.is_empty() {
        return Ok(json!([]));
    }
    let parsed: Vec<Value> = serde_json::from_str(text)
        .map_err(|e| format!("failed to unmarshal attachments '{text}' : {e}"))?;
    Ok(Value::Array(parsed))
}

impl NotificationService for MattermostOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            if self.api_url.is_empty() {
                return Err(SendError::permanent(format!(
                    "mattermost '{service}': apiURL is not set"
                )));
            }
            let attachments = attachments(ctx.content)
                .map_err(|e| SendError::permanent(format!("mattermost '{service}': {e}")))?;
            let message = ctx
                .content
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let body = json!({
                "channel_id": ctx.recipient,
                "message": message,
                "props": {"attachments": attachments},
            });
            let response = ctx
                .http
                .client(self.insecure_skip_verify)
                .post(format!("{}/api/v4/posts", self.api_url))
                .bearer_auth(&self.token)
                .json(&body)
                .send()
                .await
                .map_err(|e| {
                    SendError::transient(format!(
                        "mattermost '{service}': failed to request: {}",
                        super::kind(&e)
                    ))
                })?;
            if let Some((status, answer)) = super::refusal(response).await {
                return Err(SendError::transient(format!(
                    "mattermost '{service}': request to {body} has failed with error code {status} : {answer}"
                )));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::attachments;
    use serde_json::json;

    #[test]
    fn attachments_are_a_json_array_or_nothing() {
        assert_eq!(attachments(&json!({"message": "m"})), Ok(json!([])));
        assert_eq!(
            attachments(&json!({"mattermost": {"attachments": "[{\"title\": \"web\"}]"}})),
            Ok(json!([{"title": "web"}]))
        );
        let e = attachments(&json!({"mattermost": {"attachments": "{\"title\": 1}"}})).unwrap_err();
        assert!(
            e.starts_with("failed to unmarshal attachments '{\"title\": 1}' : "),
            "{e}"
        );
    }
}
