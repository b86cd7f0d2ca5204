//! A local server answering each `(method, path)` as told, for services that make several
//! different calls (the shared recorder gives every request one answer).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::routing::any;
use serde_json::{Value, json};

/// By `(method, path)`: the status and body answered.
type Answers = BTreeMap<(String, String), (u16, Value)>;

#[derive(Debug, Clone)]
pub struct Hit {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Value,
}

/// The server: each `(method, path)` has its answer; anything else is a 404.
#[derive(Clone, Default)]
pub struct Routes {
    hits: Arc<Mutex<Vec<Hit>>>,
    answers: Arc<Mutex<Answers>>,
}

impl Routes {
    pub async fn start() -> (String, Routes) {
        async fn handle(
            State(gh): State<Routes>,
            method: Method,
            uri: Uri,
            headers: HeaderMap,
            body: Bytes,
        ) -> (StatusCode, String) {
            let hit = Hit {
                method: method.to_string(),
                path: uri.path().to_owned(),
                query: uri.query().unwrap_or_default().to_owned(),
                headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            };
            gh.hits.lock().unwrap().push(hit.clone());
            let answers = gh.answers.lock().unwrap();
            match answers.get(&(hit.method, hit.path)) {
                Some((status, answer)) => {
                    (StatusCode::from_u16(*status).unwrap(), answer.to_string())
                }
                None => (
                    StatusCode::NOT_FOUND,
                    json!({"message": "Not Found"}).to_string(),
                ),
            }
        }
        let gh = Routes::default();
        let app = Router::new().fallback(any(handle)).with_state(gh.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}"), gh)
    }

    pub fn answer(&self, method: &str, path: &str, status: u16, body: Value) {
        self.answers
            .lock()
            .unwrap()
            .insert((method.into(), path.into()), (status, body));
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}
