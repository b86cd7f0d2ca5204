//! Apache SkyWalking: a GraphQL query (`POST <address>/graphql`) over the last `interval`.
//!
//! As in Argo: the query gets one variable, `duration`, `{start, end, step: "MINUTE"}` with
//! start and end as SkyWalking writes minutes (`2026-11-27 0031`, UTC); the answer's `data`
//! is the result, and its JSON (keys sorted, as Go writes maps) the value. GraphQL errors are
//! an Error (`graphql: <first message>`), so is a `null` data (`no results returned from
//! SkyWalking query`) and a condition that cannot be evaluated, the last two without a value.
//! `interval` is required: it is a Go duration.

use std::time::Duration;

use sluice_api::analysis::{MetricProvider, ProviderKind, SkyWalkingMetric};
use sluice_api::duration::parse_go_duration_nanos;

use super::ProviderError;
use super::http::{read_body, request_error};
use super::outcome::Outcome;
use super::provider::{Env, Provider};
use crate::expression::{evaluate_metric, json_to_value};
use crate::redact::Redactor;

const TIMEOUT: Duration = Duration::from_secs(30);
/// How SkyWalking writes a minute.
const MINUTE_FORMAT: &str = "%Y-%m-%d %H%M";

/// The SkyWalking provider (`provider.skywalking`).
pub(crate) struct SkyWalking;

/// A GraphQL query, its endpoint and its window.
pub(crate) struct Query<'a> {
    endpoint: String,
    query: &'a str,
    interval_nanos: i64,
}

impl Provider for SkyWalking {
    const KIND: ProviderKind = ProviderKind::SkyWalking;
    type Config = SkyWalkingMetric;
    type Query<'a> = Query<'a>;

    fn config(provider: &MetricProvider) -> Option<&SkyWalkingMetric> {
        provider.skywalking.as_ref()
    }

    fn parse<'a>(_env: Env<'a>, sw: &'a SkyWalkingMetric) -> Result<Query<'a>, ProviderError> {
        let interval = sw.interval.as_deref().unwrap_or_default();
        let interval_nanos =
            parse_go_duration_nanos(interval).map_err(|e| ProviderError(format!("time: {e}")))?;
        Ok(Query {
            endpoint: format!("{}/graphql", sw.address.as_deref().unwrap_or_default()),
            query: sw.query.as_deref().unwrap_or_default(),
            interval_nanos,
        })
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Query<'a>,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        let now = jiff::Timestamp::now();
        let start = now
            .checked_sub(jiff::SignedDuration::from_nanos(query.interval_nanos))
            .unwrap_or(now);
        let minute = |t: jiff::Timestamp| t.strftime(MINUTE_FORMAT).to_string();
        let endpoint = reqwest::Url::parse(&query.endpoint)
            .map_err(|e| ProviderError(format!("skywalking address is not a URL: {e}")))?;
        let response = env
            .providers
            .http(false)
            .post(endpoint)
            .json(&serde_json::json!({
                "query": query.query,
                "variables": {"duration": {
                    "start": minute(start),
                    "end": minute(now),
                    "step": "MINUTE",
                }},
            }))
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| request_error(&e, TIMEOUT))?;
        let status = response.status();
        let body = read_body(response).await?;
        let answer: serde_json::Value = match serde_json::from_slice(&body) {
            Ok(answer) => answer,
            Err(_) if status.as_u16() != 200 => {
                return Err(ProviderError(format!(
                    "graphql: server returned a non-200 status code: {}",
                    status.as_u16()
                )));
            }
            Err(e) => return Err(ProviderError(format!("decoding response: {e}"))),
        };
        if let Some(first) = answer
            .get("errors")
            .and_then(|e| e.as_array())
            .and_then(|e| e.first())
        {
            let message = first.get("message").and_then(|m| m.as_str()).unwrap_or("");
            return Err(ProviderError(format!("graphql: {message}")));
        }
        let data = answer.get("data").unwrap_or(&serde_json::Value::Null);
        if data.is_null() {
            return Err(ProviderError::new(
                "no results returned from SkyWalking query",
            ));
        }
        let phase =
            evaluate_metric(env.metric, &json_to_value(data)).map_err(|e| ProviderError(e.0))?;
        Ok(Outcome {
            phase: Some(phase),
            value: Some(sorted(data).to_string()),
            ..Default::default()
        })
    }
}

/// `value` with every object's keys in order, as Go's `json.Marshal` writes maps.
fn sorted(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(sorted).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests;
