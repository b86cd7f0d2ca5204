//! New Relic: an NRQL query through NerdGraph (GraphQL).
//!
//! The Secret (`profile`, default `newrelic`, in the controller's namespace) holds
//! `personal-api-key` and `account-id`, optionally `region` (`us`, `eu`) and
//! `base-url-nerdgraph`. As in Argo, a single result row is `result` itself
//! (`result.successRate >= 0.95`), several rows are a list, and no rows is an error.

use std::time::Duration;

use serde_json::json;
use sluice_api::analysis::{MetricProvider, NewRelicMetric, ProviderKind};

use super::http::{read_body, request_error, snippet};
use super::outcome::Outcome;
use super::provider::{Env, Provider};
use super::{ProviderError, Providers};
use crate::expression::json_to_value;
use crate::redact::Redactor;

/// Default Secret name.
const NEWRELIC_SECRET: &str = "newrelic";
const US_NERDGRAPH: &str = "https://api.newrelic.com/graphql";
const EU_NERDGRAPH: &str = "https://api.eu.newrelic.com/graphql";
const STAGING_NERDGRAPH: &str = "https://staging-api.newrelic.com/graphql";
/// HTTP timeout when the metric sets no query timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

const QUERY: &str = "query ($accountId: Int!, $query: Nrql!) { actor { account(id: $accountId) { nrql(query: $query) { results } } } }";
const QUERY_WITH_TIMEOUT: &str = "query ($accountId: Int!, $query: Nrql!, $timeout: Seconds) { actor { account(id: $accountId) { nrql(query: $query, timeout: $timeout) { results } } } }";

struct Account {
    api_key: String,
    account_id: i64,
    endpoint: String,
}

/// The New Relic provider (`provider.newRelic`).
pub(crate) struct NewRelic;

/// An NRQL query, checked.
pub(crate) struct Query<'a> {
    nr: &'a NewRelicMetric,
    nrql: &'a str,
}

impl Provider for NewRelic {
    const KIND: ProviderKind = ProviderKind::NewRelic;
    type Config = NewRelicMetric;
    type Query<'a> = Query<'a>;

    fn config(provider: &MetricProvider) -> Option<&NewRelicMetric> {
        provider.new_relic.as_ref()
    }

    /// Only the query: as in Argo, the account is read before the timeout is checked.
    fn parse<'a>(_env: Env<'a>, nr: &'a NewRelicMetric) -> Result<Query<'a>, ProviderError> {
        let nrql = nr
            .query
            .as_deref()
            .filter(|q| !q.trim().is_empty())
            .ok_or_else(|| ProviderError::new("newRelic query is empty"))?;
        Ok(Query { nr, nrql })
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Query<'a>,
        redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        measure(env, query, redactor).await
    }
}

async fn measure(
    env: Env<'_>,
    Query { nr, nrql }: Query<'_>,
    redactor: &mut Redactor,
) -> Result<Outcome, ProviderError> {
    let providers = env.providers;
    let account = account(providers, nr.profile.as_deref()).await?;
    redactor.add(&account.api_key);

    let (query, variables, timeout) = match nr.timeout {
        Some(t) if t < 0 => {
            return Err(ProviderError::new(
                "newRelic timeout should not be negative",
            ));
        }
        Some(t) if t > 0 => (
            QUERY_WITH_TIMEOUT,
            json!({"accountId": account.account_id, "query": nrql, "timeout": t}),
            // Leave NerdGraph time to answer with its own timeout error.
            Duration::from_secs(t.unsigned_abs().saturating_add(5)),
        ),
        _ => (
            QUERY,
            json!({"accountId": account.account_id, "query": nrql}),
            DEFAULT_TIMEOUT,
        ),
    };
    let response = providers
        .http(false)
        .post(&account.endpoint)
        .header("API-Key", &account.api_key)
        .json(&json!({"query": query, "variables": variables}))
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| request_error(&e, timeout))?;
    let status = response.status();
    let body = read_body(response).await?;
    let document: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
        ProviderError(format!(
            "newRelic returned {status} without a JSON body: {}",
            snippet(&body)
        ))
    })?;
    if let Some(errors) = document
        .get("errors")
        .and_then(|e| e.as_array())
        .filter(|e| !e.is_empty())
    {
        let messages: Vec<String> = errors
            .iter()
            .map(|e| {
                e.get("message")
                    .and_then(|m| m.as_str())
                    .map(str::to_owned)
                    .unwrap_or_else(|| e.to_string())
            })
            .collect();
        return Err(ProviderError(format!(
            "newRelic query failed: {}",
            messages.join("; ")
        )));
    }
    if !status.is_success() {
        return Err(ProviderError(format!(
            "received non 2xx response code: {} {}",
            status.as_u16(),
            snippet(&body)
        )));
    }
    let results = document
        .pointer("/data/actor/account/nrql/results")
        .and_then(|r| r.as_array())
        .ok_or_else(|| ProviderError::new("newRelic response has no NRQL results"))?;
    let selected = match results.as_slice() {
        [] => return Err(ProviderError::new("no results returned from NRQL query")),
        [row] if row.as_object().is_some_and(|r| r.is_empty()) => {
            return Err(ProviderError::new("no results returned from NRQL query"));
        }
        [row] => row.clone(),
        _ => serde_json::Value::Array(results.clone()),
    };
    let value = selected.to_string();
    Ok(Outcome::judged(
        env.metric,
        value,
        &json_to_value(&selected),
    ))
}

async fn account(providers: &Providers, profile: Option<&str>) -> Result<Account, ProviderError> {
    let name = profile.filter(|p| !p.is_empty()).unwrap_or(NEWRELIC_SECRET);
    let namespace = &providers.settings.controller_namespace;
    let data = providers
        .secrets()
        .get(namespace, name)
        .await
        .map_err(|e| ProviderError(e.0))?
        .ok_or_else(|| {
            ProviderError(format!(
                "newRelic secret \"{name}\" not found in namespace \"{namespace}\""
            ))
        })?;
    let key = |k: &str| {
        data.get(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let (Some(api_key), Some(account_id)) = (key("personal-api-key"), key("account-id")) else {
        return Err(ProviderError::new(
            "account ID or personal API key not found",
        ));
    };
    let account_id = account_id
        .parse::<i64>()
        .map_err(|e| ProviderError(format!("could not parse account ID: {e}")))?;
    let endpoint = match key("base-url-nerdgraph") {
        Some(url) => url,
        None => match key("region")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("us") => US_NERDGRAPH.to_owned(),
            Some("eu") => EU_NERDGRAPH.to_owned(),
            Some("staging") => STAGING_NERDGRAPH.to_owned(),
            Some(other) => {
                return Err(ProviderError(format!("unknown newRelic region {other:?}")));
            }
        },
    };
    Ok(Account {
        api_key,
        account_id,
        endpoint,
    })
}

#[cfg(test)]
mod tests;
