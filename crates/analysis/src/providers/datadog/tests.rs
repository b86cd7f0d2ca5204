use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use sluice_api::common::AnalysisPhase;

use super::super::ProviderSettings;
use super::super::test_support::{ctx, metric_with, providers_with, serve};
use super::*;
use crate::secrets::MemorySecrets;
use sluice_api::analysis::Metric;

const API: &str = "0123456789abcdef0123456789abcdef";
const APP: &str = "0123456789abcdef0123456789abcdef01234567";

type Log = Arc<Mutex<Vec<serde_json::Value>>>;

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("dd-api-key").is_some_and(|v| v == API)
        && headers.get("dd-application-key").is_some_and(|v| v == APP)
        && headers
            .get("content-type")
            .is_some_and(|v| v == "application/json")
}

/// v1 answers by query: `healthy` ends at 0.001, `bad` at 0.5, `middle` at 0.02, `empty`,
/// `null`; v2 by the first query's text, with `grouped` and `broken` besides.
fn fake_datadog(log: Log) -> Router {
    async fn v1(
        State(log): State<Log>,
        headers: HeaderMap,
        Query(q): Query<HashMap<String, String>>,
    ) -> (StatusCode, Json<serde_json::Value>) {
        log.lock().unwrap().push(json!(q));
        if !authorized(&headers) {
            return (
                StatusCode::FORBIDDEN,
                Json(json!({"errors": ["Forbidden"]})),
            );
        }
        let (Some(from), Some(to)) = (
            q.get("from").and_then(|f| f.parse::<i64>().ok()),
            q.get("to").and_then(|t| t.parse::<i64>().ok()),
        ) else {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"errors": ["from/to"]})),
            );
        };
        let series = |last: serde_json::Value| {
            json!({"status": "ok", "from_date": from * 1000, "to_date": to * 1000,
                   "series": [{"pointlist": [[from * 1000, 0.7], [to * 1000, last]]}]})
        };
        let body = match q.get("query").map(String::as_str) {
            Some("healthy") => series(json!(0.001)),
            Some("bad") => series(json!(0.5)),
            Some("middle") => series(json!(0.02)),
            Some("null") => series(json!(null)),
            Some("empty") => json!({"status": "ok", "series": []}),
            Some("boom") => {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"errors": ["boom"]})),
                );
            }
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"errors": ["unknown query"]})),
                );
            }
        };
        (StatusCode::OK, Json(body))
    }
    async fn v2(
        State(log): State<Log>,
        headers: HeaderMap,
        Json(body): Json<serde_json::Value>,
    ) -> (StatusCode, Json<serde_json::Value>) {
        log.lock().unwrap().push(body.clone());
        if !authorized(&headers) {
            return (
                StatusCode::UNAUTHORIZED,
                Json(json!({"errors": ["No authenticated user."]})),
            );
        }
        let attrs = &body["data"]["attributes"];
        if body["data"]["type"] != "scalar_request"
            || !attrs["from"].is_i64()
            || !attrs["to"].is_i64()
            || !attrs["formulas"][0]["formula"].is_string()
        {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"errors": ["malformed request"]})),
            );
        }
        let number = |values: serde_json::Value| {
            json!({"data": {"type": "scalar_response", "attributes": {"columns": [
                {"name": "query", "type": "number", "values": values, "meta": {"unit": null}}
            ]}}})
        };
        let reply = match attrs["queries"][0]["query"].as_str() {
            Some("healthy") => number(json!([0.001])),
            Some("bad") => number(json!([0.5])),
            Some("empty") => number(json!([])),
            Some("grouped") => {
                json!({"data": {"type": "scalar_response", "attributes": {"columns": [
                    {"name": "resource_name", "type": "group", "values": [["GET /a"], ["GET /b"]]},
                    {"name": "a", "type": "number", "values": [0.01, 0.2]}
                ]}}})
            }
            Some("broken") => {
                json!({"data": {"type": "scalar_response", "attributes": {"columns": []}},
                                     "errors": "Error parsing query"})
            }
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"errors": ["unknown query"]})),
                );
            }
        };
        (StatusCode::OK, Json(reply))
    }
    Router::new()
        .route("/api/v1/query", get(v1))
        .route("/api/v2/query/scalar", post(v2))
        .with_state(log)
}

async fn start() -> (String, Log, MemorySecrets) {
    let log: Log = Default::default();
    let url = serve(fake_datadog(log.clone())).await;
    let secrets = MemorySecrets::new();
    secrets.insert(
        "argo-rollouts",
        "datadog",
        [
            ("address", url.as_str()),
            ("api-key", API),
            ("app-key", APP),
        ],
    );
    (url, log, secrets)
}

fn metric(dd: serde_json::Value, success: &str, failure: Option<&str>) -> Metric {
    metric_with("error-rate", json!({"datadog": dd}), Some(success), failure)
}

#[tokio::test]
async fn v1_phases_and_window() {
    let (_, log, secrets) = start().await;
    let p = providers_with(Default::default(), secrets);
    let cases = [
        ("healthy", AnalysisPhase::Successful, "0.001"),
        ("bad", AnalysisPhase::Failed, "0.5"),
        ("middle", AnalysisPhase::Inconclusive, "0.02"),
    ];
    for (query, phase, value) in cases {
        let m = metric(
            json!({"query": query, "interval": "10m"}),
            "result < 0.01",
            Some("result >= 0.1"),
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(phase), "{:?}", measurement.message);
        assert_eq!(measurement.value.as_deref(), Some(value));
        assert!(measurement.started_at.is_some() && measurement.finished_at.is_some());
    }
    let seen = log.lock().unwrap();
    let from: i64 = seen[0]["from"].as_str().unwrap().parse().unwrap();
    let to: i64 = seen[0]["to"].as_str().unwrap().parse().unwrap();
    assert_eq!(to - from, 600);
}

#[tokio::test]
async fn v1_empty_and_null_results_are_nil() {
    let (_, _, secrets) = start().await;
    let p = providers_with(Default::default(), secrets);
    for query in ["empty", "null"] {
        let m = metric(json!({"query": query}), "default(result, 0) < 0.05", None);
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(
            measurement.phase,
            Some(AnalysisPhase::Successful),
            "{:?}",
            measurement.message
        );
        let m = metric(json!({"query": query}), "result < 0.05", None);
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
        assert!(measurement.message.unwrap().ends_with("(result is nil)"));
    }
    let m = metric(json!({"query": "empty"}), "true", None);
    assert_eq!(p.measure(&ctx(), &m).await.value.as_deref(), Some("[]"));
}

#[tokio::test]
async fn v2_scalar_queries() {
    let (_, log, secrets) = start().await;
    let p = providers_with(Default::default(), secrets);
    let m = metric(
        json!({"apiVersion": "v2", "query": "healthy"}),
        "result < 0.01",
        None,
    );
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Successful),
        "{:?}",
        measurement.message
    );
    assert_eq!(measurement.value.as_deref(), Some("0.001"));
    let m = metric(
        json!({"apiVersion": "v2", "interval": "1m", "aggregator": "sum",
               "queries": {"a": "bad", "b": "other"}, "formula": "a / b"}),
        "result < 0.01",
        None,
    );
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Failed),
        "{:?}",
        measurement.message
    );
    let m = metric(
        json!({"apiVersion": "v2", "query": "empty"}),
        "default(result, 0) < 0.05",
        None,
    );
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(measurement.phase, Some(AnalysisPhase::Successful));

    let seen = log.lock().unwrap();
    let attrs = &seen[0]["data"]["attributes"];
    assert_eq!(
        attrs["queries"],
        json!([{"data_source": "metrics", "name": "query", "query": "healthy", "aggregator": "last"}])
    );
    assert_eq!(attrs["formulas"], json!([{"formula": "query"}]));
    assert_eq!(
        attrs["to"].as_i64().unwrap() - attrs["from"].as_i64().unwrap(),
        300_000
    );
    let attrs = &seen[1]["data"]["attributes"];
    assert_eq!(attrs["queries"][1]["name"], "b");
    assert_eq!(attrs["queries"][1]["aggregator"], "sum");
    assert_eq!(attrs["formulas"], json!([{"formula": "a / b"}]));
    assert_eq!(
        attrs["to"].as_i64().unwrap() - attrs["from"].as_i64().unwrap(),
        60_000
    );
}

#[tokio::test]
async fn v2_grouped_query_is_a_list() {
    let (_, _, secrets) = start().await;
    let p = providers_with(Default::default(), secrets);
    let m = metric(
        json!({"apiVersion": "v2", "query": "grouped"}),
        "max(result) < 0.05",
        None,
    );
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Failed),
        "{:?}",
        measurement.message
    );
    assert_eq!(measurement.value.as_deref(), Some("[0.01,0.2]"));
    assert_eq!(
        measurement.metadata.unwrap()["groups"],
        r#"[{"name":"GET /b","value":0.2},{"name":"GET /a","value":0.01}]"#
    );
}

#[tokio::test]
async fn errors() {
    let (_, _, secrets) = start().await;
    let p = providers_with(Default::default(), secrets);
    let cases = [
        (
            json!({"query": "boom"}),
            "received non 2xx response code: 500 {\"errors\":[\"boom\"]}",
        ),
        (
            json!({"apiVersion": "v2", "query": "broken"}),
            "There were errors in your query: Error parsing query",
        ),
        (
            json!({"apiVersion": "v3", "query": "x"}),
            "invalid Datadog API version \"v3\"",
        ),
        (
            json!({"query": "x", "interval": "often"}),
            "datadog interval \"often\" is invalid",
        ),
        (
            json!({"queries": {"a": "x"}}),
            "datadog queries and formula need apiVersion v2",
        ),
        (
            json!({"apiVersion": "v2", "queries": {"a": "x", "b": "y"}}),
            "datadog formula is required when several queries are set",
        ),
        (
            json!({"apiVersion": "v2", "query": "x", "queries": {"a": "x"}}),
            "datadog query and queries cannot both be set",
        ),
        (json!({"apiVersion": "v2"}), "datadog query is empty"),
        // Argo 1.10's requestTimeout, in its words.
        (
            json!({"query": "x", "requestTimeout": "soon"}),
            "Could not parse the request timeout: time: invalid duration \"soon\". Please review",
        ),
        (
            json!({"query": "x", "requestTimeout": "-5s"}),
            "Request timeout must be a positive duration (e.g. 30s).",
        ),
        (
            json!({"query": "x", "requestTimeout": "0s"}),
            "Request timeout must be a positive duration (e.g. 30s).",
        ),
    ];
    for (dd, message) in cases {
        let measurement = p.measure(&ctx(), &metric(dd, "true", None)).await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
        let got = measurement.message.unwrap();
        assert!(
            got.starts_with(message),
            "{got:?} should start with {message:?}"
        );
    }
}

#[tokio::test]
async fn credentials_lookup_order_and_redaction() {
    let (url, _, _) = start().await;
    let m = |secret_ref: serde_json::Value| {
        metric(
            json!({"query": "healthy", "secretRef": secret_ref}),
            "result < 0.01",
            None,
        )
    };
    // No credentials anywhere.
    let p = providers_with(Default::default(), MemorySecrets::new());
    let measurement = p.measure(&ctx(), &m(json!(null))).await;
    assert_eq!(
        measurement.message.as_deref(),
        Some("datadog API or App token not found")
    );

    // A namespaced Secret of the run's namespace.
    let secrets = MemorySecrets::new();
    secrets.insert(
        "ns",
        "mine",
        [
            ("address", url.as_str()),
            ("api-key", API),
            ("app-key", APP),
        ],
    );
    let p = providers_with(Default::default(), secrets.clone());
    let measurement = p
        .measure(&ctx(), &m(json!({"name": "mine", "namespaced": true})))
        .await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Successful),
        "{:?}",
        measurement.message
    );
    // Not namespaced: looked up in the controller's namespace, where it is missing.
    let measurement = p.measure(&ctx(), &m(json!({"name": "mine"}))).await;
    assert_eq!(measurement.phase, Some(AnalysisPhase::Error));

    // Environment credentials come before the controller's Secret.
    let settings = ProviderSettings {
        datadog: Some(DatadogCredentials {
            address: Some(url.clone()),
            api_key: "wrong-api-key-123".into(),
            app_key: APP.into(),
        }),
        ..Default::default()
    };
    secrets.insert(
        "argo-rollouts",
        "datadog",
        [
            ("address", url.as_str()),
            ("api-key", API),
            ("app-key", APP),
        ],
    );
    let p = providers_with(settings, secrets);
    let measurement = p.measure(&ctx(), &m(json!(null))).await;
    assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
    let message = measurement.message.unwrap();
    assert!(
        message.starts_with("received authentication error response code: 403"),
        "{message}"
    );

    // A server echoing the keys does not leak them.
    let leaky = serve(Router::new().route(
        "/api/v1/query",
        get(|headers: HeaderMap| async move {
            let key = headers["dd-api-key"]
                .to_str()
                .unwrap_or_default()
                .to_owned();
            (StatusCode::BAD_REQUEST, format!("bad key {key}"))
        }),
    ))
    .await;
    let secrets = MemorySecrets::new();
    secrets.insert(
        "argo-rollouts",
        "datadog",
        [
            ("address", leaky.as_str()),
            ("api-key", API),
            ("app-key", APP),
        ],
    );
    let p = providers_with(Default::default(), secrets);
    let measurement = p.measure(&ctx(), &m(json!(null))).await;
    assert_eq!(
        measurement.message.as_deref(),
        Some("received non 2xx response code: 400 bad key *****")
    );
}
