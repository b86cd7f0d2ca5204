use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query as UrlQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use serde_json::json;
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;

use super::super::ProviderSettings;
use super::super::test_support::{ctx, metric_with, providers_with, serve};
use crate::secrets::MemorySecrets;

const TOKEN: &str = "wf-t0ken";
const NAMESPACE: &str = "argo-rollouts";

type Log = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// Speaks Wavefront's chart API: `GET /api/v2/chart/api?q=...&s=<ms>&e=<ms>...` with a bearer
/// token, answering `{"timeseries": [{"data": [[seconds, value], ...]}], "warnings": ...}`.
/// Points lie around the query's start: 60 s and 5 s before, 30 s after.
fn fake_wavefront(log: Log) -> Router {
    async fn chart(
        State(log): State<Log>,
        UrlQuery(params): UrlQuery<HashMap<String, String>>,
        headers: HeaderMap,
    ) -> (StatusCode, String) {
        log.lock().unwrap().push(params.clone());
        let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
        if auth != Some(&format!("Bearer {TOKEN}")) {
            return (
                StatusCode::UNAUTHORIZED,
                "{\"message\":\"bad token\"}".to_owned(),
            );
        }
        let start = params["s"].parse::<i64>().unwrap() / 1000;
        let around = |before: f64, near: f64, after: f64| json!({"data": [[start - 60, before], [start - 5, near], [start + 30, after]]});
        let answer = match params["q"].as_str() {
            "ts(success)" => json!({"timeseries": [around(0.5, 0.99, 0.7)]}),
            "ts(failing)" => json!({"timeseries": [around(0.99, 0.2, 0.99)]}),
            "ts(by_host)" => json!({
                "timeseries": [around(0.1, 0.98, 0.1), around(0.1, 0.5, 0.1)],
                "warnings": "some hosts stopped reporting"
            }),
            "ts(none)" => json!({"timeseries": [], "warnings": "no metrics matched"}),
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    "{\"message\":\"bad query\"}".to_owned(),
                );
            }
        };
        (StatusCode::OK, answer.to_string())
    }
    Router::new()
        .route("/api/v2/chart/api", get(chart))
        .with_state(log)
}

async fn start() -> (String, Log, MemorySecrets) {
    let log = Log::default();
    let url = serve(fake_wavefront(log.clone())).await;
    let secrets = MemorySecrets::new();
    secrets.insert(
        NAMESPACE,
        "wavefront-api-tokens",
        [(url.as_str(), TOKEN), ("other.wavefront.com", "x")],
    );
    (url, log, secrets)
}

fn metric(address: &str, query: &str, success: &str) -> Metric {
    let failure = if success.contains("all(") {
        "any(result, # < 0.3)"
    } else {
        "result < 0.3"
    };
    metric_with(
        "wf",
        json!({"wavefront": {"address": address, "query": query}}),
        Some(success),
        Some(failure),
    )
}

fn settings() -> ProviderSettings {
    ProviderSettings {
        controller_namespace: NAMESPACE.to_owned(),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_point_nearest_the_start_is_judged() {
    let (url, log, secrets) = start().await;
    let p = providers_with(settings(), secrets);

    let m = metric(&url, "ts(success)", "result > 0.95");
    let measured = p.measure(&ctx(), &m).await;
    assert_eq!(
        measured.phase,
        Some(AnalysisPhase::Successful),
        "{measured:?}"
    );
    assert_eq!(measured.value.as_deref(), Some("0.99"));
    let metadata = measured.metadata.unwrap();
    assert_eq!(metadata["drift"], "-5");
    let start = measured.started_at.unwrap().0.as_second();
    assert!((metadata["timestamps"].parse::<i64>().unwrap() - (start - 5)).abs() <= 1);

    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen["s"], seen["e"]);
    assert_eq!((seen["g"].as_str(), seen["p"].as_str()), ("s", "1"));
    assert_eq!(seen["i"], "true");

    let m = metric(&url, "ts(failing)", "result > 0.95");
    let measured = p.measure(&ctx(), &m).await;
    assert_eq!(measured.phase, Some(AnalysisPhase::Failed));
    assert_eq!(measured.value.as_deref(), Some("0.20"));
}

#[tokio::test]
async fn several_series_are_a_list() {
    let (url, _, secrets) = start().await;
    let p = providers_with(settings(), secrets);
    let m = metric(&url, "ts(by_host)", "all(result, # > 0.95)");
    let measured = p.measure(&ctx(), &m).await;
    assert_eq!(
        measured.phase,
        Some(AnalysisPhase::Inconclusive),
        "{measured:?}"
    );
    assert_eq!(measured.value.as_deref(), Some("[0.98,0.50]"));
    let metadata = measured.metadata.unwrap();
    assert_eq!(metadata["drift"], "[-5,-5]");
    assert_eq!(metadata["warnings"], "some hosts stopped reporting");
}

#[tokio::test]
async fn errors() {
    let (url, _, secrets) = start().await;
    let p = providers_with(settings(), secrets);

    let none = p.measure(&ctx(), &metric(&url, "ts(none)", "true")).await;
    assert_eq!(none.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        none.message.as_deref(),
        Some("No TimeSeries found in response from Wavefront")
    );
    assert_eq!(none.metadata.unwrap()["warnings"], "no metrics matched");

    let bad = p.measure(&ctx(), &metric(&url, "ts(", "true")).await;
    assert_eq!(bad.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        bad.message.as_deref(),
        Some("server returned 400 Bad Request\n{\"message\":\"bad query\"}\n")
    );

    let unknown = p
        .measure(
            &ctx(),
            &metric("elsewhere.wavefront.com", "ts(success)", "true"),
        )
        .await;
    assert_eq!(unknown.message.as_deref(), Some("API token not found"));

    let wrong = providers_with(settings(), {
        let s = MemorySecrets::new();
        s.insert(NAMESPACE, "wavefront-api-tokens", [(url.as_str(), "nope")]);
        s
    });
    let refused = wrong
        .measure(&ctx(), &metric(&url, "ts(success)", "true"))
        .await;
    assert!(refused.message.unwrap().starts_with("server returned 401"));

    let no_secret = providers_with(settings(), MemorySecrets::new());
    let missing = no_secret
        .measure(&ctx(), &metric(&url, "ts(success)", "true"))
        .await;
    assert_eq!(
        missing.message.as_deref(),
        Some("secrets \"wavefront-api-tokens\" not found")
    );

    // A condition that cannot be evaluated: Error, no value, as in Argo.
    let broken = p
        .measure(&ctx(), &metric(&url, "ts(success)", "result >"))
        .await;
    assert_eq!(broken.phase, Some(AnalysisPhase::Error));
    assert!(broken.value.is_none());
}
