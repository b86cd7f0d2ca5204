//! The read side of the API, at the paths of Argo's dashboard: the infos of a namespace's
//! Rollouts and of one Rollout, each also as a stream that sends a Rollout again whenever
//! what it shows changes; the namespace and the version.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Dashboard;
use super::cache::Cache;
use super::compress::{self, Chunks};
use super::error::ApiError;
use super::login::Who;
use super::safety::Mode;
use super::views;

/// How long to wait for more changes before sending, so a burst is sent once.
const SETTLE: Duration = Duration::from_millis(100);
/// An empty line this often keeps proxies and browsers from closing a quiet stream (Argo's
/// streams time out behind proxies); readers skip empty lines.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub async fn version() -> Json<Value> {
    Json(json!({"rolloutsVersion": format!("v{}", env!("CARGO_PKG_VERSION"))}))
}

/// The namespace the dashboard opens on and the namespaces that have Rollouts (with logins,
/// those the user may read).
pub async fn namespace(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
) -> Json<Value> {
    app.cache.ready().await;
    let mut available: Vec<String> = app
        .cache
        .rollouts
        .state()
        .iter()
        .filter_map(|r| r.metadata.namespace.clone())
        .filter(|ns| app.scope.covers(ns))
        .collect();
    available.sort();
    available.dedup();
    if let (Some(login), Some(identity)) = (&app.login, who.identity()) {
        let mut readable = Vec::with_capacity(available.len());
        for namespace in available {
            if login.users.may_read(identity, &namespace).await.is_ok() {
                readable.push(namespace);
            }
        }
        available = readable;
    }
    Json(json!({"namespace": app.namespace, "availableNamespaces": available}))
}

/// What the page needs to know of the server (a Sluice addition to Argo's API): with logins,
/// who is logged in and until when.
pub async fn settings(State(app): State<Dashboard>, Extension(who): Extension<Who>) -> Json<Value> {
    Json(json!({
        "user": who.identity().map(|i| i.user.clone()),
        "sessionExpires": who.0.as_ref().map(|s| s.exp),
        "readOnly": app.mode == Mode::ReadOnly,
        "namespace": app.namespace,
        "allNamespaces": matches!(app.scope, super::cache::Scope::All),
    }))
}

pub async fn list(
    State(app): State<Dashboard>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    app.check_namespace(&namespace)?;
    app.cache.ready().await;
    let rollouts: Vec<Value> = views::list(&app.cache, &namespace, Timestamp::now())
        .into_iter()
        .map(|(_, info)| info)
        .collect();
    Ok(compress::json(&json!({"rollouts": rollouts}), &headers))
}

pub async fn one(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    app.check_namespace(&namespace)?;
    app.cache.ready().await;
    views::one(&app.cache, &namespace, &name, Timestamp::now())
        .map(|info| compress::json(&info, &headers))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("rollouts.argoproj.io \"{name}\" not found"),
            )
        })
}

/// `explain`'s answer for a Rollout (a Sluice addition): what it waits for and why. Read
/// fresh on each request, with the user's client, as the command reads it.
/// Read when asked, with the user's own client when logged in (explain reads more than the
/// cache holds).
pub async fn explain(
    State(app): State<Dashboard>,
    Extension(who): Extension<Who>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    app.check_namespace(&namespace)?;
    let client = match (&app.login, who.identity()) {
        (Some(login), Some(identity)) => login.users.client(identity)?,
        _ => app.client.clone(),
    };
    let target = crate::kube_target::Target { client, namespace };
    let text = super::super::explain::text(&target, &name, "kubectl sluice").await?;
    Ok(Json(json!({"text": text})))
}

pub async fn watch_list(
    State(app): State<Dashboard>,
    Path(namespace): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    app.check_namespace(&namespace)?;
    let chunks = Chunks::new(compress::accepts_gzip(&headers));
    Ok(stream(Live::new(app.cache, namespace, None, chunks)))
}

pub async fn watch_one(
    State(app): State<Dashboard>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    app.check_namespace(&namespace)?;
    let chunks = Chunks::new(compress::accepts_gzip(&headers));
    Ok(stream(Live::new(app.cache, namespace, Some(name), chunks)))
}

/// A stream of JSON lines as grpc-gateway sends a server stream: `{"result": ...}` each.
fn stream(live: Live) -> Response {
    let gzipped = live.chunks.gzipped();
    let lines = futures::stream::unfold(live, |mut live| async move {
        let chunk = live.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), live))
    });
    let mut response = Body::from_stream(lines).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Stops proxies that buffer responses (nginx) from holding the lines back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if gzipped {
        compress::mark_gzipped(headers);
    }
    response
}

/// One open watch: what it last sent of each Rollout, so that only changes are sent. It
/// lives as long as the browser keeps the connection; dropping it ends its work.
struct Live {
    cache: Cache,
    namespace: String,
    /// One Rollout, or the whole namespace.
    name: Option<String>,
    changes: watch::Receiver<u64>,
    /// The JSON of each Rollout's info as last sent: text, several times smaller than the
    /// same as a `Value`, held for as long as the page stays open.
    sent: HashMap<String, Box<str>>,
    pending: Vec<u8>,
    chunks: Chunks,
    started: bool,
}

impl Live {
    fn new(cache: Cache, namespace: String, name: Option<String>, chunks: Chunks) -> Self {
        let changes = cache.changes();
        Self {
            cache,
            namespace,
            name,
            changes,
            sent: HashMap::new(),
            pending: Vec::new(),
            chunks,
            started: false,
        }
    }

    /// The next lines to send, as one chunk: the current state first, then the changes;
    /// `None` when the watches have stopped.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if !self.pending.is_empty() {
                let lines = std::mem::take(&mut self.pending);
                return Some(self.chunks.encode(&lines));
            }
            if self.started {
                tokio::select! {
                    changed = self.changes.changed() => changed.ok()?,
                    () = tokio::time::sleep(KEEP_ALIVE) => return Some(self.chunks.encode(b"\n")),
                }
                tokio::time::sleep(SETTLE).await;
            } else {
                self.cache.ready().await;
                self.started = true;
            }
            self.changes.borrow_and_update();
            self.collect();
        }
    }

    /// Queues a line for every Rollout whose info differs from what was last sent.
    fn collect(&mut self) {
        let now = Timestamp::now();
        let current: Vec<(String, Value)> = match &self.name {
            Some(name) => views::one(&self.cache, &self.namespace, name, now)
                .map(|info| (name.clone(), info))
                .into_iter()
                .collect(),
            None => views::list(&self.cache, &self.namespace, now),
        };
        let gone: Vec<String> = self
            .sent
            .keys()
            .filter(|name| !current.iter().any(|(n, _)| n == *name))
            .cloned()
            .collect();
        for name in gone {
            self.sent.remove(&name);
            if self.name.is_none() {
                // Argo's stream never says a Rollout is gone; the page needs to know.
                let info = json!({"objectMeta": {"name": name, "namespace": self.namespace}});
                self.push(json!({"result": {"type": "Deleted", "rolloutInfo": info}}));
            }
        }
        for (name, info) in current {
            let info = info.to_string();
            if self.sent.get(&name).is_some_and(|sent| **sent == *info) {
                continue;
            }
            let line = match &self.name {
                Some(_) => format!("{{\"result\":{info}}}"),
                None => views::watch_event(&info),
            };
            self.push_text(&line);
            self.sent.insert(name, info.into_boxed_str());
        }
    }

    fn push(&mut self, line: Value) {
        self.push_text(&line.to_string());
    }

    fn push_text(&mut self, line: &str) {
        self.pending.extend_from_slice(line.as_bytes());
        self.pending.push(b'\n');
    }
}

/// The page and its files, for every path outside the API.
pub async fn page(uri: axum::http::Uri) -> Response {
    super::assets::file(uri.path())
}

/// An unknown API path: JSON, not the page.
pub async fn no_such_api() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such API path")
}
