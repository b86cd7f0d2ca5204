use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use sluice_api::analysis::Metric;

use super::super::test_support::{ctx, metric_with, providers, serve};
use super::*;

/// What the fake server was sent, and the score each judgement will give.
#[derive(Default)]
struct Server {
    posts: Vec<(String, HashMap<String, String>, Value)>,
    /// Execution id -> (polls so far, score).
    executions: HashMap<String, (u32, Option<f64>)>,
}

type Shared = Arc<Mutex<Server>>;

/// Speaks Kayenta's standalone canary API: `GET /canaryConfig` lists the configs,
/// `POST /canary/{configId}` starts a judgement and answers its `canaryExecutionId`, `GET
/// /canary/{id}` answers `{"complete": false}` on the first poll and the judgement after.
/// The score depends on the application: good 95.7, marginal 80, bad 20, noscore none.
fn fake_kayenta(server: Shared) -> Router {
    async fn configs(UrlQuery(q): UrlQuery<HashMap<String, String>>) -> Json<Value> {
        assert_eq!(q["configurationAccountName"], "storage");
        Json(json!([
            {"id": "other-id", "name": "other", "applications": ["app"]},
            {"id": "cfg-1", "name": "my-config", "applications": ["app"]}
        ]))
    }
    async fn start(
        State(server): State<Shared>,
        Path(config): Path<String>,
        UrlQuery(q): UrlQuery<HashMap<String, String>>,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        let mut server = server.lock().unwrap();
        server.posts.push((config, q.clone(), body));
        let score = match q["application"].as_str() {
            "good" => Some(95.7),
            "marginal" => Some(80.0),
            "bad" => Some(20.0),
            "noscore" => None,
            _ => return (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({}))),
        };
        let id = format!("exec-{}", server.executions.len() + 1);
        server.executions.insert(id.clone(), (0, score));
        (StatusCode::OK, Json(json!({ "canaryExecutionId": id })))
    }
    async fn judgement(
        State(server): State<Shared>,
        Path(id): Path<String>,
    ) -> (StatusCode, Json<Value>) {
        let mut server = server.lock().unwrap();
        let Some((polls, score)) = server.executions.get_mut(&id) else {
            return (StatusCode::NOT_FOUND, Json(json!({})));
        };
        *polls += 1;
        if *polls == 1 {
            return (StatusCode::OK, Json(json!({"complete": false})));
        }
        let result = match score {
            Some(s) => json!({"judgeResult": {"score": {"score": s}}}),
            None => json!({}),
        };
        (
            StatusCode::OK,
            Json(json!({"complete": true, "result": result})),
        )
    }
    Router::new()
        .route("/canaryConfig", get(configs))
        .route("/canary/{id}", post(start).get(judgement))
        .with_state(server)
}

async fn start_server() -> (String, Shared) {
    let server = Shared::default();
    (serve(fake_kayenta(server.clone())).await, server)
}

fn metric(address: &str, application: &str) -> Metric {
    metric_with(
        "kayenta",
        json!({"kayenta": {
            "address": address,
            "application": application,
            "canaryConfigName": "my-config",
            "metricsAccountName": "metrics",
            "configurationAccountName": "config",
            "storageAccountName": "storage",
            "threshold": {"pass": 90, "marginal": 75},
            "scopes": [{
                "name": "default",
                "controlScope": {"scope": "app=stable", "region": "us-east-1", "step": 60,
                                 "start": "2026-11-27T00:00:00Z", "end": "2026-11-27T00:10:00Z"},
                "experimentScope": {"scope": "app=canary", "step": 60}
            }]
        }}),
        None,
        None,
    )
}

#[tokio::test]
async fn a_judgement_runs_until_complete_then_the_score_decides() {
    let (url, server) = start_server().await;
    let p = providers(Default::default());
    let cases = [
        ("good", AnalysisPhase::Successful, "95"),
        ("marginal", AnalysisPhase::Inconclusive, "80"),
        ("bad", AnalysisPhase::Failed, "20"),
    ];
    for (application, phase, value) in cases {
        let m = metric(&url, application);
        let started = p.measure(&ctx(), &m).await;
        assert_eq!(started.phase, Some(AnalysisPhase::Running), "{started:?}");
        assert!(started.finished_at.is_none());
        let resume_at = started.resume_at.clone().unwrap().0;
        let delay = resume_at.as_second() - started.started_at.clone().unwrap().0.as_second();
        assert!(
            (14..=16).contains(&delay),
            "resumeAt {delay}s after the start"
        );
        let id = started.metadata.clone().unwrap()[EXECUTION_ID].clone();
        assert!(id.starts_with("exec-"));

        let pending = p.resume(&ctx(), &m, started).await;
        assert_eq!(pending.phase, Some(AnalysisPhase::Running));
        assert!(pending.resume_at.is_some() && pending.value.is_none());

        let done = p.resume(&ctx(), &m, pending).await;
        assert_eq!(done.phase, Some(phase), "{application}: {done:?}");
        assert_eq!(done.value.as_deref(), Some(value));
        assert!(done.finished_at.is_some());
        assert_eq!(done.metadata.unwrap()[EXECUTION_ID], id);
    }

    let server = server.lock().unwrap();
    let (config, query, body) = &server.posts[0];
    assert_eq!(config, "cfg-1");
    assert_eq!(query["metricsAccountName"], "metrics");
    assert_eq!(query["configurationAccountName"], "config");
    assert_eq!(query["storageAccountName"], "storage");
    assert_eq!(body["thresholds"], json!({"pass": 90, "marginal": 75}));
    assert_eq!(
        body["scopes"]["default"]["experimentScope"],
        json!({"scope": "app=canary", "region": "", "step": 60, "start": "", "end": ""})
    );
    assert_eq!(
        body["scopes"]["default"]["controlScope"]["region"],
        "us-east-1"
    );
}

#[tokio::test]
async fn errors() {
    let (url, _) = start_server().await;
    let p = providers(Default::default());

    let refused = p.measure(&ctx(), &metric(&url, "broken")).await;
    assert_eq!(refused.phase, Some(AnalysisPhase::Error));
    assert_eq!(refused.message.as_deref(), Some("Invalid Response"));

    let m = metric(&url, "noscore");
    let started = p.measure(&ctx(), &m).await;
    let pending = p.resume(&ctx(), &m, started).await;
    let missing = p.resume(&ctx(), &m, pending).await;
    assert_eq!(missing.phase, Some(AnalysisPhase::Error));
    assert_eq!(missing.message.as_deref(), Some("Missing Score"));
    assert!(missing.finished_at.is_some());

    let lost = Measurement {
        phase: Some(AnalysisPhase::Running),
        metadata: Some([(EXECUTION_ID.to_owned(), "exec-404".to_owned())].into()),
        ..Default::default()
    };
    let gone = p.resume(&ctx(), &m, lost).await;
    assert_eq!(gone.phase, Some(AnalysisPhase::Error));
    assert_eq!(gone.message.as_deref(), Some("Invalid Response"));

    let unreachable = p
        .measure(&ctx(), &metric("http://127.0.0.1:1", "good"))
        .await;
    assert_eq!(unreachable.phase, Some(AnalysisPhase::Error));
}
