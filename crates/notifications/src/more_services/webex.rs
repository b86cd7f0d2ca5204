//! Webex (`service.webex`: `token`, `apiURL`, `insecureSkipVerify`): the template's `message`
//! POSTed as `markdown` to Webex's messages API (`<apiURL>/v1/messages`, apiURL
//! `https://webexapis.com` when unset, as the engine's) with the bot's token as a bearer token.
//! A recipient that looks like an email address (`^\S+@\S+\.\S+$`) is sent as
//! `toPersonEmail`, anything else as `roomId`.
//!
//! Any answer but 200 is a failure carrying Webex's answer, in the engine's words. A service
//! without a token is a permanent failure (the engine would send it and be refused).

use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{NotificationService, SendContext, SendError};

const API_URL: &str = "https://webexapis.com";

#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebexOptions {
    #[serde(default)]
    token: String,
    #[serde(default, rename = "apiURL")]
    api_url: String,
    #[serde(default)]
    insecure_skip_verify: bool,
}

impl fmt::Debug for WebexOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebexOptions")
            .field("api_url", &shown(&self.messages_url()))
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<WebexOptions, String> {
    super::settings(settings)
}

impl WebexOptions {
    /// The engine trims one trailing `/` from `apiURL`.
    fn messages_url(&self) -> String {
        let base = if self.api_url.is_empty() {
            API_URL
        } else {
            self.api_url.strip_suffix('/').unwrap_or(&self.api_url)
        };
        format!("{base}/v1/messages")
    }
}

/// A URL as messages show it: without user information or query, which could carry
/// credentials.
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "the configured apiURL".into(),
    }
}

/// The engine's `validEmail`, `^\S+@\S+\.\S+$`, where `\S` is anything but Go's ASCII
/// whitespace (tab, newline, form feed, carriage return, space).
fn is_email(s: &str) -> bool {
    if s.bytes()
        .any(|b| matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' '))
    {
        return false;
    }
    let Some(at) = s.find('@').filter(|&at| at > 0) else {
        return false;
    };
    // A dot with something before it (after the `@`) and something after it.
    s.bytes()
        .enumerate()
        .any(|(i, b)| b == b'.' && i >= at + 2 && i + 1 < s.len())
}

impl NotificationService for WebexOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            if self.token.is_empty() {
                return Err(SendError::permanent(format!(
                    "webex '{service}': no token is configured"
                )));
            }
            let url = self.messages_url();
            let mut body = Map::new();
            if is_email(ctx.recipient) {
                body.insert("toPersonEmail".into(), json!(ctx.recipient));
            } else if !ctx.recipient.is_empty() {
                body.insert("roomId".into(), json!(ctx.recipient));
            }
            let message = ctx.content.get("message").and_then(Value::as_str);
            if let Some(markdown) = message.filter(|m| !m.is_empty()) {
                body.insert("markdown".into(), json!(markdown));
            }
            let response = ctx
                .http
                .client(self.insecure_skip_verify)
                .post(&url)
                .bearer_auth(&self.token)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(Value::Object(body).to_string())
                .send()
                .await
                .map_err(|e| {
                    SendError::transient(format!(
                        "webex '{service}': request to {} failed: {}",
                        shown(&url),
                        super::kind(&e)
                    ))
                })?;
            let status = response.status().as_u16();
            if status == 200 {
                return Ok(());
            }
            let answer = response.text().await.unwrap_or_default();
            let answer: String = answer.chars().take(500).collect();
            Err(SendError::transient(format!(
                "webex '{service}': request to {} has failed with error code {status} : {answer}",
                shown(&url)
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{is_email, shown};

    #[test]
    fn emails_as_the_engines_pattern_reads_them() {
        let yes = [
            "a@b.c",
            "ops@example.com",
            "a@b.c.",
            "x@@y.z",
            "é@ü.ö",
            "a@b\u{a0}c.d",
            "a@b\u{b}c.d",
            "a@.b.c",
        ];
        for yes in yes {
            assert!(is_email(yes), "{yes}");
        }
        for no in [
            "",
            "Y2lzY29zcGFyazovL3VzL1JPT00v",
            "@b.c",
            "a@.c",
            "a@bc.",
            "a@b",
            "a b@c.d",
            "a@b.c\n",
            "a.b@c",
        ] {
            assert!(!is_email(no), "{no:?}");
        }
    }

    #[test]
    fn urls_are_shown_without_credentials() {
        assert_eq!(
            shown("https://user:pw@proxy.local/webex/v1/messages?key=k"),
            "https://proxy.local/webex/v1/messages"
        );
    }
}
