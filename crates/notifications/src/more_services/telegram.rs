//! Telegram (`service.telegram`: `token`): the template's `message` sent by the bot with the
//! Bot API's `sendMessage` in Markdown, a form POSTed to `<apiURL>/bot<token>/sendMessage`.
//!
//! The recipient is read as the engine reads it: one beginning with `-` is a chat id
//! (`-1001234567890`, a group's or private channel's), optionally followed by `|<thread id>`
//! for a topic of that chat; anything else is a public channel's username, which the engine
//! prefixes with `@` whatever it is: `@name` becomes `@@name`, a positive numeric id `@12345`,
//! and `name|5` the username `@name|5`, so that these reach no chat, there as here. A chat or
//! thread id that is not a number is a permanent failure in Go's words.
//!
//! Telegram answers `{"ok": true, ...}`; anything else is a failure carrying its
//! `description` (`Bad Request: chat not found`), in the engine's words.
//!
//! `apiURL` (Sluice's, not the engine's, whose client always calls `https://api.telegram.org`)
//! points the service at another server, a Bot API server of one's own for one. The token is
//! part of every request's URL, so no message ever shows that URL.

use std::fmt;
use std::num::IntErrorKind;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use super::{NotificationService, SendContext, SendError};

const API_URL: &str = "https://api.telegram.org";

#[derive(Clone, Default, Deserialize)]
pub struct TelegramOptions {
    #[serde(default)]
    token: String,
    #[serde(default, rename = "apiURL")]
    api_url: String,
}

impl fmt::Debug for TelegramOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelegramOptions")
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<TelegramOptions, String> {
    super::settings(settings)
}

/// Go's `strconv` error for `what` (`ParseInt`, `Atoi`) of `s`.
fn go_parse_error(what: &str, s: &str, kind: &IntErrorKind) -> String {
    let reason = match kind {
        IntErrorKind::PosOverflow | IntErrorKind::NegOverflow => "value out of range",
        _ => "invalid syntax",
    };
    format!("strconv.{what}: parsing {s:?}: {reason}")
}

/// The form of `sendMessage` for `recipient`: the engine's `buildTelegramMessageOptions`,
/// with the parameters its client sends for such a message.
fn form(recipient: &str, text: &str) -> Result<Vec<(&'static str, String)>, String> {
    let mut form = Vec::new();
    if recipient.starts_with('-') {
        let mut parts = recipient.split('|');
        let chat = parts.next().unwrap_or_default();
        let chat_id: i64 = chat
            .parse()
            .map_err(|e: std::num::ParseIntError| go_parse_error("ParseInt", chat, e.kind()))?;
        let thread = match parts.next() {
            Some(t) => t
                .parse::<i64>()
                .map_err(|e| go_parse_error("Atoi", t, e.kind()))?,
            None => 0,
        };
        // The client leaves a zero chat id (`-0`) or thread id out.
        if chat_id != 0 {
            form.push(("chat_id", chat_id.to_string()));
        }
        if thread != 0 {
            form.push(("message_thread_id", thread.to_string()));
        }
    } else {
        form.push(("chat_id", format!("@{recipient}")));
    }
    // The client sends these empty values with every message; Telegram takes them as absent,
    // and they are sent here too so that Telegram gets the very form it gets from Argo.
    form.push(("business_connection_id", String::new()));
    form.push(("reply_parameters", r#"{"message_id":0}"#.into()));
    if !text.is_empty() {
        form.push(("text", text.to_owned()));
    }
    form.push(("parse_mode", "Markdown".into()));
    form.push(("entities", "null".into()));
    form.push(("link_preview_options", "{}".into()));
    Ok(form)
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    ok: bool,
    #[serde(default)]
    description: String,
}

impl NotificationService for TelegramOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let permanent = |m: String| SendError::permanent(format!("telegram '{service}': {m}"));
            let transient = |m: String| SendError::transient(format!("telegram '{service}': {m}"));
            if self.token.is_empty() {
                return Err(permanent("no token is configured".into()));
            }
            let text = ctx
                .content
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let form = form(ctx.recipient, text).map_err(permanent)?;
            let base = if self.api_url.is_empty() {
                API_URL
            } else {
                self.api_url.trim_end_matches('/')
            };
            let url = reqwest::Url::parse(&format!("{base}/bot{}/sendMessage", self.token))
                .map_err(|_| permanent("the API URL and token make no URL".into()))?;
            let response = ctx
                .http
                .client(false)
                .post(url)
                .form(&form)
                .send()
                .await
                .map_err(|e| transient(format!("request failed: {}", super::kind(&e))))?;
            let status = response.status().as_u16();
            let answer: Answer = response
                .json()
                .await
                .map_err(|_| transient(format!("unreadable answer (status {status})")))?;
            if answer.ok {
                return Ok(());
            }
            if answer.description.is_empty() {
                return Err(transient(format!("request refused (status {status})")));
            }
            Err(transient(answer.description))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::form;

    fn chat(recipient: &str) -> Result<Vec<(&'static str, String)>, String> {
        form(recipient, "m").map(|f| {
            f.into_iter()
                .filter(|(k, _)| *k == "chat_id" || *k == "message_thread_id")
                .collect()
        })
    }

    #[test]
    fn recipients_are_read_as_the_engine_reads_them() {
        let pairs = |p: &[(&'static str, &str)]| -> Result<Vec<(&'static str, String)>, String> {
            Ok(p.iter().map(|(k, v)| (*k, v.to_string())).collect())
        };
        assert_eq!(
            chat("-1000000000000"),
            pairs(&[("chat_id", "-1000000000000")])
        );
        assert_eq!(
            chat("-1000000000000|2"),
            pairs(&[("chat_id", "-1000000000000"), ("message_thread_id", "2")])
        );
        assert_eq!(chat("channel"), pairs(&[("chat_id", "@channel")]));
        assert_eq!(chat("@channel"), pairs(&[("chat_id", "@@channel")]));
        assert_eq!(chat("12345"), pairs(&[("chat_id", "@12345")]));
        assert_eq!(chat("name|5"), pairs(&[("chat_id", "@name|5")]));
        assert_eq!(chat("-0"), pairs(&[]));
        assert_eq!(chat("-1|0"), pairs(&[("chat_id", "-1")]));
        assert_eq!(
            chat("-1|2|3"),
            pairs(&[("chat_id", "-1"), ("message_thread_id", "2")])
        );
        assert_eq!(
            chat("-1|+7"),
            pairs(&[("chat_id", "-1"), ("message_thread_id", "7")])
        );
        assert_eq!(
            chat("-1|-7"),
            pairs(&[("chat_id", "-1"), ("message_thread_id", "-7")])
        );
    }

    #[test]
    fn bad_ids_are_refused_in_gos_words() {
        for (recipient, words) in [
            (
                "-abc",
                r#"strconv.ParseInt: parsing "-abc": invalid syntax"#,
            ),
            ("-+5", r#"strconv.ParseInt: parsing "-+5": invalid syntax"#),
            (
                "-99999999999999999999",
                r#"strconv.ParseInt: parsing "-99999999999999999999": value out of range"#,
            ),
            ("-1|x", r#"strconv.Atoi: parsing "x": invalid syntax"#),
            ("-1|", r#"strconv.Atoi: parsing "": invalid syntax"#),
            (
                "-1|99999999999999999999",
                r#"strconv.Atoi: parsing "99999999999999999999": value out of range"#,
            ),
        ] {
            assert_eq!(chat(recipient), Err(words.to_owned()), "{recipient}");
        }
    }

    #[test]
    fn the_form_is_the_clients() {
        // The engine's client's body for the same message (its keys sorted).
        let go = "business_connection_id=&chat_id=-1000000000000&entities=null&link_preview_options=%7B%7D&message_thread_id=2&parse_mode=Markdown&reply_parameters=%7B%22message_id%22%3A0%7D&text=%2Ahi%2A+there";
        let go: Vec<(String, String)> = url::form_urlencoded::parse(go.as_bytes())
            .into_owned()
            .collect();
        let mut got: Vec<(String, String)> = form("-1000000000000|2", "*hi* there")
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        got.sort();
        assert_eq!(got, go);
        let without_text = form("c", "").unwrap();
        assert!(without_text.iter().all(|(k, _)| *k != "text"));
    }
}
