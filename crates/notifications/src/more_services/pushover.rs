//! Pushover (`service.pushover`: `token`): the template's `message` POSTed as a form to
//! Pushover's messages API for the recipient's user key, as the engine's Pushover client sends
//! it. The client's checks come first, with its words: an API token and a user key of 30
//! letters and digits, a message of 1 to 1,024 characters. Pushover answers `{"status":1}`;
//! anything else is a failure carrying its `errors`.
//!
//! `apiURL` (Sluice's, not the engine's, which always calls `https://api.pushover.net/1`)
//! points the service at another server.

use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use super::{NotificationService, SendContext, SendError};

const API_URL: &str = "https://api.pushover.net/1";
const MESSAGE_MAX_LENGTH: usize = 1024;

#[derive(Clone, Deserialize)]
pub struct PushoverOptions {
    #[serde(default)]
    token: String,
    #[serde(default, rename = "apiURL")]
    api_url: String,
}

impl fmt::Debug for PushoverOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushoverOptions")
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<PushoverOptions, String> {
    super::settings(settings)
}

/// Pushover's tokens and user keys: 30 letters and digits.
fn is_key(s: &str) -> bool {
    s.len() == 30 && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The client's checks, in its order and words.
fn check(token: &str, user: &str, message: &str) -> Result<(), String> {
    if token.is_empty() {
        return Err("pushover: empty API token".into());
    }
    if !is_key(token) {
        return Err("pushover: invalid API token".into());
    }
    if user.is_empty() {
        return Err("pushover: empty recipient token".into());
    }
    if !is_key(user) {
        return Err("pushover: invalid recipient token".into());
    }
    if message.is_empty() {
        return Err("pushover: message empty".into());
    }
    if message.chars().count() > MESSAGE_MAX_LENGTH {
        return Err("pushover: message too long".into());
    }
    Ok(())
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    status: i64,
    #[serde(default)]
    errors: Vec<String>,
}

impl NotificationService for PushoverOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let message = ctx
                .content
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            check(&self.token, ctx.recipient, message)
                .map_err(|e| SendError::permanent(format!("pushover '{service}': {e}")))?;
            let base = if self.api_url.is_empty() {
                API_URL
            } else {
                self.api_url.trim_end_matches('/')
            };
            let form = [
                ("token", self.token.as_str()),
                ("user", ctx.recipient),
                ("message", message),
                ("priority", "0"),
            ];
            let response = ctx
                .http
                .client(false)
                .post(format!("{base}/messages.json"))
                .form(&form)
                .send()
                .await
                .map_err(|e| {
                    SendError::transient(format!(
                        "pushover '{service}': request failed: {}",
                        super::kind(&e)
                    ))
                })?;
            let status = response.status().as_u16();
            if status >= 500 {
                return Err(SendError::transient(format!(
                    "pushover '{service}': pushover: http error (status {status})"
                )));
            }
            let answer: Answer = response.json().await.map_err(|_| {
                SendError::transient(format!(
                    "pushover '{service}': unreadable answer (status {status})"
                ))
            })?;
            if answer.status != 1 {
                return Err(SendError::transient(format!(
                    "pushover '{service}': Errors:\n{}",
                    answer.errors.join("\n")
                )));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn the_clients_checks_come_first_in_its_words() {
        let key = "uQiRzpo4DXghDmr9QzzfQu27cmVRsG";
        assert_eq!(
            check("", key, "m").unwrap_err(),
            "pushover: empty API token"
        );
        assert_eq!(
            check("short", key, "m").unwrap_err(),
            "pushover: invalid API token"
        );
        assert_eq!(
            check(key, "", "m").unwrap_err(),
            "pushover: empty recipient token"
        );
        assert_eq!(
            check(key, "a-b", "m").unwrap_err(),
            "pushover: invalid recipient token"
        );
        assert_eq!(check(key, key, "").unwrap_err(), "pushover: message empty");
        assert_eq!(
            check(key, key, &"x".repeat(1025)).unwrap_err(),
            "pushover: message too long"
        );
        assert_eq!(check(key, key, &"é".repeat(1024)), Ok(()));
    }
}
