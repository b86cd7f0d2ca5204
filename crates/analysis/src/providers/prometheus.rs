//! Prometheus: an instant query (`/api/v1/query`) or a range query (`/api/v1/query_range`).
//!
//! As in Argo, a scalar result is a float and a vector a list of floats (`result[0]`), even
//! with one element; a range query's matrix is flattened into one list (`all(result, ...)`).
//! The value reads `0.99` for a scalar and `[0.99]` for a vector.

use std::time::Duration;

use expr::{Context, Value};
use serde::Deserialize;
use sluice_api::analysis::{Metric, PrometheusMetric, PrometheusRangeQueryArgs};
use sluice_api::parse_go_duration;

use super::http::{authenticate, join_url, read_body, request_error, snippet, with_headers};
use super::{Outcome, ProviderError, Providers, format_float, format_floats};
use crate::expression::check_shape;

/// Metadata key of the query after argument substitution (on the metric result).
pub const RESOLVED_PROMETHEUS_QUERY: &str = "ResolvedPrometheusQuery";

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn measure(
    providers: &Providers,
    metric: &Metric,
    prom: &PrometheusMetric,
) -> Result<Outcome, ProviderError> {
    let address = address(prom, providers.settings.prometheus_address.as_deref())?;
    let timeout = timeout(prom)?;
    let query = prom
        .query
        .as_deref()
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ProviderError::new("prometheus query is empty"))?;

    let client = providers.http(prom.insecure.unwrap_or(false));
    let request = match &prom.range_query {
        None => {
            let time = unix_seconds(jiff::Timestamp::now());
            client
                .post(join_url(&address, "/api/v1/query"))
                .form(&[("query", query), ("time", time.as_str())])
        }
        Some(range) => {
            let (start, end, step) = range_params(range)?;
            client
                .post(join_url(&address, "/api/v1/query_range"))
                .form(&[
                    ("query", query),
                    ("start", start.as_str()),
                    ("end", end.as_str()),
                    ("step", step.as_str()),
                ])
        }
    };
    let request = with_headers(request, prom.headers.as_deref().unwrap_or_default())?;
    let request = authenticate(client, request, prom.authentication.as_ref(), timeout).await?;
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| request_error(&e, timeout))?;
    let status = response.status();
    let body = read_body(response).await?;
    let reply = parse_reply(status, &body)?;

    let (value, result) = reply.data.result()?;
    let mut outcome = Outcome::judged(metric, value, &result);
    if !reply.warnings.is_empty() {
        let warnings: Vec<String> = reply.warnings.iter().map(|w| format!("\"{w}\"")).collect();
        outcome = outcome.with_metadata("warnings", warnings.join(", "));
    }
    Ok(outcome)
}

fn address(prom: &PrometheusMetric, from_env: Option<&str>) -> Result<String, ProviderError> {
    let address = prom
        .address
        .as_deref()
        .filter(|a| !a.is_empty())
        .or(from_env.filter(|a| !a.is_empty()))
        .ok_or_else(|| ProviderError::new("prometheus address is not configured"))?;
    match reqwest::Url::parse(address) {
        Ok(url) if url.has_host() => Ok(address.to_owned()),
        _ => Err(ProviderError(format!(
            "prometheus address {address:?} is not a URL"
        ))),
    }
}

fn timeout(prom: &PrometheusMetric) -> Result<Duration, ProviderError> {
    match prom.timeout {
        Some(t) if t < 0 => Err(ProviderError::new(
            "prometheus timeout should not be negative",
        )),
        Some(t) if t > 0 => Ok(Duration::from_secs(t.unsigned_abs())),
        _ => Ok(DEFAULT_TIMEOUT),
    }
}

/// `start`, `end` and `step` of a range query. Start and end are expr expressions such as
/// `now() - duration("5m")` (end defaults to `now()`); step is a duration such as `1m`.
fn range_params(
    range: &PrometheusRangeQueryArgs,
) -> Result<(String, String, String), ProviderError> {
    let start = range
        .start
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ProviderError::new("prometheus rangeQuery.start is required"))?;
    let end = range
        .end
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or("now()");
    let step = range
        .step
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ProviderError::new("prometheus rangeQuery.step is required"))?;
    let step = parse_go_duration(step).map_err(|e| {
        ProviderError(format!(
            "prometheus rangeQuery.step {step:?} is invalid: {e}"
        ))
    })?;
    if step.is_zero() {
        return Err(ProviderError::new(
            "prometheus rangeQuery.step must be positive",
        ));
    }
    let start = eval_time("start", start)?;
    let end = eval_time("end", end)?;
    if end < start {
        return Err(ProviderError::new(
            "prometheus rangeQuery.end is before rangeQuery.start",
        ));
    }
    Ok((
        start.to_string(),
        end.to_string(),
        format_float(step.as_secs_f64()),
    ))
}

/// Evaluates a range bound with expr's date functions (`now()`, `duration()`, `date()`).
fn eval_time(field: &str, expression: &str) -> Result<jiff::Timestamp, ProviderError> {
    let invalid = |why: String| {
        ProviderError(format!(
            "prometheus rangeQuery.{field} {expression:?} {why}; use e.g. now() - duration(\"5m\")"
        ))
    };
    check_shape(expression).map_err(|e| invalid(format!("is refused: {e}")))?;
    let value = std::panic::catch_unwind(|| expr::eval(expression, &Context::default()))
        .map_err(|_| invalid("could not be evaluated".to_owned()))?
        .map_err(|e| {
            invalid(format!(
                "could not be evaluated: {}",
                one_line(&e.to_string())
            ))
        })?;
    let Some(time) = value.as_datetime() else {
        return Err(invalid("is not a time".to_owned()));
    };
    let nanos = i32::try_from(time.timestamp_subsec_nanos()).unwrap_or(0);
    jiff::Timestamp::new(time.timestamp(), nanos)
        .map_err(|e| invalid(format!("is out of range: {e}")))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Seconds since the epoch with a fraction, as Prometheus' Go client sends times.
fn unix_seconds(ts: jiff::Timestamp) -> String {
    format_float(ts.as_millisecond() as f64 / 1000.0)
}

#[derive(Debug, Deserialize)]
struct Reply {
    #[serde(default)]
    status: String,
    #[serde(default)]
    data: Data,
    #[serde(default, rename = "errorType")]
    error_type: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Data {
    #[serde(default, rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: serde_json::Value,
}

fn parse_reply(status: reqwest::StatusCode, body: &[u8]) -> Result<Reply, ProviderError> {
    match serde_json::from_slice::<Reply>(body) {
        Ok(reply) if reply.status == "error" || !reply.error.is_empty() => Err(ProviderError(
            format!("{}: {}", reply.error_type, reply.error),
        )),
        Ok(reply) if status.is_success() => Ok(reply),
        Err(err) if status.is_success() => Err(ProviderError(format!(
            "prometheus response is not valid JSON: {err}"
        ))),
        _ => Err(ProviderError(format!(
            "prometheus returned {}: {}",
            status,
            snippet(body)
        ))),
    }
}

impl Data {
    /// The measurement value and the condition's `result`.
    fn result(&self) -> Result<(String, Value), ProviderError> {
        match self.result_type.as_str() {
            "scalar" => {
                let v = sample(&self.result)?;
                Ok((format_float(v), Value::Float(v)))
            }
            "vector" => {
                let values = self
                    .series()?
                    .iter()
                    .map(|s| sample(s.get("value").unwrap_or(&serde_json::Value::Null)))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(floats(values))
            }
            "matrix" => {
                let mut values = Vec::new();
                for series in self.series()? {
                    let points = series
                        .get("values")
                        .and_then(|v| v.as_array())
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    for point in points {
                        values.push(sample(point)?);
                    }
                }
                Ok(floats(values))
            }
            other => Err(ProviderError(format!(
                "prometheus result type {other:?} is not supported"
            ))),
        }
    }

    fn series(&self) -> Result<&[serde_json::Value], ProviderError> {
        match &self.result {
            serde_json::Value::Array(items) => Ok(items),
            serde_json::Value::Null => Ok(&[]),
            _ => Err(ProviderError::new("prometheus result is not a list")),
        }
    }
}

fn floats(values: Vec<f64>) -> (String, Value) {
    let value = format_floats(&values);
    (
        value,
        Value::Array(values.into_iter().map(Value::Float).collect()),
    )
}

/// A `[<time>, "<value>"]` pair's value; Prometheus writes `NaN`, `+Inf` and `-Inf` as such.
fn sample(pair: &serde_json::Value) -> Result<f64, ProviderError> {
    let text = pair
        .as_array()
        .and_then(|p| p.get(1))
        .and_then(|v| v.as_str())
        .ok_or_else(|| {
            ProviderError(format!("prometheus sample {pair} is not [time, \"value\"]"))
        })?;
    text.parse::<f64>()
        .map_err(|_| ProviderError(format!("prometheus sample value {text:?} is not a number")))
}

#[cfg(test)]
mod tests {
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
                let error =
                    json!({"status": "error", "errorType": "bad_data", "error": "bad time"});
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
                    "http://h",
                    "q",
                    json!({"authentication": {"sigv4": {"region": "eu-west-1"}}}),
                ),
                "sigv4 authentication is not supported",
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
}
