//! Prometheus: an instant query (`/api/v1/query`) or a range query (`/api/v1/query_range`).
//!
//! As in Argo, a scalar result is a float and a vector a list of floats (`result[0]`), even
//! with one element; a range query's matrix is flattened into one list (`all(result, ...)`).
//! The value reads `0.99` for a scalar and `[0.99]` for a vector. Queries to Amazon Managed
//! Service for Prometheus are signed with SigV4 (see `sigv4`).

use std::collections::BTreeMap;
use std::time::Duration;

use expr::{Context, Value};
use serde::Deserialize;
use sluice_api::analysis::{
    MetricProvider, PrometheusMetric, PrometheusRangeQueryArgs, ProviderKind,
};
use sluice_api::parse_go_duration;

use super::ProviderError;
use super::http::{authenticate, join_url, read_body, request_error, snippet, with_headers};
use super::outcome::{Outcome, format_float, format_floats};
use super::provider::{Env, Provider};
use crate::expression::check_shape;
use crate::redact::Redactor;
use sigv4::Signer;

mod sigv4;

/// Metadata key of the query after argument substitution (on the metric result).
pub const RESOLVED_PROMETHEUS_QUERY: &str = "ResolvedPrometheusQuery";

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The Prometheus provider (`provider.prometheus`).
pub(crate) struct Prometheus;

/// A Prometheus query, checked.
pub(crate) struct Query<'a> {
    prom: &'a PrometheusMetric,
    address: String,
    timeout: Duration,
    query: &'a str,
    range: Option<Range>,
}

/// `start`, `end` and `step` of a range query, as sent.
struct Range {
    start: String,
    end: String,
    step: String,
}

impl Provider for Prometheus {
    const KIND: ProviderKind = ProviderKind::Prometheus;
    type Config = PrometheusMetric;
    type Query<'a> = Query<'a>;

    fn config(provider: &MetricProvider) -> Option<&PrometheusMetric> {
        provider.prometheus.as_ref()
    }

    fn parse<'a>(env: Env<'a>, prom: &'a PrometheusMetric) -> Result<Query<'a>, ProviderError> {
        let settings = env.providers.settings();
        let address = address(prom, settings.prometheus_address.as_deref())?;
        let timeout = timeout(prom)?;
        let query = prom
            .query
            .as_deref()
            .filter(|q| !q.trim().is_empty())
            .ok_or_else(|| ProviderError::new("prometheus query is empty"))?;
        let range = prom.range_query.as_ref().map(range_params).transpose()?;
        Ok(Query {
            prom,
            address,
            timeout,
            query,
            range,
        })
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Query<'a>,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        measure(env, query).await
    }

    fn metadata(prom: &PrometheusMetric, redactor: &Redactor) -> Option<BTreeMap<String, String>> {
        let query = prom.query.as_deref().filter(|q| !q.is_empty())?;
        Some(BTreeMap::from([(
            RESOLVED_PROMETHEUS_QUERY.to_owned(),
            redactor.redact(query),
        )]))
    }
}

async fn measure(env: Env<'_>, q: Query<'_>) -> Result<Outcome, ProviderError> {
    let Query {
        prom,
        address,
        timeout,
        query,
        range,
    } = q;
    // Credentials first, as Argo finds them when it builds its client.
    let signer = match sigv4::wanted(&address, prom.authentication.as_ref()) {
        Some(sigv4) => Some(Signer::new(env.providers.aws().await, sigv4).await?),
        None => None,
    };
    let client = env.providers.http(prom.insecure.unwrap_or(false));
    let request = match range {
        None => {
            let time = unix_seconds(jiff::Timestamp::now());
            client
                .post(join_url(&address, "/api/v1/query"))
                .form(&[("query", query), ("time", time.as_str())])
        }
        Some(Range { start, end, step }) => client
            .post(join_url(&address, "/api/v1/query_range"))
            .form(&[
                ("query", query),
                ("start", start.as_str()),
                ("end", end.as_str()),
                ("step", step.as_str()),
            ]),
    };
    let request = with_headers(request, prom.headers.as_deref().unwrap_or_default())?;
    let request = authenticate(client, request, prom.authentication.as_ref(), timeout).await?;
    let mut request = request
        .timeout(timeout)
        .build()
        .map_err(|e| request_error(&e, timeout))?;
    if let Some(signer) = &signer {
        signer.sign(&mut request).await?;
    }
    let response = client
        .execute(request)
        .await
        .map_err(|e| request_error(&e, timeout))?;
    let status = response.status();
    let body = read_body(response).await?;
    let reply = parse_reply(status, &body)?;

    let (value, result) = reply.data.result()?;
    let mut outcome = Outcome::judged(env.metric, value, &result);
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
fn range_params(range: &PrometheusRangeQueryArgs) -> Result<Range, ProviderError> {
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
    Ok(Range {
        start: start.to_string(),
        end: end.to_string(),
        step: format_float(step.as_secs_f64()),
    })
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
mod tests;
