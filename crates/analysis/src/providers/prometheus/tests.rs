use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use sluice_api::common::AnalysisPhase;

use super::super::ProviderSettings;
use super::super::test_support::{ctx, metric_with, providers, serve};
use super::*;
use crate::redact::Redactor;
use sluice_api::analysis::Metric;

#[derive(Clone, Debug)]
struct Seen {
    path: String,
    form: HashMap<String, String>,
    headers: HeaderMap,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A Prometheus that answers by query: `healthy` 0.99, `bad` 0.5, `middle` 0.8 (vectors);
/// `scalar`, `empty`, `matrix`, `nan`, `two`; `boom` (500), `bad_data` (400), `slow`.
fn fake_prometheus(log: Log) -> Router {
    async fn answer(
        State(log): State<Log>,
        uri: axum::http::Uri,
        headers: HeaderMap,
        Form(form): Form<HashMap<String, String>>,
    ) -> (StatusCode, Json<serde_json::Value>) {
        let path = uri.path().to_owned();
        log.lock().unwrap().push(Seen {
            path: path.clone(),
            form: form.clone(),
            headers,
        });
        let instant = path == "/api/v1/query";
        let times_ok = if instant {
            form.get("time").is_some_and(|t| t.parse::<f64>().is_ok())
        } else {
            ["start", "end"].iter().all(|k| {
                form.get(*k)
                    .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok())
            }) && form.get("step").is_some_and(|s| s.parse::<f64>().is_ok())
        };
        if !times_ok {
            let error = json!({"status": "error", "errorType": "bad_data", "error": "bad time"});
            return (StatusCode::BAD_REQUEST, Json(error));
        }
        let vector = |v: &str| {
            json!({"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"job": "x"}, "value": [1700000000.5, v]}
            ]}})
        };
        let query = form.get("query").cloned().unwrap_or_default();
        let reply = match query.as_str() {
            "healthy" => vector("0.99"),
            "bad" => vector("0.5"),
            "middle" => vector("0.8"),
            "nan" => vector("NaN"),
            "two" => json!({"status": "success", "warnings": ["w1", "w2"], "data": {
            "resultType": "vector", "result": [
                {"metric": {}, "value": [1, "1"]}, {"metric": {}, "value": [1, "+Inf"]}
            ]}}),
            "scalar" => {
                json!({"status": "success", "data": {"resultType": "scalar", "result": [1, "0.99"]}})
            }
            "empty" => {
                json!({"status": "success", "data": {"resultType": "vector", "result": []}})
            }
            "matrix" => {
                json!({"status": "success", "data": {"resultType": "matrix", "result": [
                    {"metric": {"a": "1"}, "values": [[1, "10"], [2, "20"]]},
                    {"metric": {"a": "2"}, "values": [[1, "30"]]}
                ]}})
            }
            "string" => {
                json!({"status": "success", "data": {"resultType": "string", "result": [1, "s"]}})
            }
            "boom" => return (StatusCode::INTERNAL_SERVER_ERROR, Json(json!("oops"))),
            "bad_data" => {
                let error = json!({"status": "error", "errorType": "bad_data", "error": "parse error at char 3"});
                return (StatusCode::BAD_REQUEST, Json(error));
            }
            "slow" => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                vector("1")
            }
            _ => json!({"status": "error", "errorType": "bad_data", "error": "unknown query"}),
        };
        (StatusCode::OK, Json(reply))
    }
    Router::new()
        .route("/api/v1/query", post(answer))
        .route("/api/v1/query_range", post(answer))
        .with_state(log)
}

async fn start() -> (String, Log) {
    let log: Log = Default::default();
    (serve(fake_prometheus(log.clone())).await, log)
}

fn metric(address: &str, query: &str, extra: serde_json::Value) -> Metric {
    let mut prom = json!({"address": address, "query": query});
    if let (Some(p), Some(e)) = (prom.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    metric_with(
        "success-rate",
        json!({"prometheus": prom}),
        Some("result[0] >= 0.95"),
        Some("result[0] < 0.6"),
    )
}

#[tokio::test]
async fn healthy_bad_and_inconclusive() {
    let (url, log) = start().await;
    let p = providers(Default::default());
    let cases = [
        ("healthy", AnalysisPhase::Successful, "[0.99]"),
        ("bad", AnalysisPhase::Failed, "[0.5]"),
        ("middle", AnalysisPhase::Inconclusive, "[0.8]"),
    ];
    for (query, phase, value) in cases {
        let m = p.measure(&ctx(), &metric(&url, query, json!({}))).await;
        assert_eq!(m.phase, Some(phase), "{query}: {:?}", m.message);
        assert_eq!(m.value.as_deref(), Some(value));
        assert_eq!(m.message, None);
        assert!(m.started_at.is_some() && m.finished_at.is_some());
    }
    let seen = log.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].path, "/api/v1/query");
    assert_eq!(seen[0].form["query"], "healthy");
}

#[tokio::test]
async fn result_shapes() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let run = |query: &'static str, success: &'static str| {
        let mut m = metric(&url, query, json!({}));
        m.success_condition = Some(success.into());
        m.failure_condition = None;
        let p = p.clone();
        async move { p.measure(&ctx(), &m).await }
    };
    let m = run("scalar", "result >= 0.95").await;
    assert_eq!(
        (m.phase, m.value.as_deref()),
        (Some(AnalysisPhase::Successful), Some("0.99"))
    );
    let m = run("matrix", "all(result, # < 100) && len(result) == 3").await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.message);
    assert_eq!(m.value.as_deref(), Some("[10,20,30]"));
    let m = run("nan", "isNaN(result[0])").await;
    assert_eq!(
        (m.phase, m.value.as_deref()),
        (Some(AnalysisPhase::Successful), Some("[NaN]"))
    );
    let m = run("two", "isInf(result[1])").await;
    assert_eq!(
        (m.phase, m.value.as_deref()),
        (Some(AnalysisPhase::Successful), Some("[1,+Inf]"))
    );
    assert_eq!(m.metadata.unwrap()["warnings"], "\"w1\", \"w2\"");
    let m = run("string", "true").await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        m.message.as_deref(),
        Some("prometheus result type \"string\" is not supported")
    );
}

#[tokio::test]
async fn empty_vector_with_index_is_an_error() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let m = p.measure(&ctx(), &metric(&url, "empty", json!({}))).await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(m.value.as_deref(), Some("[]"));
    assert!(m.message.unwrap().contains("(result is an empty list)"));
}

#[tokio::test]
async fn server_errors() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let m = p.measure(&ctx(), &metric(&url, "boom", json!({}))).await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        m.message.as_deref(),
        Some("prometheus returned 500 Internal Server Error: \"oops\"")
    );
    assert!(m.finished_at.is_some());
    let m = p
        .measure(&ctx(), &metric(&url, "bad_data", json!({})))
        .await;
    assert_eq!(
        m.message.as_deref(),
        Some("bad_data: parse error at char 3")
    );
}

#[tokio::test]
async fn timeout_is_an_error() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let m = p
        .measure(&ctx(), &metric(&url, "slow", json!({"timeout": 1})))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        m.message.as_deref(),
        Some(format!("request to {url}/api/v1/query timed out after 1s").as_str())
    );
}

#[tokio::test]
async fn unreachable_server_is_an_error() {
    let p = providers(Default::default());
    let m = p
        .measure(&ctx(), &metric("http://127.0.0.1:1", "healthy", json!({})))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert!(
        m.message
            .unwrap()
            .contains("http://127.0.0.1:1/api/v1/query")
    );
}

#[tokio::test]
async fn headers_and_address_from_env() {
    let (url, log) = start().await;
    let settings = ProviderSettings {
        prometheus_address: Some(url.clone()),
        ..Default::default()
    };
    let p = providers(settings);
    let mut m = metric(
        "",
        "healthy",
        json!({"headers": [{"key": "X-Scope-OrgID", "value": "tenant_a"}]}),
    );
    if let Some(prom) = m.provider.as_mut().and_then(|p| p.prometheus.as_mut()) {
        prom.address = None;
    }
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Successful),
        "{:?}",
        measurement.message
    );
    let seen = log.lock().unwrap();
    assert_eq!(seen[0].headers["x-scope-orgid"], "tenant_a");
}

#[tokio::test]
async fn configuration_errors() {
    let p = providers(Default::default());
    let cases = [
        (
            metric("", "q", json!({})),
            "prometheus address is not configured",
        ),
        (
            metric("not a url", "q", json!({})),
            "prometheus address \"not a url\" is not a URL",
        ),
        (
            metric("http://h", "q", json!({"timeout": -1})),
            "prometheus timeout should not be negative",
        ),
        (
            metric("http://h", " ", json!({})),
            "prometheus query is empty",
        ),
        (
            metric(
                "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1",
                "q",
                json!({"authentication": {"sigv4": {"region": "eu-west-1"}}}),
            ),
            "could not get SigV4 credentials: no AWS credentials provider configured",
        ),
        (
            metric(
                "http://h",
                "q",
                json!({"rangeQuery": {"start": "now() - 5", "step": "1m"}}),
            ),
            "prometheus rangeQuery.start \"now() - 5\" could not be evaluated",
        ),
        (
            metric(
                "http://h",
                "q",
                json!({"rangeQuery": {"start": "'yesterday'", "step": "1m"}}),
            ),
            "prometheus rangeQuery.start \"'yesterday'\" is not a time; use e.g. now() - duration(\"5m\")",
        ),
        (
            metric(
                "http://h",
                "q",
                json!({"rangeQuery": {"start": "now()", "step": "soon"}}),
            ),
            "prometheus rangeQuery.step \"soon\" is invalid",
        ),
        (
            metric(
                "http://h",
                "q",
                json!({"rangeQuery": {"start": "len(1..99999999999)", "step": "1m"}}),
            ),
            "prometheus rangeQuery.start \"len(1..99999999999)\" is refused: the range operator",
        ),
        (
            metric("http://h", "q", json!({"rangeQuery": {"step": "1m"}})),
            "prometheus rangeQuery.start is required",
        ),
        (
            metric(
                "http://h",
                "q",
                json!({"rangeQuery": {"start": "now()", "end": "now() - duration('1h')", "step": "1m"}}),
            ),
            "prometheus rangeQuery.end is before rangeQuery.start",
        ),
    ];
    for (m, message) in cases {
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
        let got = measurement.message.unwrap();
        assert!(
            got.starts_with(message),
            "{got:?} should start with {message:?}"
        );
    }
}

#[tokio::test]
async fn range_query() {
    let (url, log) = start().await;
    let p = providers(Default::default());
    let mut m = metric(
        &url,
        "matrix",
        json!({"rangeQuery": {"start": "now() - duration(\"5m\")", "end": "now()", "step": "1m"}}),
    );
    m.success_condition = Some("all(result, # < 1000)".into());
    m.failure_condition = None;
    let before = jiff::Timestamp::now();
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Successful),
        "{:?}",
        measurement.message
    );
    let seen = log.lock().unwrap();
    assert_eq!(seen[0].path, "/api/v1/query_range");
    let start: jiff::Timestamp = seen[0].form["start"].parse().unwrap();
    let end: jiff::Timestamp = seen[0].form["end"].parse().unwrap();
    assert_eq!(end.duration_since(start).as_secs(), 300);
    assert!(
        end >= before
            .checked_sub(jiff::SignedDuration::from_secs(1))
            .unwrap()
    );
    assert_eq!(seen[0].form["step"], "60");
}

#[tokio::test]
async fn oauth2_bearer_token() {
    async fn token(
        headers: HeaderMap,
        Form(form): Form<HashMap<String, String>>,
    ) -> (StatusCode, Json<serde_json::Value>) {
        let basic = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        // "id:s3cret" in base64.
        if basic == "Basic aWQ6czNjcmV0"
            && form["grant_type"] == "client_credentials"
            && form["scope"] == "a b"
        {
            (
                StatusCode::OK,
                Json(json!({"access_token": "tok", "token_type": "bearer"})),
            )
        } else {
            (
                StatusCode::UNAUTHORIZED,
                Json(json!({"error": "invalid_client"})),
            )
        }
    }
    let log: Log = Default::default();
    let router = fake_prometheus(log.clone()).route("/token", post(token));
    let url = serve(router).await;
    let p = providers(Default::default());
    let m = metric(
        &url,
        "healthy",
        json!({"authentication": {"oauth2": {
            "tokenUrl": format!("{url}/token"), "clientId": "id", "clientSecret": "s3cret", "scopes": ["a", "b"]
        }}}),
    );
    let measurement = p
        .measure(&ctx().with_redactor(Redactor::new(["s3cret"])), &m)
        .await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Successful),
        "{:?}",
        measurement.message
    );
    assert_eq!(
        log.lock().unwrap()[0].headers["authorization"],
        "Bearer tok"
    );
}

/// `authentication.basicAuth` (Argo's master): the query carries HTTP basic authentication.
#[tokio::test]
async fn basic_auth() {
    let log: Log = Default::default();
    let url = serve(fake_prometheus(log.clone())).await;
    let p = providers(Default::default());
    let m = metric(
        &url,
        "healthy",
        json!({"authentication": {"basicAuth": {"username": "12345", "password": "glc_s3cret"}}}),
    );
    let measurement = p
        .measure(&ctx().with_redactor(Redactor::new(["glc_s3cret"])), &m)
        .await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Successful),
        "{:?}",
        measurement.message
    );
    // "12345:glc_s3cret" in base64.
    assert_eq!(
        log.lock().unwrap()[0].headers["authorization"],
        "Basic MTIzNDU6Z2xjX3MzY3JldA=="
    );
}
