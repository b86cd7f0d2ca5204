use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;

use super::super::test_support::{ctx, metric_with, providers, serve};
use super::*;

type Log = Arc<Mutex<Vec<serde_json::Value>>>;

/// Speaks SkyWalking's GraphQL API (`POST /graphql`, `{"query", "variables"}`), answering
/// `readMetricsValues` for a few metric names as the OAP server does: `{"data": {<alias>:
/// {"label": ..., "values": {"values": [{"value": n}, ...]}}}}`, GraphQL errors in `errors`.
fn fake_skywalking(log: Log) -> Router {
    async fn graphql(
        State(log): State<Log>,
        Json(request): Json<serde_json::Value>,
    ) -> (StatusCode, String) {
        log.lock().unwrap().push(request.clone());
        let query = request["query"].as_str().unwrap_or_default();
        let values = |vs: &[i64]| json!({"values": {"values": vs.iter().map(|v| json!({"value": v})).collect::<Vec<_>>()}, "label": null});
        let answer = if query.contains("name: \"healthy_apdex\"") {
            json!({"data": {"service_apdex": values(&[9950, 9990])}})
        } else if query.contains("name: \"poor_apdex\"") {
            json!({"data": {"service_apdex": values(&[9950, 5000])}})
        } else if query.contains("name: \"gone\"") {
            json!({"data": null})
        } else if query.contains("crash") {
            return (
                StatusCode::BAD_GATEWAY,
                "<html>bad gateway</html>".to_owned(),
            );
        } else {
            json!({"data": null, "errors": [{"message": "Validation error of type FieldUndefined"}]})
        };
        (StatusCode::OK, answer.to_string())
    }
    Router::new()
        .route("/graphql", post(graphql))
        .with_state(log)
}

async fn start() -> (String, Log) {
    let log = Log::default();
    (serve(fake_skywalking(log.clone())).await, log)
}

fn query(name: &str) -> String {
    format!(
        "query queryData($duration: Duration!) {{ service_apdex: readMetricsValues(condition: \
         {{ name: \"{name}\", entity: {{ scope: Service, serviceName: \"app\", normal: true }} }}, \
         duration: $duration) {{ label values {{ values {{ value }} }} }} }}"
    )
}

fn metric(address: &str, name: &str, interval: Option<&str>) -> Metric {
    metric_with(
        "apdex",
        json!({"skywalking": {"address": address, "query": query(name), "interval": interval}}),
        Some("all(result.service_apdex.values.values, #.value >= 9900)"),
        Some("any(result.service_apdex.values.values, #.value < 9000)"),
    )
}

#[tokio::test]
async fn success_and_failure() {
    let (url, log) = start().await;
    let p = providers(Default::default());

    let healthy = p
        .measure(&ctx(), &metric(&url, "healthy_apdex", Some("5m")))
        .await;
    assert_eq!(
        healthy.phase,
        Some(AnalysisPhase::Successful),
        "{healthy:?}"
    );
    assert_eq!(
        healthy.value.as_deref(),
        Some(
            r#"{"service_apdex":{"label":null,"values":{"values":[{"value":9950},{"value":9990}]}}}"#
        )
    );

    let poor = p
        .measure(&ctx(), &metric(&url, "poor_apdex", Some("5m")))
        .await;
    assert_eq!(poor.phase, Some(AnalysisPhase::Failed), "{poor:?}");

    let sent = log.lock().unwrap()[0].clone();
    assert_eq!(sent["query"], query("healthy_apdex"));
    let duration = &sent["variables"]["duration"];
    assert_eq!(duration["step"], "MINUTE");
    let minute = |field: &str| {
        jiff::civil::DateTime::strptime(MINUTE_FORMAT, duration[field].as_str().unwrap()).unwrap()
    };
    let window = minute("end").duration_since(minute("start"));
    assert_eq!(window, jiff::SignedDuration::from_mins(5));
}

#[tokio::test]
async fn errors() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let cases = [
        (
            metric(&url, "unknown", Some("5m")),
            "graphql: Validation error of type FieldUndefined",
        ),
        (
            metric(&url, "gone", Some("5m")),
            "no results returned from SkyWalking query",
        ),
        (
            metric(&url, "crash", Some("5m")),
            "graphql: server returned a non-200 status code: 502",
        ),
        (
            metric(&url, "healthy_apdex", None),
            "time: invalid duration \"\"",
        ),
    ];
    for (m, message) in cases {
        let measured = p.measure(&ctx(), &m).await;
        assert_eq!(measured.phase, Some(AnalysisPhase::Error), "{message}");
        assert_eq!(measured.message.as_deref(), Some(message));
        assert!(measured.value.is_none());
    }
}

#[test]
fn keys_are_sorted_as_go_writes_maps() {
    let value = json!({"b": 1, "a": {"d": [{"z": 1, "y": 2}], "c": null}});
    assert_eq!(
        sorted(&value).to_string(),
        r#"{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}"#
    );
}
