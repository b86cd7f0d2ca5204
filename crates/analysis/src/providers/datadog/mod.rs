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

use serde_json::json;
use sluice_api::analysis::{DatadogMetric, MetricProvider, ProviderKind};
use sluice_api::duration::parse_go_duration_nanos;
use sluice_api::parse_go_duration;

use super::http::{join_url, read_body, request_error, snippet};
use super::outcome::Outcome;
use super::provider::{Env, Provider};
use super::settings::DatadogCredentials;
use super::{ProviderError, Providers, RunContext};
use crate::redact::Redactor;

mod response;

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

/// The Datadog provider (`provider.datadog`).
pub(crate) struct Datadog;

/// A Datadog query, checked.
pub(crate) struct Query<'a> {
    dd: &'a DatadogMetric,
    interval: u64,
    request: Request,
    timeout: Duration,
}

impl Provider for Datadog {
    const KIND: ProviderKind = ProviderKind::Datadog;
    type Config = DatadogMetric;
    type Query<'a> = Query<'a>;

    fn config(provider: &MetricProvider) -> Option<&DatadogMetric> {
        provider.datadog.as_ref()
    }

    fn parse<'a>(_env: Env<'a>, dd: &'a DatadogMetric) -> Result<Query<'a>, ProviderError> {
        let interval = parse_go_duration(dd.interval())
            .map_err(|e| {
                ProviderError(format!(
                    "datadog interval {:?} is invalid: {e}",
                    dd.interval()
                ))
            })?
            .as_secs();
        let request = match dd.api_version() {
            "v1" => Request::V1(v1_query(dd)?),
            "v2" => Request::V2(v2_body(dd, interval)?),
            other => {
                return Err(ProviderError(format!(
                    "invalid Datadog API version {other:?}"
                )));
            }
        };
        Ok(Query {
            dd,
            interval,
            request,
            timeout: request_timeout(dd)?,
        })
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Query<'a>,
        redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        measure(env, query, redactor).await
    }
}

/// `requestTimeout` (Argo 1.10), or 10 s; in Argo's words when it is no positive duration.
fn request_timeout(dd: &DatadogMetric) -> Result<Duration, ProviderError> {
    let Some(text) = dd.request_timeout.as_deref().filter(|t| !t.is_empty()) else {
        return Ok(TIMEOUT);
    };
    let nanos = parse_go_duration_nanos(text).map_err(|e| {
        ProviderError(format!(
            "Could not parse the request timeout: time: {e}. Please review the Analysis Template."
        ))
    })?;
    let timeout = Duration::from_nanos(u64::try_from(nanos).unwrap_or(0));
    if timeout.is_zero() {
        return Err(ProviderError(
            "Request timeout must be a positive duration (e.g. 30s). Please review the Analysis \
             Template."
                .into(),
        ));
    }
    Ok(timeout)
}

async fn measure(
    env: Env<'_>,
    query: Query<'_>,
    redactor: &mut Redactor,
) -> Result<Outcome, ProviderError> {
    let Query {
        dd,
        interval,
        request,
        timeout,
    } = query;
    let providers = env.providers;
    let credentials = credentials(providers, env.run, dd).await?;
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
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| request_error(&e, timeout))?;
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
    let reading = match request {
        Request::V1(_) => response::parse_v1(&document)?,
        Request::V2(_) => response::parse_v2(&document)?,
    };
    let mut outcome = Outcome::judged(env.metric, reading.value, &reading.result);
    for (k, v) in reading.metadata {
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
mod tests;
