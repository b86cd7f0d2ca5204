//! Wavefront: the chart API (`GET https://<address>/api/v2/chart/api`), asked for the one point
//! of each series nearest to the measurement's start.
//!
//! As in Argo: the token is the value under the key `<address>` of the Secret
//! `wavefront-api-tokens` in the controller's namespace (`API token not found` otherwise), and
//! the query window is the start second alone, with series outside it included. One series
//! gives a float (`0.99` reads `0.99`, two decimals), several a list (`[0.99,0.50]`); the
//! metadata says which point was taken (`timestamps`, epoch seconds) and how far it was from
//! the start (`drift`, seconds), and carries Wavefront's `warnings`. No series is an Error.
//!
//! An address with a scheme (`http://host:port`) is taken as it is, so that a local server
//! can stand in; Argo always prefixes `https://`.

use std::time::Duration;

use expr::Value;
use serde::Deserialize;
use sluice_api::analysis::{MetricProvider, ProviderKind, WavefrontMetric};
use sluice_api::common::AnalysisPhase;

use super::ProviderError;
use super::http::{join_url, read_body, request_error};
use super::outcome::{Outcome, now};
use super::provider::{Env, Provider};
use crate::expression::evaluate_metric;
use crate::redact::Redactor;

/// The Secret holding one token per Wavefront address.
const TOKENS_SECRET: &str = "wavefront-api-tokens";
const TIMEOUT: Duration = Duration::from_secs(30);

/// The Wavefront provider (`provider.wavefront`).
pub(crate) struct Wavefront;

/// A Wavefront query and where to send it.
pub(crate) struct Query<'a> {
    address: &'a str,
    query: &'a str,
}

impl Provider for Wavefront {
    const KIND: ProviderKind = ProviderKind::Wavefront;
    type Config = WavefrontMetric;
    type Query<'a> = Query<'a>;

    fn config(provider: &MetricProvider) -> Option<&WavefrontMetric> {
        provider.wavefront.as_ref()
    }

    fn parse<'a>(_env: Env<'a>, wf: &'a WavefrontMetric) -> Result<Query<'a>, ProviderError> {
        Ok(Query {
            address: wf.address.as_deref().unwrap_or_default(),
            query: wf.query.as_deref().unwrap_or_default(),
        })
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Query<'a>,
        redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        let token = token(env, query.address).await?;
        redactor.add(&token);
        let start = now().0.as_second();
        let millis = (start * 1000).to_string();
        let base = if query.address.contains("://") {
            query.address.to_owned()
        } else {
            format!("https://{}", query.address)
        };
        let response = env
            .providers
            .http(false)
            .get(join_url(&base, "/api/v2/chart/api"))
            .query(&[
                ("q", query.query),
                ("s", &millis),
                ("e", &millis),
                ("g", "s"),
                ("p", "1"),
                ("i", "true"),
                ("autoEvents", "false"),
                ("listmode", "false"),
                ("strict", "false"),
                ("includeObsoleteMetrics", "false"),
            ])
            .bearer_auth(&token)
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| request_error(&e, TIMEOUT))?;
        let status = response.status();
        let body = read_body(response).await?;
        if !status.is_success() {
            return Err(ProviderError(format!(
                "server returned {status}\n{}\n",
                String::from_utf8_lossy(&body)
            )));
        }
        let answer: Answer = serde_json::from_slice(&body)
            .map_err(|e| ProviderError(format!("could not parse JSON body: {e}")))?;
        Ok(judge(env, &answer, start))
    }
}

/// What the chart API answers, as far as it is read.
#[derive(Debug, Default, Deserialize)]
struct Answer {
    #[serde(default)]
    timeseries: Vec<Series>,
    #[serde(default)]
    warnings: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Series {
    /// `[epoch seconds, value]` pairs.
    #[serde(default)]
    data: Vec<Vec<f64>>,
}

/// The point nearest to `start` (the first of equals): its value, time and drift, seconds.
fn nearest(series: &Series, start: i64) -> (f64, i64, i64) {
    let mut found = (0.0, 0.0, f64::INFINITY);
    for point in &series.data {
        let (Some(&time), Some(&value)) = (point.first(), point.get(1)) else {
            continue;
        };
        let delta = time - start as f64;
        if delta.abs() < found.2.abs() {
            found = (value, time, delta);
        }
    }
    // Go turns an infinite drift (no point) into the smallest int64 on amd64.
    let drift = if found.2.is_finite() {
        found.2 as i64
    } else {
        i64::MIN
    };
    (found.0, found.1 as i64, drift)
}

fn judge(env: Env<'_>, answer: &Answer, start: i64) -> Outcome {
    let mut outcome = Outcome::default();
    if let Some(warnings) = answer.warnings.as_deref().filter(|w| !w.is_empty()) {
        outcome
            .metadata
            .insert("warnings".to_owned(), warnings.to_owned());
    }
    let error = |mut outcome: Outcome, message: String| {
        outcome.phase = Some(AnalysisPhase::Error);
        outcome.message = Some(message);
        outcome
    };
    let points: Vec<(f64, i64, i64)> = answer
        .timeseries
        .iter()
        .map(|s| nearest(s, start))
        .collect();
    let (value, result, timestamps, drift) = match points.as_slice() {
        [] => {
            return error(
                outcome,
                "No TimeSeries found in response from Wavefront".to_owned(),
            );
        }
        [(value, time, drift)] => (
            format!("{value:.2}"),
            Value::Float(*value),
            time.to_string(),
            drift.to_string(),
        ),
        many => {
            let list = |f: &dyn Fn(&(f64, i64, i64)) -> String| {
                format!("[{}]", many.iter().map(f).collect::<Vec<_>>().join(","))
            };
            (
                list(&|p| format!("{:.2}", p.0)),
                Value::Array(many.iter().map(|p| Value::Float(p.0)).collect()),
                list(&|p| p.1.to_string()),
                list(&|p| p.2.to_string()),
            )
        }
    };
    match evaluate_metric(env.metric, &result) {
        Ok(phase) => {
            outcome.phase = Some(phase);
            outcome.value = Some(value);
            outcome.metadata.insert("timestamps".to_owned(), timestamps);
            outcome.metadata.insert("drift".to_owned(), drift);
            outcome
        }
        // As in Argo: an Error with the warnings, without the value.
        Err(e) => error(outcome, e.0),
    }
}

async fn token(env: Env<'_>, address: &str) -> Result<String, ProviderError> {
    let namespace = &env.providers.settings().controller_namespace;
    let data = env
        .providers
        .secrets()
        .get(namespace, TOKENS_SECRET)
        .await
        .map_err(|e| ProviderError(e.0))?
        .ok_or_else(|| ProviderError(format!("secrets \"{TOKENS_SECRET}\" not found")))?;
    data.get(address)
        .cloned()
        .ok_or_else(|| ProviderError::new("API token not found"))
}

#[cfg(test)]
mod tests;
