use std::sync::{Arc, Mutex};

use axum::extract::{Query as UrlQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;
use std::collections::HashMap;

use super::super::ProviderSettings;
use super::super::test_support::{ctx, metric_with, providers_with, serve};
use crate::secrets::MemorySecrets;

const TOKEN: &str = "influx-t0ken";
const NAMESPACE: &str = "argo-rollouts";

#[derive(Clone, Debug)]
struct Seen {
    org: Option<String>,
    body: serde_json::Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// One table of `_value`s as InfluxDB 2 writes it: annotations, header, records, blank line.
fn table(datatype: &str, measurement: &str, table: u32, values: &[&str]) -> String {
    let mut out = format!(
        "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,{datatype},string,string\r\n\
         #group,false,false,true,true,false,false,true,true\r\n\
         #default,_result,,,,,,,\r\n\
         ,result,table,_start,_stop,_time,_value,_field,_measurement\r\n"
    );
    for (minute, value) in values.iter().enumerate() {
        out.push_str(&format!(
            ",,{table},2026-11-27T00:00:00Z,2026-11-27T00:05:00Z,2026-11-27T00:0{minute}:00Z,{value},rate,{measurement}\r\n"
        ));
    }
    out.push_str("\r\n");
    out
}

/// Speaks InfluxDB 2's query API: `POST /api/v2/query?org=<org>` with a `Token` and a JSON
/// body holding the Flux query; answers by the measurement the query filters on.
fn fake_influxdb(log: Log) -> Router {
    async fn query(
        State(log): State<Log>,
        UrlQuery(params): UrlQuery<HashMap<String, String>>,
        headers: HeaderMap,
        Json(body): Json<serde_json::Value>,
    ) -> (StatusCode, String) {
        log.lock().unwrap().push(Seen {
            org: params.get("org").cloned(),
            body: body.clone(),
        });
        let error = |status: StatusCode, code: &str, message: &str| {
            (
                status,
                json!({"code": code, "message": message}).to_string(),
            )
        };
        let token = headers.get("authorization").and_then(|v| v.to_str().ok());
        if token != Some(&format!("Token {TOKEN}")) {
            return error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "unauthorized access",
            );
        }
        let flux = body["query"].as_str().unwrap_or_default();
        let about = |m: &str| flux.contains(&format!("r._measurement == \"{m}\""));
        let csv = if about("success_rate") {
            table("double", "success_rate", 0, &["0.99", "0.98"])
        } else if about("error_rate") {
            table("double", "error_rate", 0, &["0.2"])
        } else if about("requests") {
            table("long", "requests", 0, &["3"]) + &table("long", "requests", 1, &["1000000"])
        } else if about("nothing") {
            "\r\n".to_owned()
        } else if about("runtime_error") {
            "#datatype,string,string\r\n#group,true,true\r\n#default,,\r\n,error,reference\r\n,\"runtime error: division by zero\",\r\n\r\n".to_owned()
        } else {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid",
                "compilation failed: error @1:1-1:4: undefined identifier bad",
            );
        };
        (StatusCode::OK, csv)
    }
    Router::new()
        .route("/api/v2/query", post(query))
        .with_state(log)
}

async fn start() -> (String, Log, MemorySecrets) {
    let log = Log::default();
    let url = serve(fake_influxdb(log.clone())).await;
    let secrets = MemorySecrets::new();
    secrets.insert(
        NAMESPACE,
        "influxdb",
        [
            ("address", url.as_str()),
            ("authToken", TOKEN),
            ("org", "my-org"),
        ],
    );
    (url, log, secrets)
}

fn flux(measurement: &str) -> String {
    format!(
        "from(bucket: \"app\")\n  |> range(start: -5m)\n  |> filter(fn: (r) => r._measurement == \"{measurement}\")"
    )
}

fn metric(influx: serde_json::Value, success: &str, failure: Option<&str>) -> Metric {
    metric_with(
        "influx",
        json!({ "influxdb": influx }),
        Some(success),
        failure,
    )
}

fn settings() -> ProviderSettings {
    ProviderSettings {
        controller_namespace: NAMESPACE.to_owned(),
        ..Default::default()
    }
}

#[tokio::test]
async fn success_failure_and_integer_tables() {
    let (_, log, secrets) = start().await;
    let p = providers_with(settings(), secrets);
    let cases = [
        ("success_rate", AnalysisPhase::Successful, "[0.99 0.98]"),
        ("error_rate", AnalysisPhase::Failed, "[0.2]"),
        ("requests", AnalysisPhase::Inconclusive, "[3 1000000]"),
    ];
    for (measurement, phase, value) in cases {
        let m = metric(
            json!({"query": flux(measurement)}),
            "all(result, # >= 0.95 && # <= 1)",
            Some("any(result, # < 0.5)"),
        );
        let measured = p.measure(&ctx(), &m).await;
        assert_eq!(measured.phase, Some(phase), "{measurement}: {measured:?}");
        assert_eq!(measured.value.as_deref(), Some(value), "{measurement}");
        assert!(measured.finished_at.is_some());
    }
    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen.org.as_deref(), Some("my-org"));
    assert_eq!(seen.body["query"], flux("success_rate"));
    assert_eq!(seen.body["type"], "flux");
}

#[tokio::test]
async fn errors() {
    let (_, _, secrets) = start().await;
    let p = providers_with(settings(), secrets);
    let cases = [
        (flux("nothing"), "no results returned from flux query"),
        (flux("runtime_error"), "no results returned from flux query"),
        (
            "bad".to_owned(),
            "invalid: compilation failed: error @1:1-1:4: undefined identifier bad",
        ),
    ];
    for (query, message) in cases {
        let measured = p
            .measure(&ctx(), &metric(json!({"query": query}), "true", None))
            .await;
        assert_eq!(measured.phase, Some(AnalysisPhase::Error), "{query}");
        assert_eq!(measured.message.as_deref(), Some(message));
        assert!(measured.value.is_none());
    }

    // A condition that cannot be evaluated: Error, and (as in Argo) no value.
    let m = metric(json!({"query": flux("success_rate")}), "result >", None);
    let measured = p.measure(&ctx(), &m).await;
    assert_eq!(measured.phase, Some(AnalysisPhase::Error));
    assert!(measured.message.is_some() && measured.value.is_none());
}

#[tokio::test]
async fn the_profile_secret() {
    let (url, _, secrets) = start().await;
    secrets.insert(
        NAMESPACE,
        "wrong-token",
        [
            ("address", url.as_str()),
            ("authToken", "nope"),
            ("org", "o"),
        ],
    );
    secrets.insert(
        NAMESPACE,
        "no-org",
        [("address", url.as_str()), ("authToken", TOKEN)],
    );
    let p = providers_with(settings(), secrets);
    let cases = [
        ("wrong-token", "unauthorized: unauthorized access"),
        ("no-org", "authToken, org, or address not found"),
        ("missing", "secrets \"missing\" not found"),
    ];
    for (profile, message) in cases {
        let m = metric(
            json!({"profile": profile, "query": flux("success_rate")}),
            "true",
            None,
        );
        let measured = p.measure(&ctx(), &m).await;
        assert_eq!(measured.phase, Some(AnalysisPhase::Error), "{profile}");
        assert_eq!(measured.message.as_deref(), Some(message), "{profile}");
    }

    // The default Secret is read in the controller's namespace, not the run's.
    let elsewhere = providers_with(
        ProviderSettings {
            controller_namespace: "other".to_owned(),
            ..Default::default()
        },
        MemorySecrets::new(),
    );
    let m = metric(json!({"query": flux("success_rate")}), "true", None);
    let measured = elsewhere.measure(&ctx(), &m).await;
    assert_eq!(
        measured.message.as_deref(),
        Some("secrets \"influxdb\" not found")
    );
}
