//! Rocket.Chat (`service.rocketchat`: `serverUrl`, `email`, `password`, `alias`, `icon`,
//! `avatar`), as the engine sends through Rocket.Chat's Go client: each send logs in
//! (`POST <serverUrl>/api/v1/login`, a form with `user` and `password`) and posts the template's
//! `message` with `chat.postMessage`, carrying the login's `X-Auth-Token` and `X-User-Id`.
//! A recipient starting with `#` or `@` is a channel or user, anything else a room id. `alias`
//! is sent as given, `icon` only when it is an emoji (`:name:`), `avatar` only when it is an
//! http(s) URL (the others are logged). The template's `rocketchat.attachments` is a JSON array
//! of Slack-like attachments, sent with the client's attachment fields.
//!
//! The engine authenticates with email and password only (the client can take a user id and
//! token, but the engine never gives it one), so Sluice does too. The engine has no default
//! server: an unset `serverUrl` is a permanent failure here. Rocket.Chat's failure answers
//! (`{"status": "error", "error": ...}` or `{"success": false, "error": ...}`) are failures
//! in the client's words.

use std::fmt;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{NotificationService, SendContext, SendError};

#[derive(Clone, Deserialize)]
pub struct RocketChatOptions {
    #[serde(default)]
    alias: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    icon: String,
    #[serde(default)]
    avatar: String,
    #[serde(default, rename = "serverUrl")]
    server_url: String,
}

impl fmt::Debug for RocketChatOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocketChatOptions")
            .field("server_url", &self.server_url)
            .field("alias", &self.alias)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<RocketChatOptions, String> {
    super::settings(settings)
}

/// The client's attachment, so that what is sent is what the engine sends: its fields only,
/// `collapsed` always, the others when set.
#[derive(Deserialize, Serialize)]
struct Attachment {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    color: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    text: String,
    #[serde(default, rename = "ts", skip_serializing_if = "String::is_empty")]
    timestamp: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    thumb_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    message_link: String,
    #[serde(default)]
    collapsed: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    author_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    author_link: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    author_icon: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    title_link: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    title_link_download: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    image_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    audio_url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    video_url: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    actions: Vec<Action>,
    #[serde(
        default,
        rename = "button_alignment",
        skip_serializing_if = "String::is_empty"
    )]
    buttons_alignment: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    fields: Vec<Field>,
}

#[derive(Deserialize, Serialize)]
struct Action {
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    text: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    image_url: String,
    #[serde(default)]
    is_webview: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    webview_height_ratio: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    msg: String,
    #[serde(default)]
    msg_in_chat_window: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    msg_processing_type: String,
}

#[derive(Deserialize, Serialize)]
struct Field {
    #[serde(default)]
    short: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    value: String,
}

/// The client's answer: its `OK()` decides.
#[derive(Default)]
struct Status {
    success: bool,
    error: String,
    status: String,
    message: String,
}

impl Status {
    /// Read leniently: in chat.postMessage's answer `message` is the posted message, not text
    /// (the client's response type has its own `message` field there).
    fn of(answer: &Value) -> Status {
        let text = |k: &str| {
            answer
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Status {
            success: answer
                .get("success")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            error: text("error"),
            status: text("status"),
            message: text("message"),
        }
    }

    fn ok(&self) -> Result<(), String> {
        if self.success {
            Ok(())
        } else if !self.error.is_empty() {
            Err(self.error.clone())
        } else if self.status == "success" {
            Ok(())
        } else if !self.message.is_empty() {
            Err(format!(
                "status: {}, message: {}",
                self.status, self.message
            ))
        } else {
            Err("got false response".into())
        }
    }
}

/// The client's base URL: `<scheme>://<host>:<port><path>/api/v1`, http unless https.
fn api_base(server_url: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(server_url).map_err(|e| format!("serverUrl: {e}"))?;
    let https = url.scheme() == "https";
    let port = url.port().unwrap_or(if https { 443 } else { 80 });
    Ok(format!(
        "{}://{}:{port}{}/api/v1",
        if https { "https" } else { "http" },
        url.host_str().unwrap_or_default(),
        url.path().trim_end_matches('/')
    ))
}

/// The message the engine posts.
fn post_message(
    opts: &RocketChatOptions,
    recipient: &str,
    content: &Value,
) -> Result<Value, String> {
    let mut message = serde_json::Map::new();
    let target = if recipient.starts_with('#') || recipient.starts_with('@') {
        "channel"
    } else {
        "roomId"
    };
    message.insert(target.into(), json!(recipient));
    let text = content
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut set = |k: &str, v: &str| {
        if !v.is_empty() {
            message.insert(k.into(), json!(v));
        }
    };
    set("text", text);
    set("alias", &opts.alias);
    let icon = &opts.icon;
    if icon.len() > 2 && icon.starts_with(':') && icon.ends_with(':') {
        set("emoji", icon);
    } else if !icon.is_empty() {
        tracing::warn!("Icon reference '{icon}' is not a valid emoji");
    }
    let avatar = &opts.avatar;
    let valid_avatar = reqwest::Url::parse(avatar).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    });
    if valid_avatar {
        set("avatar", avatar);
    } else if !avatar.is_empty() {
        tracing::warn!("Avatar reference '{avatar}' is not a valid URL");
    }
    let raw = content
        .pointer("/rocketchat/attachments")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !raw.is_empty() {
        let attachments: Vec<Attachment> = serde_json::from_str(raw)
            .map_err(|e| format!("failed to unmarshal attachments '{raw}' : {e}"))?;
        if !attachments.is_empty() {
            let attachments = serde_json::to_value(attachments).map_err(|e| e.to_string())?;
            message.insert("attachments".into(), attachments);
        }
    }
    Ok(Value::Object(message))
}

impl NotificationService for RocketChatOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let service = ctx.service;
            let permanent =
                |m: String| SendError::permanent(format!("rocketchat '{service}': {m}"));
            let transient =
                |m: String| SendError::transient(format!("rocketchat '{service}': {m}"));
            if self.server_url.is_empty() {
                return Err(permanent("serverUrl is not set".into()));
            }
            let base = api_base(&self.server_url).map_err(permanent)?;
            let message = post_message(self, ctx.recipient, ctx.content).map_err(permanent)?;
            let client = ctx.http.client(false);
            let answer = |response: reqwest::Response| async move {
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                let parsed: Option<Value> = serde_json::from_str(&text).ok();
                let fields = parsed.as_ref().map(Status::of).unwrap_or_default();
                if status.as_u16() != 200 && parsed.is_none() {
                    return Err(format!(
                        "Request error: {} {}",
                        status.as_u16(),
                        status.canonical_reason().unwrap_or_default()
                    ));
                }
                fields.ok()?;
                Ok((fields, parsed.unwrap_or(Value::Null)))
            };
            let login = client
                .post(format!("{base}/login"))
                .form(&[
                    ("user", self.email.as_str()),
                    ("password", self.password.as_str()),
                ])
                .send()
                .await
                .map_err(|e| transient(format!("login failed: {}", super::kind(&e))))?;
            let (_, logged_in) = answer(login).await.map_err(transient)?;
            let data = logged_in.get("data").cloned().unwrap_or(Value::Null);
            let field = |names: &[&str]| {
                names
                    .iter()
                    .find_map(|n| data.get(*n).and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_owned()
            };
            let (token, user_id) = (field(&["authToken"]), field(&["userId", "userID"]));
            let posted = client
                .post(format!("{base}/chat.postMessage"))
                .header("X-Auth-Token", token)
                .header("X-User-Id", user_id)
                .json(&message)
                .send()
                .await
                .map_err(|e| transient(format!("chat.postMessage failed: {}", super::kind(&e))))?;
            let (status, _) = answer(posted).await.map_err(transient)?;
            if !status.success {
                return Err(transient(status.error));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_url_and_answers() {
        assert_eq!(
            api_base("https://chat.example.com").unwrap(),
            "https://chat.example.com:443/api/v1"
        );
        assert_eq!(
            api_base("http://127.0.0.1:3000/chat/").unwrap(),
            "http://127.0.0.1:3000/chat/api/v1"
        );
        let status = |v: Value| Status::of(&v).ok();
        assert_eq!(status(json!({"success": true})), Ok(()));
        assert_eq!(status(json!({"status": "success"})), Ok(()));
        assert_eq!(
            status(json!({"status": "error", "error": "Unauthorized"})),
            Err("Unauthorized".into())
        );
        assert_eq!(
            status(json!({"status": "error", "message": "m"})),
            Err("status: error, message: m".into())
        );
        assert_eq!(status(json!({})), Err("got false response".into()));
        assert_eq!(
            status(json!({"success": true, "message": {"_id": "m"}})),
            Ok(())
        );
    }

    #[test]
    fn a_message_goes_to_a_channel_or_a_room_with_valid_icon_and_avatar_only() {
        let opts = |icon: &str, avatar: &str| RocketChatOptions {
            alias: "argo".into(),
            email: String::new(),
            password: String::new(),
            icon: icon.into(),
            avatar: avatar.into(),
            server_url: String::new(),
        };
        let content = json!({"message": "hi", "rocketchat": {"attachments": "[{\"title\": \"web\", \"fields\": [{\"title\": \"a\", \"value\": \"b\"}], \"extra\": 1}]"}});
        let m = post_message(&opts(":rocket:", "https://x/a.png"), "#ops", &content).unwrap();
        assert_eq!(
            m,
            json!({"channel": "#ops", "text": "hi", "alias": "argo", "emoji": ":rocket:",
                   "avatar": "https://x/a.png",
                   "attachments": [{"collapsed": false, "title": "web",
                                    "fields": [{"short": false, "title": "a", "value": "b"}]}]})
        );
        let m = post_message(
            &opts("rocket", "ftp://x"),
            "GENERAL",
            &json!({"message": "hi"}),
        )
        .unwrap();
        assert_eq!(
            m,
            json!({"roomId": "GENERAL", "text": "hi", "alias": "argo"})
        );
        let bad = json!({"rocketchat": {"attachments": "nope"}});
        assert!(
            post_message(&opts("", ""), "#a", &bad)
                .unwrap_err()
                .starts_with("failed to unmarshal attachments 'nope' : ")
        );
    }
}
