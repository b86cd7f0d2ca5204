//! Google Chat (`service.googlechat`: `webhooks`, `insecureSkipVerify`): a message POSTed as
//! JSON to the incoming webhook of the recipient's space (`webhooks.<recipient>`, a URL whose
//! `key` and `token` are its secret).
//!
//! The message is the template's `message` as `text`, or, when the template has
//! `googlechat.cardsV2` or `googlechat.cards` (YAML or JSON lists of cards), those cards with an
//! empty `text`: each of `cardsV2` gets a fresh `cardId`, as the engine gives it.
//! `googlechat.threadKey` posts into that thread (`threadKey` and
//! `messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD` added to the URL's query).
//!
//! Google answers the message it created, or `{"error": {code, status, message}}`: an error, an
//! answer that is not JSON or a status outside 2xx is a failure. An unknown recipient or cards
//! that are not a list of cards are permanent failures. No message quotes the URL.

use std::collections::BTreeMap;
use std::fmt;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{NotificationService, SendContext, SendError};

#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GoogleChatOptions {
    #[serde(default)]
    webhooks: BTreeMap<String, String>,
    #[serde(default)]
    insecure_skip_verify: bool,
}

impl fmt::Debug for GoogleChatOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GoogleChatOptions")
            .field("recipients", &self.webhooks.keys().collect::<Vec<_>>())
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<GoogleChatOptions, String> {
    super::settings(settings)
}

impl NotificationService for GoogleChatOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let (service, recipient) = (ctx.service, ctx.recipient);
            let permanent =
                |m: String| SendError::permanent(format!("googlechat '{service}': {m}"));
            let transient =
                |m: String| SendError::transient(format!("googlechat '{service}': {m}"));
            let webhook = self.webhooks.get(recipient).ok_or_else(|| {
                permanent(format!(
                    "error creating client to webhook: no Google chat webhook configured for recipient {recipient}"
                ))
            })?;
            let body = message(ctx.content)
                .map_err(|e| permanent(format!("cannot create message: {e}")))?;
            let mut url = reqwest::Url::parse(webhook).map_err(|_| {
                permanent("cannot send message: the webhook URL cannot be parsed".into())
            })?;
            let thread_key = ctx
                .content
                .pointer("/googlechat/threadKey")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !thread_key.is_empty() {
                url.query_pairs_mut()
                    .append_pair("threadKey", thread_key)
                    .append_pair("messageReplyOption", "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD");
            }
            let response = ctx
                .http
                .client(self.insecure_skip_verify)
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string())
                .send()
                .await
                .map_err(|e| transient(format!("cannot send message: {}", super::kind(&e))))?;
            let status = response.status();
            let answer = response.text().await.unwrap_or_default();
            let unreadable = || {
                transient(format!(
                    "cannot send message: unreadable answer (status {})",
                    status.as_u16()
                ))
            };
            let answer: Value = serde_json::from_str(&answer).map_err(|_| unreadable())?;
            match answer.get("error") {
                None | Some(Value::Null) => {}
                Some(Value::Object(error)) => {
                    let text = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or_default();
                    let code = error
                        .get("code")
                        .and_then(Value::as_i64)
                        .unwrap_or_default();
                    return Err(transient(format!(
                        "error with message: code={code} status={} message={}",
                        text("status"),
                        text("message")
                    )));
                }
                Some(_) => return Err(unreadable()),
            }
            if !(answer.is_object() || answer.is_null()) {
                return Err(unreadable());
            }
            // The engine reads only the answer's error; a status outside 2xx without one (a
            // proxy's, say) is a failure here rather than a message reported sent.
            if !status.is_success() {
                return Err(transient(format!(
                    "cannot send message: status {}",
                    status.as_u16()
                )));
            }
            Ok(())
        })
    }
}

/// The engine's `googleChatNotificationToMessage`: the cards (with an empty `text`) or the
/// `message`.
fn message(content: &Value) -> Result<Value, String> {
    let field = |k: &str| {
        content
            .get("googlechat")
            .and_then(|g| g.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (cards, cards_v2) = (field("cards"), field("cardsV2"));
    let mut out = Map::new();
    if cards.is_empty() && cards_v2.is_empty() {
        let text = content.get("message").and_then(Value::as_str);
        out.insert("text".into(), json!(text.unwrap_or_default()));
        return Ok(Value::Object(out));
    }
    out.insert("text".into(), json!(""));
    // The engine reads cardsV2 first, so its problems are reported first.
    let v2: Vec<Value> = list_of_cards(cards_v2, "cardsV2")?
        .into_iter()
        .map(|card| json!({"cardId": uuid::Uuid::new_v4().to_string(), "card": card}))
        .collect();
    let legacy = list_of_cards(cards, "cards")?;
    if !legacy.is_empty() {
        out.insert("cards".into(), Value::Array(legacy));
    }
    if !v2.is_empty() {
        out.insert("cardsV2".into(), Value::Array(v2));
    }
    Ok(Value::Object(out))
}

/// A YAML (or JSON) list of cards; a `null` card is an empty one, as Go decodes it.
fn list_of_cards(yaml: &str, field: &str) -> Result<Vec<Value>, String> {
    if yaml.is_empty() {
        return Ok(Vec::new());
    }
    let parsed: Value = serde_saphyr::from_str(yaml).map_err(|e| {
        // The first line says where and why; the rest quotes the text, which may hold
        // anything the template rendered.
        let e = e.to_string();
        let first = e.lines().next().unwrap_or_default();
        format!(
            "error converting YAML to JSON: {field}: {}",
            first.trim_start_matches("error: ")
        )
    })?;
    let not_cards = || format!("error unmarshaling JSON: {field} is not a list of cards");
    let items = match parsed {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(not_cards()),
    };
    items
        .into_iter()
        .map(|card| match card {
            Value::Object(_) => Ok(card),
            Value::Null => Ok(json!({})),
            _ => Err(not_cards()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::message;

    #[test]
    fn the_message_is_text_unless_there_are_cards() {
        assert_eq!(
            message(&json!({"message": "hello"})).unwrap(),
            json!({"text": "hello"})
        );
        let cards = message(&json!({"message": "hello", "googlechat": {
            "cards": "- header:\n    title: legacy\n",
            "cardsV2": "[{\"header\": {\"title\": \"v2\"}}, null]",
        }}))
        .unwrap();
        assert_eq!(cards["text"], "");
        assert_eq!(cards["cards"], json!([{"header": {"title": "legacy"}}]));
        let v2 = cards["cardsV2"].as_array().unwrap();
        assert_eq!(v2.len(), 2);
        assert_eq!(v2[0]["card"], json!({"header": {"title": "v2"}}));
        assert_eq!(v2[1]["card"], json!({}));
        let ids: Vec<&str> = v2.iter().map(|c| c["cardId"].as_str().unwrap()).collect();
        assert!(uuid::Uuid::parse_str(ids[0]).is_ok());
        assert_ne!(ids[0], ids[1], "every card has its own id");
        // Cards that render to nothing leave the text empty, as the engine does.
        assert_eq!(
            message(&json!({"message": "m", "googlechat": {"cardsV2": "# none\n"}})).unwrap(),
            json!({"text": ""})
        );
    }

    #[test]
    fn cards_that_are_not_a_list_of_cards_are_refused() {
        for (cards, words) in [
            (
                "header: x",
                "error unmarshaling JSON: cardsV2 is not a list of cards",
            ),
            (
                "- 5",
                "error unmarshaling JSON: cardsV2 is not a list of cards",
            ),
            (
                "- a: [1",
                "error converting YAML to JSON: cardsV2: line 1 column",
            ),
        ] {
            let e = message(&json!({"googlechat": {"cardsV2": cards}})).unwrap_err();
            assert!(e.starts_with(words), "{cards:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
