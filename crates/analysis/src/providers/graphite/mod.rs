//! Graphite: the render API (`GET <address>/render?<query>&format=json`).
//!
//! As in Argo: `query` is the render API's query string (`target=...&from=...`), runs of
//! whitespace in it collapse to one space so a long target can be written over several lines,
//! and `format=json` is set. The result is the list of the first target's non-null values
//! (`result[0]`); the value reads as Go's `%f` writes them, `[0.990000,0.980000]`. A target
//! with no datapoints is an Error (`no values found`), as is any status from 400 up (with the
//! body) or a datapoint that is not `[value, timestamp]`.

use std::collections::BTreeMap;
use std::time::Duration;

use expr::Value;
use sluice_api::analysis::{GraphiteMetric, MetricProvider, ProviderKind};

use super::ProviderError;
use super::http::{join_url, read_body, request_error};
use super::outcome::{Outcome, format_float};
use super::provider::{Env, Provider};
use crate::redact::Redactor;

const TIMEOUT: Duration = Duration::from_secs(10);

/// The Graphite provider (`provider.graphite`).
pub(crate) struct Graphite;

impl Provider for Graphite {
    const KIND: ProviderKind = ProviderKind::Graphite;
    type Config = GraphiteMetric;
    type Query<'a> = reqwest::Url;

    fn config(provider: &MetricProvider) -> Option<&GraphiteMetric> {
        provider.graphite.as_ref()
    }

    fn parse<'a>(
        _env: Env<'a>,
        graphite: &'a GraphiteMetric,
    ) -> Result<reqwest::Url, ProviderError> {
        let address = graphite.address.as_deref().unwrap_or_default();
        render_url(address, graphite.query.as_deref().unwrap_or_default())
    }

    async fn measure<'a>(
        env: Env<'a>,
        url: reqwest::Url,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        let response = env
            .providers
            .http(false)
            .get(url)
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| request_error(&e, TIMEOUT))?;
        let status = response.status();
        let body = read_body(response).await?;
        if status.as_u16() >= 400 {
            return Err(ProviderError(format!(
                "error response: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        let values = first_target_values(&body)?;
        let shown: Vec<String> = values.iter().copied().map(go_percent_f).collect();
        let result = Value::Array(values.into_iter().map(Value::Float).collect());
        Ok(Outcome::judged(
            env.metric,
            format!("[{}]", shown.join(",")),
            &result,
        ))
    }
}

/// `<address>/render` with the metric's query, whitespace collapsed, and `format=json`. Like
/// Go's `url.Values`, the parameters are decoded, then written back sorted by name.
fn render_url(address: &str, query: &str) -> Result<reqwest::Url, ProviderError> {
    let invalid = || ProviderError(format!("Graphite address {address} is not a valid URL"));
    if address.is_empty() {
        return Err(invalid());
    }
    let mut url = reqwest::Url::parse(&join_url(address, "render")).map_err(|_| invalid())?;
    if !url.has_host() {
        return Err(invalid());
    }
    let collapsed = collapse_whitespace(query);
    let mut params: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in form_urlencoded(&collapsed) {
        params.entry(name).or_default().push(value);
    }
    params.insert("format".to_owned(), vec!["json".to_owned()]);
    url.query_pairs_mut().clear().extend_pairs(
        params
            .iter()
            .flat_map(|(name, values)| values.iter().map(move |v| (name, v))),
    );
    Ok(url)
}

/// Each run of whitespace as one space, at the ends too (Argo keeps them).
fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// The name/value pairs of a query string (`+` and `%XX` decoded), in order.
fn form_urlencoded(query: &str) -> Vec<(String, String)> {
    let Ok(url) = reqwest::Url::parse(&format!("http://query/?{query}")) else {
        return Vec::new();
    };
    url.query_pairs()
        .map(|(name, value)| (name.into_owned(), value.into_owned()))
        .collect()
}

/// The non-null values of the first target's datapoints.
fn first_target_values(body: &[u8]) -> Result<Vec<f64>, ProviderError> {
    let targets: Vec<serde_json::Value> = serde_json::from_slice(body)
        .map_err(|e| ProviderError(format!("could not parse JSON body: {e}")))?;
    let points = targets
        .first()
        .and_then(|t| t.get("datapoints"))
        .and_then(|d| d.as_array())
        .filter(|d| !d.is_empty())
        .ok_or_else(|| ProviderError::new("no values found"))?;
    let mut values = Vec::with_capacity(points.len());
    for point in points {
        if let Some(value) = datapoint_value(point)? {
            values.push(value);
        }
    }
    Ok(values)
}

/// A datapoint is `[value, timestamp]`; the value is a number, a numeric string or null (no
/// data), the timestamp a number, an integer string or null.
fn datapoint_value(point: &serde_json::Value) -> Result<Option<f64>, ProviderError> {
    let pair = point
        .as_array()
        .filter(|p| p.len() == 2)
        .ok_or_else(|| ProviderError(format!("error unmarshaling data point: {point}")))?;
    match &pair[1] {
        serde_json::Value::Null | serde_json::Value::Number(_) => {}
        serde_json::Value::String(s) if s.parse::<i64>().is_ok() => {}
        other => {
            return Err(ProviderError(format!(
                "error unmarshaling timestamp: {other}"
            )));
        }
    }
    match &pair[0] {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Number(n) => Ok(n.as_f64()),
        serde_json::Value::String(s) => {
            s.trim().parse::<f64>().map(Some).map_err(|_| {
                ProviderError(format!("error unmarshaling value: {s:?} is not a number"))
            })
        }
        other => Err(ProviderError(format!("error unmarshaling value: {other}"))),
    }
}

/// A float as Go's `%f` writes it: six decimals; `NaN`, `+Inf`, `-Inf` as such.
fn go_percent_f(f: f64) -> String {
    if f.is_finite() {
        format!("{f:.6}")
    } else {
        format_float(f)
    }
}

#[cfg(test)]
mod tests;
