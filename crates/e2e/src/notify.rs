//! Notifications' counterparts on the local machine: a local server standing for webhooks, the
//! Slack API and an analysis metric, and the catalog configuration and subscriptions the
//! notification scenarios use.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use axum::routing::any;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_testenv::harness::{TestNamespace, wait_for};

use crate::TIMEOUT;

#[derive(Clone, Default)]
pub struct Inbox {
    /// (path, body) of each request, in arrival order.
    pub received: Arc<Mutex<Vec<(String, String)>>>,
    /// Requests to `/flaky` answered 500 so far (the first two are).
    pub refused: Arc<Mutex<usize>>,
    /// While true, requests to `/down` are answered 500 (and counted, not recorded).
    pub down: Arc<Mutex<(bool, usize)>>,
    /// While true, requests to `/hang` are recorded as they arrive and answered only once it
    /// turns false: a send the receiver has whose answer the sender is still waiting for.
    pub hang: Arc<Mutex<bool>>,
}

impl Inbox {
    pub fn webhook_messages(&self) -> Vec<String> {
        self.bodies("/hook")
    }

    /// The bodies of the requests whose path starts with `prefix`, in arrival order.
    pub fn bodies(&self, prefix: &str) -> Vec<String> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path.starts_with(prefix))
            .map(|(_, body)| body.clone())
            .collect()
    }

    pub fn paths(&self, prefix: &str) -> Vec<String> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path.starts_with(prefix))
            .map(|(path, _)| path.clone())
            .collect()
    }

    pub fn slack_posts(&self) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path.ends_with("chat.postMessage"))
            .map(|(_, body)| serde_json::from_str(body).unwrap())
            .collect()
    }
}

async fn receive(
    State(inbox): State<Inbox>,
    uri: Uri,
    body: Bytes,
) -> (axum::http::StatusCode, String) {
    let body = String::from_utf8_lossy(&body).into_owned();
    if uri.path() == "/metric" {
        // An analysis metric that is always bad.
        return (
            axum::http::StatusCode::OK,
            json!({"status": "bad"}).to_string(),
        );
    }
    if uri.path().starts_with("/down") {
        let mut down = inbox.down.lock().unwrap();
        if down.0 {
            down.1 += 1;
            return (axum::http::StatusCode::SERVICE_UNAVAILABLE, "down".into());
        }
    }
    if uri.path().starts_with("/hang") {
        inbox
            .received
            .lock()
            .unwrap()
            .push((uri.path().to_owned(), body));
        while *inbox.hang.lock().unwrap() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        return (axum::http::StatusCode::OK, "ok".into());
    }
    if uri.path().starts_with("/flaky") {
        let mut refused = inbox.refused.lock().unwrap();
        inbox
            .received
            .lock()
            .unwrap()
            .push((uri.path().to_owned(), body));
        if *refused < 2 {
            *refused += 1;
            return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down".into());
        }
        return (axum::http::StatusCode::OK, "ok".into());
    }
    let n = {
        let mut r = inbox.received.lock().unwrap();
        r.push((uri.path().to_owned(), body));
        r.len()
    };
    (
        axum::http::StatusCode::OK,
        json!({"ok": true, "ts": format!("1700000000.{n:06}"), "channel": "C1"}).to_string(),
    )
}

pub async fn local_server() -> (String, Inbox) {
    let inbox = Inbox::default();
    let app = Router::new()
        .fallback(any(receive))
        .with_state(inbox.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), inbox)
}

/// Argo's catalog ConfigMap with a webhook and a Slack service at `url`, plus `extra` keys.
pub async fn apply_config(ns: &TestNamespace, url: &str, extra: &[(&str, &str)]) {
    let mut data = sluice_notifications::catalog::data();
    data.insert("service.webhook.hook".into(), format!("url: {url}/hook\n"));
    data.insert(
        "service.slack".into(),
        format!("token: $slack-token\napiURL: {url}/slack/api/\n"),
    );
    // Paused and completed messages of a Rollout go to one Slack thread.
    data.insert(
        "template.slack-thread".into(),
        "slack:\n  groupingKey: '{{.rollout.metadata.name}}'\n".into(),
    );
    data.insert(
        "trigger.on-rollout-paused".into(),
        "- send: [rollout-paused, slack-thread]\n".into(),
    );
    data.insert(
        "trigger.on-rollout-completed".into(),
        "- send: [rollout-completed, slack-thread]\n".into(),
    );
    for (k, v) in extra {
        data.insert(k.to_string(), v.to_string());
    }
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "argo-rollouts-notification-configmap"},
        "data": data,
    });
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "argo-rollouts-notification-secret"},
        "stringData": {"slack-token": "xoxb-e2e-secret"},
    });
    ns.apply_yaml(&cm.to_string()).await.unwrap();
    ns.apply_yaml(&secret.to_string()).await.unwrap();
}

/// Subscribes the webhook and Slack channel `releases` to the catalog's update, step, pause
/// and completion triggers.
pub async fn subscribe(api: &Api<Rollout>, name: &str, extra: &[(&str, &str)]) {
    let mut annotations = serde_json::Map::new();
    for trigger in [
        "on-rollout-updated",
        "on-rollout-step-completed",
        "on-rollout-paused",
        "on-rollout-completed",
    ] {
        annotations.insert(
            format!("notifications.argoproj.io/subscribe.{trigger}.hook"),
            json!(""),
        );
    }
    for trigger in ["on-rollout-paused", "on-rollout-completed"] {
        annotations.insert(
            format!("notifications.argoproj.io/subscribe.{trigger}.slack"),
            json!("releases"),
        );
    }
    for (k, v) in extra {
        annotations.insert(k.to_string(), json!(v));
    }
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .unwrap();
}

pub async fn wait_messages(inbox: &Inbox, expected: usize) {
    wait_for(&format!("{expected} webhook messages"), TIMEOUT, || async {
        let got = inbox.webhook_messages();
        if got.len() >= expected {
            Ok(())
        } else {
            anyhow::bail!("{got:#?}")
        }
    })
    .await
    .unwrap();
}

/// Waits until the Rollout records `n` sent notifications and none pending.
pub async fn wait_recorded(api: &Api<Rollout>, n: usize) {
    wait_for(&format!("{n} notifications recorded"), TIMEOUT, || async {
        let ro = api.get("web").await?;
        let annotations = ro.metadata.annotations.unwrap_or_default();
        let record: serde_json::Map<String, Value> = annotations
            .get("notified.notifications.argoproj.io")
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default();
        if record.len() == n
            && !annotations.contains_key("rollouts.sluice.dev/notifications-pending")
        {
            Ok(())
        } else {
            anyhow::bail!("{annotations:?}")
        }
    })
    .await
    .unwrap();
}

pub fn steps() -> Value {
    json!([{"setWeight": 50}, {"pause": {}}])
}
