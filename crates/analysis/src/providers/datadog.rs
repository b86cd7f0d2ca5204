//! Datadog: a metrics query over the last `interval` (default 5m), API v1 (`/api/v1/query`,
//! the last point of the first series) or v2 (`/api/v2/query/scalar`, one aggregated value,
//! or one per group for `by {tag}` queries).
//!
//! Credentials are looked up as Argo does: a `secretRef` with `namespaced: true` in the
//! AnalysisRun's namespace, then `DD_API_KEY`/`DD_APP_KEY`/`DD_ADDRESS`, then the Secret
//! (`secretRef.name`, default `datadog`) in the controller's namespace. An empty result is
//! `nil` (`default(result, 0)` handles it).

use std::collections::BTreeMap;
use std::time::Duration;

use expr::Value;
use serde_json::json;
use sluice_api::analysis::{DatadogMetric, Metric};
use sluice_api::parse_go_duration;

use super::http::{join_url, read_body, request_error, snippet};
use super::{Outcome, ProviderError, Providers, RunContext, format_float, format_floats};
use crate::redact::Redactor;

/// Default Secret name and its keys.
const DATADOG_SECRET: &str = "datadog";
const API_KEY: &str = "api-key";
const APP_KEY: &str = "app-key";
const ADDRESS: &str = "address";
const DEFAULT_ADDRESS: &str = "https://api.datadoghq.com";
const TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_AGGREGATOR: &str = "last";
/// Most groups listed in the `groups` metadata of a grouped v2 query.
const MAX_GROUPS: usize = 100;

/// Datadog API credentials and the API address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatadogCredentials {
    pub address: Option<String>,
    pub api_key: String,
    pub app_key: String,
}

pub(crate) async fn measure(
    providers: &Providers,
    ctx: &RunContext,
    metric: &Metric,
    dd: &DatadogMetric,
    redactor: &mut Redactor,
) -> Result<Outcome, ProviderError> {
    let interval = parse_go_duration(dd.interval())
        .map_err(|e| {
            ProviderError(format!(
                "datadog interval {:?} is invalid: {e}",
                dd.interval()
            ))
        })?
        .as_secs();
    let version = dd.api_version();
    let request = match version {
        "v1" => Request::V1(v1_query(dd)?),
        "v2" => Request::V2(v2_body(dd, interval)?),
        other => {
            return Err(ProviderError(format!(
                "invalid Datadog API version {other:?}"
            )));
        }
    };
    let credentials = credentials(providers, ctx, dd).await?;
    redactor.add(&credentials.api_key);
    redactor.add(&credentials.app_key);
    let address = credentials
        .address
        .clone()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| DEFAULT_ADDRESS.to_owned());
    if !reqwest::Url::parse(&address).is_ok_and(|u| u.has_host()) {
        return Err(ProviderError(format!(
            "datadog address {address:?} is not a URL"
        )));
    }

    let client = providers.http(false);
    let builder = match &request {
        Request::V1(query) => {
            let to = jiff::Timestamp::now().as_second();
            let from = to - i64::try_from(interval).unwrap_or(i64::MAX / 2);
            client.get(join_url(&address, "/api/v1/query")).query(&[
                ("query", query.clone()),
                ("from", from.to_string()),
                ("to", to.to_string()),
            ])
        }
        Request::V2(body) => client
            .post(join_url(&address, "/api/v2/query/scalar"))
            .json(body),
    };
    let response = builder
        .header("Content-Type", "application/json")
        .header("DD-API-KEY", &credentials.api_key)
        .header("DD-APPLICATION-KEY", &credentials.app_key)
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|e| request_error(&e, TIMEOUT))?;
    let status = response.status().as_u16();
    let body = read_body(response).await?;
    match status {
        200 => {}
        401 | 403 => {
            return Err(ProviderError(format!(
                "received authentication error response code: {status} {}",
                snippet(&body)
            )));
        }
        _ => {
            return Err(ProviderError(format!(
                "received non 2xx response code: {status} {}",
                snippet(&body)
            )));
        }
    }
    let document: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ProviderError(format!("could not parse JSON body: {e}")))?;
    let (value, result, metadata) = match request {
        Request::V1(_) => parse_v1(&document)?,
        Request::V2(_) => parse_v2(&document)?,
    };
    let mut outcome = Outcome::judged(metric, value, &result);
    for (k, v) in metadata {
        outcome = outcome.with_metadata(&k, v);
    }
    Ok(outcome)
}

enum Request {
    V1(String),
    V2(serde_json::Value),
}

fn v1_query(dd: &DatadogMetric) -> Result<String, ProviderError> {
    if dd.queries.as_ref().is_some_and(|q| !q.is_empty()) || dd.formula.is_some() {
        return Err(ProviderError::new(
            "datadog queries and formula need apiVersion v2",
        ));
    }
    dd.query
        .clone()
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ProviderError::new("datadog query is empty"))
}

/// The `/api/v2/query/scalar` request: named queries, reduced by the aggregator, and the
/// formula that combines them (a lone `query` is named `query`).
fn v2_body(dd: &DatadogMetric, interval: u64) -> Result<serde_json::Value, ProviderError> {
    let query = dd.query.as_deref().filter(|q| !q.trim().is_empty());
    let queries = dd.queries.as_ref().filter(|q| !q.is_empty());
    let formula = dd.formula.as_deref().filter(|f| !f.trim().is_empty());
    let named: BTreeMap<String, String> = match (query, queries) {
        (Some(_), Some(_)) => {
            return Err(ProviderError::new(
                "datadog query and queries cannot both be set",
            ));
        }
        (Some(q), None) => BTreeMap::from([("query".to_owned(), q.to_owned())]),
        (None, Some(q)) => q.clone(),
        (None, None) => return Err(ProviderError::new("datadog query is empty")),
    };
    if named.len() > 1 && formula.is_none() {
        return Err(ProviderError::new(
            "datadog formula is required when several queries are set",
        ));
    }
    if formula.is_some() && queries.is_none() {
        return Err(ProviderError::new("datadog formula needs named queries"));
    }
    let aggregator = dd.aggregator.as_deref().unwrap_or(DEFAULT_AGGREGATOR);
    let queries: Vec<serde_json::Value> = named
        .iter()
        .map(|(name, query)| {
            json!({"data_source": "metrics", "name": name, "query": query, "aggregator": aggregator})
        })
        .collect();
    let formula = formula
        .map(str::to_owned)
        .unwrap_or_else(|| named.keys().next().cloned().unwrap_or_default());
    let to = jiff::Timestamp::now().as_millisecond();
    let from = to - i64::try_from(interval.saturating_mul(1000)).unwrap_or(i64::MAX / 2);
    Ok(json!({"data": {"type": "scalar_request", "attributes": {
        "from": from,
        "to": to,
        "queries": queries,
        "formulas": [{"formula": formula}],
    }}}))
}

type Parsed = (String, Value, BTreeMap<String, String>);

fn parse_v1(document: &serde_json::Value) -> Result<Parsed, ProviderError> {
    if let Some(error) = document
        .get("error")
        .and_then(|e| e.as_str())
        .filter(|e| !e.is_empty())
    {
        return Err(ProviderError(format!("datadog query error: {error}")));
    }
    let series = document.get("series").cloned().unwrap_or(json!([]));
    let points = series
        .get(0)
        .and_then(|s| s.get("pointlist"))
        .and_then(|p| p.as_array())
        .filter(|p| !p.is_empty());
    let Some(points) = points else {
        return Ok((series.to_string(), Value::Nil, BTreeMap::new()));
    };
    let last = points
        .last()
        .and_then(|p| p.as_array())
        .filter(|p| p.len() == 2);
    let Some(last) = last else {
        return Err(ProviderError::new(
            "datadog datapoint does not have 2 values",
        ));
    };
    let (value, result) = number(&last[1])?;
    Ok((value, result, BTreeMap::new()))
}

fn parse_v2(document: &serde_json::Value) -> Result<Parsed, ProviderError> {
    let errors = match document.get("errors") {
        Some(serde_json::Value::String(e)) => e.clone(),
        Some(serde_json::Value::Array(e)) => e
            .iter()
            .map(|e| {
                e.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| e.to_string())
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => String::new(),
    };
    if !errors.is_empty() {
        return Err(ProviderError(format!(
            "there were errors in the datadog query: {errors}"
        )));
    }
    let attributes = document
        .pointer("/data/attributes")
        .cloned()
        .unwrap_or(json!({}));
    let columns = attributes
        .get("columns")
        .and_then(|c| c.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let is_type =
        |c: &serde_json::Value, t: &str| c.get("type").and_then(|t| t.as_str()) == Some(t);
    let values = columns
        .iter()
        .find(|c| is_type(c, "number") || c.get("type").is_none())
        .and_then(|c| c.get("values"))
        .and_then(|v| v.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let groups: Vec<&serde_json::Value> = columns.iter().filter(|c| is_type(c, "group")).collect();

    if groups.is_empty() {
        return match values.first() {
            None => Ok((attributes.to_string(), Value::Nil, BTreeMap::new())),
            Some(v) => {
                let (value, result) = number(v)?;
                Ok((value, result, BTreeMap::new()))
            }
        };
    }
    // A `by {tag}` query: one value per group, always a list.
    let mut floats = Vec::with_capacity(values.len());
    let mut results = Vec::with_capacity(values.len());
    let mut named = Vec::with_capacity(values.len());
    for (row, v) in values.iter().enumerate() {
        let f = v.as_f64();
        floats.push(f.unwrap_or(f64::NAN));
        results.push(f.map_or(Value::Nil, Value::Float));
        let name = groups
            .iter()
            .map(|g| group_name(g.pointer(&format!("/values/{row}"))))
            .collect::<Vec<_>>()
            .join(",");
        named.push((name, v.clone()));
    }
    named.sort_by(|a, b| {
        let (a, b) = (
            a.1.as_f64().unwrap_or(f64::MIN),
            b.1.as_f64().unwrap_or(f64::MIN),
        );
        b.total_cmp(&a)
    });
    let mut metadata = BTreeMap::new();
    if named.len() > MAX_GROUPS {
        named.truncate(MAX_GROUPS);
        metadata.insert("groups_truncated".to_owned(), "true".to_owned());
    }
    let listed: Vec<serde_json::Value> = named
        .into_iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    metadata.insert(
        "groups".to_owned(),
        serde_json::Value::Array(listed).to_string(),
    );
    let value = if floats.iter().all(|f| !f.is_nan()) {
        format_floats(&floats)
    } else {
        serde_json::Value::Array(values.to_vec()).to_string()
    };
    Ok((value, Value::Array(results), metadata))
}

/// A group cell is a list of tag values (`["prod"]`); several are joined with `,`.
fn group_name(cell: Option<&serde_json::Value>) -> String {
    match cell {
        Some(serde_json::Value::Array(tags)) => tags
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| t.to_string())
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// A point's value: a number, or `null` (no data) which is `nil` to conditions.
fn number(v: &serde_json::Value) -> Result<(String, Value), ProviderError> {
    match v {
        serde_json::Value::Null => Ok(("null".to_owned(), Value::Nil)),
        serde_json::Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            Ok((format_float(f), Value::Float(f)))
        }
        other => Err(ProviderError(format!(
            "datadog returned a value that is not a number: {other}"
        ))),
    }
}

async fn credentials(
    providers: &Providers,
    ctx: &RunContext,
    dd: &DatadogMetric,
) -> Result<DatadogCredentials, ProviderError> {
    let secret_ref = dd.secret_ref.as_ref();
    let name = secret_ref
        .and_then(|r| r.name.as_deref())
        .filter(|n| !n.is_empty())
        .unwrap_or(DATADOG_SECRET);
    let mut problems = Vec::new();
    if secret_ref.and_then(|r| r.namespaced).unwrap_or(false) {
        match from_secret(providers, &ctx.namespace, name).await {
            Ok(Some(found)) => return Ok(found),
            Ok(None) => {}
            Err(err) => problems.push(err.0),
        }
    }
    if let Some(found) = &providers.settings.datadog {
        return Ok(found.clone());
    }
    let namespace = &providers.settings.controller_namespace;
    match from_secret(providers, namespace, name).await {
        Ok(Some(found)) => return Ok(found),
        Ok(None) => {}
        Err(err) => problems.push(err.0),
    }
    let mut message = "datadog API or App token not found".to_owned();
    if !problems.is_empty() {
        message.push_str(&format!(" ({})", problems.join("; ")));
    }
    Err(ProviderError(message))
}

/// Credentials from a Secret holding both keys, if it exists.
async fn from_secret(
    providers: &Providers,
    namespace: &str,
    name: &str,
) -> Result<Option<DatadogCredentials>, ProviderError> {
    let data = providers
        .secrets()
        .get(namespace, name)
        .await
        .map_err(|e| ProviderError(e.0))?;
    let Some(data) = data else {
        return Ok(None);
    };
    let key = |k: &str| data.get(k).filter(|v| !v.is_empty()).cloned();
    Ok(match (key(API_KEY), key(APP_KEY)) {
        (Some(api_key), Some(app_key)) => Some(DatadogCredentials {
            address: key(ADDRESS),
            api_key,
            app_key,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
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
                "there were errors in the datadog query: Error parsing query",
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
}
