//! Google Cloud Pub/Sub (`service.gcppubsub`: `project`, `topic`, `keyFile`): the template's
//! `message` published to a topic (the recipient, else `topic`) of `project`, with the
//! template's `gcppubsub.attributes`, through Pub/Sub's REST API (`POST
//! /v1/projects/<project>/topics/<topic>:publish`; the engine's client speaks the same API
//! over gRPC).
//!
//! The token is found as the client finds it ([`credentials`]): the service account key of
//! `keyFile` (a path, e.g. a mounted Secret), `GOOGLE_APPLICATION_CREDENTIALS` or gcloud's
//! well-known file, signing its own token as the client does; else the metadata server of GCE
//! and GKE (Workload Identity). With `PUBSUB_EMULATOR_HOST` set, the emulator there is used
//! without credentials, as by the client.
//!
//! `apiURL` (Sluice's, not the engine's, whose client always calls
//! `https://pubsub.googleapis.com`) points the service at another server.
//!
//! A refusal of Pub/Sub is a failure worded as the client's gRPC errors are (`rpc error: code =
//! NotFound desc = ...`), which may pass; no project, no topic, or credentials that cannot be
//! read will recur.

mod credentials;

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use base64::Engine as _;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{NotificationService, SendContext, SendError};

const API_URL: &str = "https://pubsub.googleapis.com";

#[derive(Clone, Deserialize)]
pub struct GcpPubsubOptions {
    #[serde(default)]
    project: String,
    #[serde(default)]
    topic: String,
    #[serde(default, rename = "keyFile")]
    key_file: String,
    #[serde(default, rename = "apiURL")]
    api_url: String,
}

impl fmt::Debug for GcpPubsubOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcpPubsubOptions")
            .field("project", &self.project)
            .field("topic", &self.topic)
            .field("key_file", &self.key_file)
            .field("api_url", &self.api_url)
            .finish()
    }
}

pub fn parse(settings: Value) -> Result<GcpPubsubOptions, String> {
    super::settings(settings)
}

/// A path segment, percent-encoded beyond RFC 3986's unreserved characters.
fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The gRPC code of an HTTP status, as Google's APIs map them.
fn code_of_status(status: u16) -> &'static str {
    match status {
        400 => "InvalidArgument",
        401 => "Unauthenticated",
        403 => "PermissionDenied",
        404 => "NotFound",
        409 => "Aborted",
        429 => "ResourceExhausted",
        499 => "Canceled",
        500 => "Internal",
        501 => "Unimplemented",
        503 => "Unavailable",
        504 => "DeadlineExceeded",
        _ => "Unknown",
    }
}

/// An error answer as the client's gRPC error: `rpc error: code = NotFound desc = ...`. The
/// REST error's `status` (`NOT_FOUND`) names the code.
fn rpc_error(status: u16, body: &[u8]) -> String {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let error = &json["error"];
    let code = match error["status"].as_str() {
        Some(s) if !s.is_empty() => s
            .split('_')
            .map(|w| {
                let w = w.to_ascii_lowercase();
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect(),
        _ => code_of_status(status).to_owned(),
    };
    // "Canceled" is how gRPC spells the REST "CANCELLED".
    let code = if code == "Cancelled" {
        "Canceled".to_owned()
    } else {
        code
    };
    let desc = match error["message"].as_str() {
        Some(m) => m.to_owned(),
        None => reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("unknown error")
            .to_owned(),
    };
    format!("rpc error: code = {code} desc = {desc}")
}

impl GcpPubsubOptions {
    async fn publish(&self, ctx: &SendContext<'_>) -> Result<(), SendError> {
        if self.project.is_empty() {
            return Err(SendError::permanent("pubsub: projectID string is empty"));
        }
        let topic = if ctx.recipient.is_empty() {
            self.topic.as_str()
        } else {
            ctx.recipient
        };
        if topic.is_empty() {
            return Err(SendError::permanent(
                "no topic: set `topic` or subscribe with the topic's name",
            ));
        }
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let emulator = env("PUBSUB_EMULATOR_HOST");
        let base = match (&emulator, self.api_url.as_str()) {
            (_, url) if !url.is_empty() => url.trim_end_matches('/').to_owned(),
            (Some(host), _) => format!("http://{host}"),
            (None, _) => API_URL.to_owned(),
        };
        let token = match emulator {
            Some(_) if self.api_url.is_empty() => None,
            _ => Some(match credentials::find(&self.key_file, &env) {
                Ok(credentials::Source::ServiceAccount(account)) => account
                    .token(SystemTime::now())
                    .map_err(SendError::permanent)?,
                Ok(credentials::Source::Metadata(host)) => {
                    credentials::metadata_token(ctx.http.client(false), &host)
                        .await
                        .map_err(SendError::transient)?
                }
                Err(e) => return Err(SendError::permanent(e)),
            }),
        };
        let data = base64::engine::general_purpose::STANDARD.encode(
            ctx.content
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        let mut message = json!({"data": data});
        let attributes: BTreeMap<String, String> = ctx
            .content
            .pointer("/gcppubsub/attributes")
            .and_then(Value::as_object)
            .map(|a| {
                a.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        if !attributes.is_empty() {
            message["attributes"] = json!(attributes);
        }
        let url = format!(
            "{base}/v1/projects/{}/topics/{}:publish",
            segment(&self.project),
            segment(topic)
        );
        let mut request = ctx
            .http
            .client(false)
            .post(url)
            .json(&json!({"messages": [message]}));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| {
            SendError::transient(format!(
                "rpc error: code = Unavailable desc = {}",
                super::kind(&e)
            ))
        })?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| {
            SendError::transient(format!(
                "rpc error: code = Unavailable desc = {}",
                super::kind(&e)
            ))
        })?;
        if !(200..300).contains(&status) {
            return Err(SendError::transient(rpc_error(status, &body)));
        }
        Ok(())
    }
}

impl NotificationService for GcpPubsubOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            self.publish(&ctx).await.map_err(|e| SendError {
                message: format!("gcppubsub '{}': {}", ctx.service, e.message),
                permanent: e.permanent,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{rpc_error, segment};

    #[test]
    fn refusals_are_worded_as_the_clients_grpc_errors() {
        let body = br#"{"error": {"code": 404, "message": "Resource not found (resource=gone).",
            "status": "NOT_FOUND"}}"#;
        assert_eq!(
            rpc_error(404, body),
            "rpc error: code = NotFound desc = Resource not found (resource=gone)."
        );
        let body = br#"{"error": {"code": 403, "message": "User not authorized to perform this action.", "status": "PERMISSION_DENIED"}}"#;
        assert_eq!(
            rpc_error(403, body),
            "rpc error: code = PermissionDenied desc = User not authorized to perform this action."
        );
        assert_eq!(
            rpc_error(503, b"<html>down</html>"),
            "rpc error: code = Unavailable desc = Service Unavailable"
        );
        assert_eq!(
            rpc_error(
                499,
                br#"{"error": {"status": "CANCELLED", "message": "m"}}"#
            ),
            "rpc error: code = Canceled desc = m"
        );
    }

    #[test]
    fn names_are_escaped_in_the_path() {
        assert_eq!(segment("my-topic_1.x~"), "my-topic_1.x~");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
    }
}
