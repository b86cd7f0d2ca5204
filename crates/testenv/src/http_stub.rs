//! A local HTTP server whose answer a test sets: stands in for a metric source (a web
//! endpoint, a Prometheus scrape target) so that a test decides what the metric says.
//! Every request is recorded (method, path with query, headers, body) for the test to check.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::task::JoinHandle;

/// One request the stub received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query, e.g. `/api/v1/query?query=up`.
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

#[derive(Debug, Default)]
struct Shared {
    answer: Option<Answer>,
    requests: Vec<Recorded>,
}

/// The server; stops when dropped.
pub struct HttpStub {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl Drop for HttpStub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpStub {
    /// Starts on a free port of 127.0.0.1, answering 200 with `{}` until told otherwise.
    pub async fn start() -> anyhow::Result<HttpStub> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let stub = HttpStub { addr, shared, task };
        stub.respond_json(200, &serde_json::json!({}));
        Ok(stub)
    }

    /// `http://127.0.0.1:<port>` plus `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `127.0.0.1:<port>`, as a Prometheus scrape target.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// Answers every request from now on with `status` and `body` as JSON.
    pub fn respond_json(&self, status: u16, body: &serde_json::Value) {
        self.respond(status, "application/json", &body.to_string());
    }

    /// Answers every request from now on with `status`, a content type and a body.
    pub fn respond(&self, status: u16, content_type: &str, body: &str) {
        self.lock().answer = Some(Answer {
            status,
            content_type: content_type.into(),
            body: body.into(),
        });
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn answer(
    State(shared): State<Arc<Mutex<Shared>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
    shared.requests.push(Recorded {
        method: method.to_string(),
        uri: uri.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let a = shared.answer.clone().unwrap_or(Answer {
        status: 200,
        content_type: "application/json".into(),
        body: "{}".into(),
    });
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [("content-type", a.content_type)], a.body).into_response()
}
