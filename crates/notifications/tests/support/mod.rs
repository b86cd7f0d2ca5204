//! Local servers the services are tested against: an HTTP server recording every request, and
//! an SMTP server ([`smtp`]).
#![allow(dead_code)]

pub mod smtp;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::routing::any;
use serde_json::{Value, json};
use sluice_notifications::services::Sender;
use sluice_notifications::subscriptions::Destination;
use sluice_notifications::{Config, Notification};

#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: String,
}

#[derive(Clone, Default)]
pub struct Recorder {
    pub received: Arc<Mutex<Vec<Received>>>,
    /// Status the next requests get (200 when none).
    pub status: Arc<Mutex<Option<StatusCode>>>,
    /// Body of the answers to requests other than Slack's (`done` when none).
    pub answer: Arc<Mutex<Option<String>>>,
}

async fn record(
    State(rec): State<Recorder>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let body = String::from_utf8_lossy(&body).into_owned();
    let n = {
        let mut r = rec.received.lock().unwrap();
        r.push(Received {
            method: method.to_string(),
            path: uri.path().to_owned(),
            headers,
            body,
        });
        r.len()
    };
    let status = rec.status.lock().unwrap().unwrap_or(StatusCode::OK);
    let answer = if uri.path().ends_with("chat.postMessage") || uri.path().ends_with("chat.update")
    {
        if uri.path().contains("failing") {
            json!({"ok": false, "error": "channel_not_found"}).to_string()
        } else {
            json!({"ok": true, "ts": format!("1700000000.{n:06}"), "channel": "C1"}).to_string()
        }
    } else {
        rec.answer
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(|| "done".to_owned())
    };
    (status, answer)
}

pub async fn server() -> (String, Recorder) {
    let rec = Recorder::default();
    let app = Router::new().fallback(any(record)).with_state(rec.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), rec)
}

pub fn sender() -> Sender {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Sender::new().unwrap()
}

pub fn config(data: &[(&str, String)], secret: &[(&str, &str)]) -> Config {
    let data: BTreeMap<String, String> = data
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let secret: BTreeMap<String, String> = secret
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cfg = Config::parse(&data, &secret);
    assert_eq!(cfg.problems, vec![]);
    cfg
}

pub fn notification(service: &str, recipient: &str, content: Value) -> Notification {
    Notification {
        key: "k".into(),
        trigger: "on-rollout-completed".into(),
        templates: vec!["t".into()],
        destination: Destination {
            service: service.into(),
            recipient: recipient.into(),
        },
        content,
    }
}
