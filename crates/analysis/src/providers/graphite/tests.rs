use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::json;
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;

use super::super::test_support::{ctx, metric_with, providers, serve};
use super::*;

type Log = Arc<Mutex<Vec<String>>>;

/// Speaks Graphite's render API for a few targets: `GET /render?target=<t>&format=json`
/// answers `[{"target": <t>, "datapoints": [[value, timestamp], ...]}]` per target, as
/// graphite-web does. Without `format=json` it answers a PNG, as graphite-web does too.
fn fake_graphite(log: Log) -> Router {
    async fn render(State(log): State<Log>, RawQuery(raw): RawQuery) -> (StatusCode, String) {
        let raw = raw.unwrap_or_default();
        log.lock().unwrap().push(raw.clone());
        let params = form_urlencoded(&raw);
        if !params.contains(&("format".to_owned(), "json".to_owned())) {
            return (StatusCode::OK, "\u{89}PNG".to_owned());
        }
        let ts = 1_700_000_000;
        let series = |target: &str| match target {
            "app.success_rate" => Some(json!([[99.5, ts], [null, ts + 60], [98.25, ts + 120]])),
            "app.error_rate" => Some(json!([[12.5, ts]])),
            "app.as_strings" => Some(json!([["97.5", ts.to_string()]])),
            "app.all_null" => Some(json!([[null, ts], [null, ts + 60]])),
            "app.no_points" => Some(json!([])),
            "app.bad_point" => Some(json!([[1.0]])),
            "summarize(app.success_rate,'5min','avg')" => Some(json!([[98.875, ts]])),
            _ => None,
        };
        let mut answer = Vec::new();
        for (name, target) in &params {
            if name != "target" {
                continue;
            }
            if target == "app.broken" {
                return (
                    StatusCode::BAD_REQUEST,
                    "Invalid target: app.broken".to_owned(),
                );
            }
            if target == "app.garbage" {
                return (StatusCode::OK, "<html>not json</html>".to_owned());
            }
            // Graphite's target grammar ignores whitespace between arguments.
            let compact: String = target.split_whitespace().collect();
            if let Some(points) = series(&compact) {
                answer.push(json!({"target": target, "datapoints": points}));
            }
        }
        (StatusCode::OK, serde_json::Value::Array(answer).to_string())
    }
    Router::new()
        .route("/render", get(render))
        .route("/graphite/render", get(render))
        .with_state(log)
}

async fn start() -> (String, Log) {
    let log = Log::default();
    (serve(fake_graphite(log.clone())).await, log)
}

fn metric(address: &str, query: &str, success: &str, failure: Option<&str>) -> Metric {
    metric_with(
        "graphite",
        json!({"graphite": {"address": address, "query": query}}),
        Some(success),
        failure,
    )
}

#[tokio::test]
async fn success_failure_and_inconclusive() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let cases = [
        (
            "target=app.success_rate&from=-5min",
            AnalysisPhase::Successful,
            "[99.500000,98.250000]",
        ),
        (
            "target=app.error_rate",
            AnalysisPhase::Failed,
            "[12.500000]",
        ),
        (
            "target=app.as_strings",
            AnalysisPhase::Inconclusive,
            "[97.500000]",
        ),
    ];
    for (query, phase, value) in cases {
        let m = metric(&url, query, "result[0] >= 98", Some("result[0] < 50"));
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(phase), "{query}: {measurement:?}");
        assert_eq!(measurement.value.as_deref(), Some(value), "{query}");
        assert!(measurement.message.is_none(), "{query}");
        assert!(measurement.finished_at.is_some());
    }
}

#[tokio::test]
async fn a_multi_line_query_is_one_line_with_format_json() {
    let (url, log) = start().await;
    let p = providers(Default::default());
    let query = "target=summarize(\n  app.success_rate,\n  '5min',\n  'avg'\n)\n&from=-10min";
    let m = metric(
        &format!("{url}/graphite/"),
        query,
        "all(result, # > 98)",
        None,
    );
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(measurement.value.as_deref(), Some("[98.875000]"));
    let seen = log.lock().unwrap().clone();
    assert_eq!(
        form_urlencoded(&seen[0]),
        [
            ("format".to_owned(), "json".to_owned()),
            ("from".to_owned(), "-10min".to_owned()),
            // The line break before `&` stays a space, as in Argo.
            (
                "target".to_owned(),
                "summarize( app.success_rate, '5min', 'avg' ) ".to_owned()
            ),
        ]
    );
    assert_eq!(measurement.phase, Some(AnalysisPhase::Successful));
}

#[tokio::test]
async fn null_values_are_left_out() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let m = metric(&url, "target=app.all_null", "len(result) == 0", None);
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(measurement.value.as_deref(), Some("[]"));
    assert_eq!(measurement.phase, Some(AnalysisPhase::Successful));
}

#[tokio::test]
async fn errors() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let cases = [
        (
            url.clone(),
            "target=app.broken",
            "error response: Invalid target: app.broken".to_owned(),
        ),
        (
            url.clone(),
            "target=app.unknown",
            "no values found".to_owned(),
        ),
        (
            url.clone(),
            "target=app.no_points",
            "no values found".to_owned(),
        ),
        (
            url.clone(),
            "target=app.bad_point",
            "error unmarshaling data point: [1.0]".to_owned(),
        ),
        (
            String::new(),
            "target=app.success_rate",
            "Graphite address  is not a valid URL".to_owned(),
        ),
        (
            "graphite.monitoring".to_owned(),
            "target=app.success_rate",
            "Graphite address graphite.monitoring is not a valid URL".to_owned(),
        ),
    ];
    for (address, query, message) in cases {
        let m = metric(&address, query, "true", None);
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Error), "{query}");
        assert_eq!(measurement.message.as_deref(), Some(message.as_str()));
        assert!(measurement.value.is_none());
        assert!(measurement.finished_at.is_some());
    }

    let garbage = p
        .measure(&ctx(), &metric(&url, "target=app.garbage", "true", None))
        .await;
    assert_eq!(garbage.phase, Some(AnalysisPhase::Error));
    assert!(
        garbage
            .message
            .unwrap()
            .starts_with("could not parse JSON body: ")
    );

    let unreachable = p
        .measure(
            &ctx(),
            &metric(
                "http://127.0.0.1:1",
                "target=app.success_rate",
                "true",
                None,
            ),
        )
        .await;
    assert_eq!(unreachable.phase, Some(AnalysisPhase::Error));
    assert!(unreachable.message.unwrap().contains("127.0.0.1:1"));
}

#[tokio::test]
async fn a_condition_that_cannot_be_evaluated_keeps_the_value() {
    let (url, _) = start().await;
    let p = providers(Default::default());
    let m = metric(&url, "target=app.success_rate", "result >", None);
    let measurement = p.measure(&ctx(), &m).await;
    assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
    assert_eq!(measurement.value.as_deref(), Some("[99.500000,98.250000]"));
}

#[test]
fn whitespace_runs_become_one_space() {
    assert_eq!(collapse_whitespace(" a\n\t b  c\n"), " a b c ");
    assert_eq!(collapse_whitespace(""), "");
}

#[test]
fn values_as_go_writes_them() {
    assert_eq!(go_percent_f(0.99), "0.990000");
    assert_eq!(go_percent_f(100.0), "100.000000");
    assert_eq!(go_percent_f(1e-7), "0.000000");
    assert_eq!(go_percent_f(f64::INFINITY), "+Inf");
    assert_eq!(go_percent_f(f64::NAN), "NaN");
}

/// Against a real graphite-web (Debian's package): the render API's answer for a series
/// written as carbon writes it gives a Successful, a Failed and an Error measurement.
#[tokio::test]
async fn against_a_real_graphite_web() {
    let graphite = sluice_testenv::graphite::Graphite::start()
        .await
        .expect("graphite-web");
    let now = jiff::Timestamp::now().as_second();
    // Aligned on the series' 10 s resolution, within the last minute.
    let at = now - now % 10 - 20;
    graphite
        .write("shop.web.success_rate", &[(99.5, at - 10), (98.25, at)])
        .unwrap();
    graphite
        .write("shop.web.error_rate", &[(12.5, at)])
        .unwrap();
    let p = providers(Default::default());
    let address = graphite.address();
    let measure = |query: &'static str| {
        let m = metric(&address, query, "result[0] >= 98", Some("result[0] < 50"));
        let p = p.clone();
        async move { p.measure(&ctx(), &m).await }
    };
    let ok = measure("target=shop.web.success_rate&from=-2min").await;
    assert_eq!(ok.phase, Some(AnalysisPhase::Successful), "{ok:?}");
    assert_eq!(ok.value.as_deref(), Some("[99.500000,98.250000]"));
    let failed = measure("target=shop.web.error_rate&from=-2min").await;
    assert_eq!(failed.phase, Some(AnalysisPhase::Failed), "{failed:?}");
    assert_eq!(failed.value.as_deref(), Some("[12.500000]"));
    // A function graphite-web does not know: its error answer is an Error measurement.
    let error = measure("target=noSuchFunction(shop.web.error_rate)").await;
    assert_eq!(error.phase, Some(AnalysisPhase::Error), "{error:?}");
    assert!(error.message.is_some(), "{error:?}");
}
