use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use sluice_api::common::AnalysisPhase;

use super::super::test_support::{ctx, metric_with, providers_with, serve};
use super::*;
use crate::secrets::MemorySecrets;
use sluice_api::analysis::Metric;

const KEY: &str = "NRAK-TESTKEY0123456789";

type Log = Arc<Mutex<Vec<serde_json::Value>>>;

/// NerdGraph answering by NRQL text.
fn fake_nerdgraph(log: Log) -> Router {
    async fn graphql(
        State(log): State<Log>,
        headers: HeaderMap,
        Json(body): Json<serde_json::Value>,
    ) -> (StatusCode, Json<serde_json::Value>) {
        log.lock().unwrap().push(body.clone());
        if headers.get("api-key").is_none_or(|k| k != KEY) {
            return (
                StatusCode::OK,
                Json(json!({"errors": [{"message": "Invalid API key"}], "data": null})),
            );
        }
        let vars = &body["variables"];
        if !body["query"]
            .as_str()
            .is_some_and(|q| q.contains("nrql(query: $query"))
            || vars["accountId"] != 12345
        {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"errors": [{"message": "malformed"}]})),
            );
        }
        let rows = match vars["query"].as_str().unwrap_or_default() {
            "healthy" => json!([{"successRate": 0.99}]),
            "bad" => json!([{"successRate": 0.5}]),
            "middle" => json!([{"successRate": 0.8}]),
            "facet" => json!([{"facet": "a", "count": 1}, {"facet": "b", "count": 2}]),
            "none" => json!([]),
            "blank" => json!([{}]),
            _ => {
                return (
                    StatusCode::OK,
                    Json(json!({"errors": [{"message": "NRQL Syntax Error"}]})),
                );
            }
        };
        let reply = json!({"data": {"actor": {"account": {"nrql": {"results": rows}}}}});
        (StatusCode::OK, Json(reply))
    }
    Router::new()
        .route("/graphql", post(graphql))
        .with_state(log)
}

async fn start(profile: &str) -> (Log, MemorySecrets) {
    let log: Log = Default::default();
    let url = serve(fake_nerdgraph(log.clone())).await;
    let secrets = MemorySecrets::new();
    let endpoint = format!("{url}/graphql");
    secrets.insert(
        "argo-rollouts",
        profile,
        [
            ("personal-api-key", KEY),
            ("account-id", "12345"),
            ("base-url-nerdgraph", endpoint.as_str()),
        ],
    );
    (log, secrets)
}

fn metric(nr: serde_json::Value, success: &str, failure: Option<&str>) -> Metric {
    metric_with(
        "success-rate",
        json!({"newRelic": nr}),
        Some(success),
        failure,
    )
}

#[tokio::test]
async fn phases_from_the_first_row() {
    let (log, secrets) = start("newrelic").await;
    let p = providers_with(Default::default(), secrets);
    let cases = [
        ("healthy", AnalysisPhase::Successful),
        ("bad", AnalysisPhase::Failed),
        ("middle", AnalysisPhase::Inconclusive),
    ];
    for (query, phase) in cases {
        let m = metric(
            json!({"query": query}),
            "result.successRate >= 0.95",
            Some("result.successRate < 0.6"),
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(phase), "{:?}", measurement.message);
        assert!(measurement.finished_at.is_some());
    }
    let m = metric(
        json!({"query": "healthy", "timeout": 20}),
        "result.successRate >= 0.95",
        None,
    );
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(
        measurement.value.as_deref(),
        Some(r#"{"successRate":0.99}"#)
    );
    let seen = log.lock().unwrap();
    assert_eq!(
        seen[0]["variables"],
        json!({"accountId": 12345, "query": "healthy"})
    );
    assert_eq!(seen[3]["variables"]["timeout"], 20);
    assert!(
        seen[3]["query"]
            .as_str()
            .unwrap()
            .contains("timeout: $timeout")
    );
}

#[tokio::test]
async fn several_rows_are_a_list() {
    let (_, secrets) = start("team-a").await;
    let p = providers_with(Default::default(), secrets);
    let m = metric(
        json!({"query": "facet", "profile": "team-a"}),
        "len(result) == 2 && result[1].count == 2",
        None,
    );
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(
        measurement.phase,
        Some(AnalysisPhase::Successful),
        "{:?}",
        measurement.message
    );
}

#[tokio::test]
async fn errors() {
    let (_, secrets) = start("newrelic").await;
    let p = providers_with(Default::default(), secrets.clone());
    let cases = [
        (
            json!({"query": "none"}),
            "no results returned from NRQL query",
        ),
        (
            json!({"query": "blank"}),
            "no results returned from NRQL query",
        ),
        (
            json!({"query": "SELEC x"}),
            "newRelic query failed: NRQL Syntax Error",
        ),
        (json!({"query": ""}), "newRelic query is empty"),
        (
            json!({"query": "x", "timeout": -1}),
            "newRelic timeout should not be negative",
        ),
        (
            json!({"query": "x", "profile": "other"}),
            "newRelic secret \"other\" not found in namespace \"argo-rollouts\"",
        ),
    ];
    for (nr, message) in cases {
        let measurement = p.measure(&ctx(), &metric(nr, "true", None)).await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
        assert_eq!(measurement.message.as_deref(), Some(message));
    }
    secrets.insert(
        "argo-rollouts",
        "bad-id",
        [("personal-api-key", KEY), ("account-id", "abc")],
    );
    secrets.insert("argo-rollouts", "no-key", [("account-id", "1")]);
    let p = providers_with(Default::default(), secrets);
    let m = metric(json!({"query": "x", "profile": "bad-id"}), "true", None);
    let message = p.measure(&ctx(), &m).await.message.unwrap();
    assert!(
        message.starts_with("could not parse account ID"),
        "{message}"
    );
    let m = metric(json!({"query": "x", "profile": "no-key"}), "true", None);
    let message = p.measure(&ctx(), &m).await.message.unwrap();
    assert_eq!(message, "account ID or personal API key not found");
}

#[tokio::test]
async fn wrong_key_is_an_error_and_redacted() {
    let (_, secrets) = start("newrelic").await;
    let url = serve(Router::new().route(
        "/graphql",
        post(|headers: HeaderMap| async move {
            let key = headers["api-key"].to_str().unwrap_or_default().to_owned();
            Json(json!({"errors": [{"message": format!("Invalid API key {key}")}]}))
        }),
    ))
    .await;
    let endpoint = format!("{url}/graphql");
    secrets.insert(
        "argo-rollouts",
        "newrelic",
        [
            ("personal-api-key", "NRAK-OTHER"),
            ("account-id", "12345"),
            ("base-url-nerdgraph", endpoint.as_str()),
        ],
    );
    let p = providers_with(Default::default(), secrets);
    let measurement = p
        .measure(&ctx(), &metric(json!({"query": "healthy"}), "true", None))
        .await;
    assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        measurement.message.as_deref(),
        Some("newRelic query failed: Invalid API key *****")
    );
}
