//! The notifications engine's service types beyond the five [`Sender`] has built in (webhook,
//! Slack, Teams, email, Grafana): each is a module with a `parse` of its `service.<type>`
//! settings (the engine's field names) and a [`NotificationService`] that sends; [`table`] is
//! the one list of them. What they share lives here, below both the configuration (which
//! parses their settings) and the [`Sender`] (which sends through them).
//!
//! [`Sender`]: crate::more_services::Sender

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use serde_json::Value as Json;

pub mod alertmanager;
pub mod awssqs;
pub mod gcppubsub;
pub mod github;
pub(crate) mod go_json;
pub mod googlechat;
pub mod mattermost;
pub mod nats;
pub mod newrelic;
pub mod opsgenie;
pub mod pagerduty;
pub mod pagerdutyv2;
pub mod pushover;
pub mod rocketchat;
pub mod table;
pub mod teams_workflows;
pub mod telegram;
pub mod webex;

/// How long one request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a send failed. Every failure may be retried; `permanent` ones will fail again the
/// same way (the service is missing or its settings are unusable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub message: String,
    pub permanent: bool,
}

impl SendError {
    pub fn transient(message: impl Into<String>) -> Self {
        SendError {
            message: message.into(),
            permanent: false,
        }
    }
    pub fn permanent(message: impl Into<String>) -> Self {
        SendError {
            message: message.into(),
            permanent: true,
        }
    }
}

/// A service of [`table`]: the engine's other service types, each sending one notification
/// to one recipient.
pub trait NotificationService: Send + Sync + std::fmt::Debug {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>>;
}

/// What a [`NotificationService`] sends with.
#[derive(Debug, Clone, Copy)]
pub struct SendContext<'a> {
    /// The service's name (`<type>` or `<name>` of `service.<type>.<name>`), for messages.
    pub service: &'a str,
    pub recipient: &'a str,
    /// The rendered templates (`message`, `<type>: {...}`).
    pub content: &'a Json,
    pub http: &'a Http,
}

/// The HTTP clients a service sends through.
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
    insecure_client: reqwest::Client,
}

impl Http {
    /// The client: one that accepts any certificate with `insecure_skip_verify`.
    pub fn client(&self, insecure_skip_verify: bool) -> &reqwest::Client {
        if insecure_skip_verify {
            &self.insecure_client
        } else {
            &self.client
        }
    }
}

impl Http {
    pub(crate) fn new(client: reqwest::Client, insecure_client: reqwest::Client) -> Http {
        Http {
            client,
            insecure_client,
        }
    }
}

/// What went wrong with a request, without its URL.
pub(crate) fn kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_body() || e.is_decode() {
        "bad response body"
    } else {
        "transport error"
    }
}

/// `T` from the settings, with serde's message stripped of the values it may quote.
pub(crate) fn settings<T: serde::de::DeserializeOwned>(settings: Value) -> Result<T, String> {
    serde_json::from_value(settings).map_err(|e| redact(&e))
}

/// A serde error's message without the values it may quote (which can come from the Secret).
pub(crate) fn redact(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.find(": ") {
        Some(_) if text.contains("invalid type") => "a field has the wrong type".to_owned(),
        _ => text,
    }
}

/// The status and the first 200 characters of an answer that is not a success (`None` for a
/// success): what a service's error quotes of a refusal.
pub(crate) async fn refusal(response: reqwest::Response) -> Option<(u16, String)> {
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return None;
    }
    let answer = response.text().await.unwrap_or_default();
    Some((status, answer.chars().take(200).collect()))
}
