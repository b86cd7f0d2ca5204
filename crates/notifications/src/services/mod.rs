//! Sending a [`Notification`] through its service: a webhook, Slack, Microsoft Teams, email
//! over SMTP or a Grafana annotation. This is the only part
//! of the crate that performs I/O. Errors name the service, never a URL, header or token
//! (which may come from the Secret).

use std::collections::BTreeMap;

use crate::config::{Config, ServiceKind};
use crate::due::Notification;
pub use crate::more_services::{
    Http, NotificationService, REQUEST_TIMEOUT, SendContext, SendError,
};

pub mod email;
pub mod grafana;
pub mod slack;
pub mod teams;
pub mod webhook;

/// The annotation keeping Slack thread timestamps of `groupingKey` threads on the Rollout, so
/// that a thread survives a restart or a change of leader: a JSON object
/// `{"<service>:<channel>": {"<groupingKey>": "<ts>"}}`.
pub const SLACK_THREADS: &str = "rollouts.sluice.dev/notification-slack-threads";

/// Slack threads by `<service>:<channel>`, then grouping key.
pub type SlackThreads = BTreeMap<String, BTreeMap<String, String>>;

/// Reads [`SLACK_THREADS`] (an unreadable value is no thread).
pub fn slack_threads(annotations: &BTreeMap<String, String>) -> SlackThreads {
    annotations
        .get(SLACK_THREADS)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// What a send leaves to record besides the notification's key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sent {
    /// A Slack thread started: (`<service>:<channel>`, grouping key, ts).
    pub slack_thread: Option<(String, String, String)>,
}

/// Sends notifications over HTTP.
#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
    insecure_client: reqwest::Client,
    http: Http,
}

impl Sender {
    /// A sender; needs a rustls crypto provider installed for the process.
    pub fn new() -> Result<Sender, SendError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(SendError::permanent(
                "no rustls crypto provider is installed for the process",
            ));
        }
        let build = |insecure: bool| {
            reqwest::Client::builder()
                .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
                .timeout(REQUEST_TIMEOUT)
                .tls_danger_accept_invalid_certs(insecure)
                .build()
                .map_err(|_| SendError::permanent("cannot build an HTTP client"))
        };
        let (client, insecure_client) = (build(false)?, build(true)?);
        Ok(Sender {
            http: Http::new(client.clone(), insecure_client.clone()),
            client,
            insecure_client,
        })
    }

    /// Sends `n` through its service, with the Slack threads recorded on the Rollout.
    pub async fn send(
        &self,
        cfg: &Config,
        n: &Notification,
        threads: &SlackThreads,
    ) -> Result<Sent, SendError> {
        let service_name = &n.destination.service;
        let Some(service) = cfg.services.get(service_name) else {
            return Err(SendError::permanent(format!(
                "notification service '{service_name}' is not configured"
            )));
        };
        match &service.kind {
            ServiceKind::Webhook(opts) => {
                let client = if opts.insecure_skip_verify {
                    &self.insecure_client
                } else {
                    &self.client
                };
                webhook::send(client, service_name, opts, &n.content).await?;
                Ok(Sent::default())
            }
            ServiceKind::Slack(opts) => {
                slack::send(&self.client, service_name, opts, n, threads).await
            }
            ServiceKind::Teams(opts) => {
                let recipient = &n.destination.recipient;
                teams::send(&self.client, service_name, opts, recipient, &n.content).await?;
                Ok(Sent::default())
            }
            ServiceKind::Email(opts) => {
                let recipient = &n.destination.recipient;
                email::send(service_name, opts, recipient, &n.content).await?;
                Ok(Sent::default())
            }
            ServiceKind::Grafana(opts) => {
                let client = if opts.insecure_skip_verify {
                    &self.insecure_client
                } else {
                    &self.client
                };
                let recipient = &n.destination.recipient;
                grafana::send(client, service_name, opts, recipient, &n.content).await?;
                Ok(Sent::default())
            }
            ServiceKind::Other(other) => {
                let ctx = SendContext {
                    service: service_name,
                    recipient: &n.destination.recipient,
                    content: &n.content,
                    http: &self.http,
                };
                other.sender.send(ctx).await?;
                Ok(Sent::default())
            }
        }
    }
}
