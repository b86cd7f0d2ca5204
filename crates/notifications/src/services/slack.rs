//! The Slack service (`service.slack[.<name>]`): `chat.postMessage` to the recipient channel
//! with the service's token (usually `$slack-token` from the Secret), the `message` as text and
//! the template's `slack` part (`attachments` and `blocks`, JSON; `username`, `icon`;
//! `groupingKey`, `notifyBroadcast`, `deliveryPolicy`).
//!
//! Messages with the same `groupingKey` go to one thread: the first starts it, and its `ts` is
//! returned to be recorded on the Rollout ([`super::SLACK_THREADS`]), so the thread survives a
//! restart. With `deliveryPolicy: Update` a message of a known thread updates the thread's
//! first message instead (`chat.update`); `PostAndUpdate` does both.

use serde_json::{Value as Json, json};

use super::{SendError, Sent, SlackThreads};
use crate::config::SlackOptions;
use crate::due::Notification;

/// Slack's Web API.
pub const DEFAULT_API_URL: &str = "https://slack.com/api/";

/// Sends one Slack notification.
pub async fn send(
    client: &reqwest::Client,
    service: &str,
    opts: &SlackOptions,
    n: &Notification,
    threads: &SlackThreads,
) -> Result<Sent, SendError> {
    let channel = n.destination.recipient.as_str();
    let slack = n.content.get("slack").cloned().unwrap_or(Json::Null);
    let text = |k: &str| {
        slack
            .get(k)
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut message = json!({
        "channel": channel,
        "text": n.content.get("message").and_then(Json::as_str).unwrap_or_default(),
    });
    let obj = message.as_object_mut().expect("an object");
    for (field, key) in [("attachments", "attachments"), ("blocks", "blocks")] {
        let raw = text(field);
        if raw.trim().is_empty() {
            continue;
        }
        let parsed: Json = serde_json::from_str(&raw).map_err(|e| {
            SendError::permanent(format!("slack '{service}': {field} are not JSON: {e}"))
        })?;
        obj.insert(key.into(), parsed);
    }
    let username = Some(text("username"))
        .filter(|u| !u.is_empty())
        .unwrap_or(opts.username.clone());
    if !username.is_empty() {
        obj.insert("username".into(), json!(username));
    }
    let icon = Some(text("icon"))
        .filter(|i| !i.is_empty())
        .unwrap_or(opts.icon.clone());
    if icon.starts_with(':') && icon.ends_with(':') && icon.len() > 2 {
        obj.insert("icon_emoji".into(), json!(icon));
    } else if icon.starts_with("http://") || icon.starts_with("https://") {
        obj.insert("icon_url".into(), json!(icon));
    }
    if opts.disable_unfurl {
        obj.insert("unfurl_links".into(), json!(false));
        obj.insert("unfurl_media".into(), json!(false));
    }
    let grouping_key = text("groupingKey");
    let policy = text("deliveryPolicy");
    let thread_id = format!("{service}:{channel}");
    let thread_ts = (!grouping_key.is_empty())
        .then(|| threads.get(&thread_id).and_then(|t| t.get(&grouping_key)))
        .flatten()
        .cloned();
    let broadcast = slack
        .get("notifyBroadcast")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let base = if opts.api_url.is_empty() {
        DEFAULT_API_URL
    } else {
        opts.api_url.as_str()
    };
    let base = base.trim_end_matches('/');
    let mut sent = Sent::default();
    let post = thread_ts.is_none() || policy != "Update";
    if post {
        let mut body = message.clone();
        if let Some(ts) = &thread_ts {
            body["thread_ts"] = json!(ts);
            if broadcast {
                body["reply_broadcast"] = json!(true);
            }
        }
        let ts = call(
            client,
            service,
            &format!("{base}/chat.postMessage"),
            &opts.token,
            &body,
        )
        .await?;
        if !grouping_key.is_empty() && thread_ts.is_none() {
            sent.slack_thread = Some((thread_id, grouping_key.clone(), ts));
        }
    }
    if let Some(ts) = thread_ts.filter(|_| policy == "Update" || policy == "PostAndUpdate") {
        let mut body = message;
        body["ts"] = json!(ts);
        call(
            client,
            service,
            &format!("{base}/chat.update"),
            &opts.token,
            &body,
        )
        .await?;
    }
    Ok(sent)
}

/// One Web API call; returns the message's `ts`.
async fn call(
    client: &reqwest::Client,
    service: &str,
    url: &str,
    token: &str,
    body: &Json,
) -> Result<String, SendError> {
    let response = client
        .post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .map_err(|e| {
            SendError::transient(format!(
                "slack '{service}': request failed: {}",
                crate::more_services::kind(&e)
            ))
        })?;
    let status = response.status();
    if status.as_u16() == 429 || !status.is_success() {
        return Err(SendError::transient(format!(
            "slack '{service}': request failed with status {}",
            status.as_u16()
        )));
    }
    let answer: Json = response
        .json()
        .await
        .map_err(|_| SendError::transient(format!("slack '{service}': the answer is not JSON")))?;
    if answer.get("ok").and_then(Json::as_bool) != Some(true) {
        let error = answer
            .get("error")
            .and_then(Json::as_str)
            .unwrap_or("unknown error");
        return Err(SendError::transient(format!("slack '{service}': {error}")));
    }
    Ok(answer
        .get("ts")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_owned())
}
