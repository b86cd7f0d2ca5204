//! New Relic: an NRQL query through NerdGraph (GraphQL).
//!
//! The Secret (`profile`, default `newrelic`, in the controller's namespace) holds
//! `personal-api-key` and `account-id`, optionally `region` (`us`, `eu`) and
//! `base-url-nerdgraph`. As in Argo, a single result row is `result` itself
//! (`result.successRate >= 0.95`), several rows are a list, and no rows is an error.

use std::time::Duration;

use serde_json::json;
use sluice_api::analysis::{Metric, NewRelicMetric};

use super::http::{read_body, request_error, snippet};
use super::{Outcome, ProviderError, Providers};
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

pub(crate) async fn measure(
    providers: &Providers,
    metric: &Metric,
    nr: &NewRelicMetric,
    redactor: &mut Redactor,
) -> Result<Outcome, ProviderError> {
    let nrql = nr
        .query
        .as_deref()
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ProviderError::new("newRelic query is empty"))?;
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
    Ok(Outcome::judged(metric, value, &json_to_value(&selected)))
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
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use axum::{Json, Router};
    use sluice_api::common::AnalysisPhase;

    use super::super::test_support::{ctx, metric_with, providers_with, serve};
    use super::*;
    use crate::secrets::MemorySecrets;

    const KEY: &str = "NRAK-TESTKEY0123456789";

    type Log = Arc<Mutex<Vec<serde_json::Value>>>;

    /// NerdGraph answering by NRQL text.
    fn fake_nerdgraph(log: Log) -> Router {
        async fn graphql(
            State(log): State<Log>,
            headers: HeaderMap,
            Json(body): Json<serde_json::Value>,
        ) -> (StatusCode, Json<serde_json::Value>) {
            log.lock().unwrap().push(body.clone());
            if headers.get("api-key").is_none_or(|k| k != KEY) {
                return (
                    StatusCode::OK,
                    Json(json!({"errors": [{"message": "Invalid API key"}], "data": null})),
                );
            }
            let vars = &body["variables"];
            if !body["query"]
                .as_str()
                .is_some_and(|q| q.contains("nrql(query: $query"))
                || vars["accountId"] != 12345
            {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"errors": [{"message": "malformed"}]})),
                );
            }
            let rows = match vars["query"].as_str().unwrap_or_default() {
                "healthy" => json!([{"successRate": 0.99}]),
                "bad" => json!([{"successRate": 0.5}]),
                "middle" => json!([{"successRate": 0.8}]),
                "facet" => json!([{"facet": "a", "count": 1}, {"facet": "b", "count": 2}]),
                "none" => json!([]),
                "blank" => json!([{}]),
                _ => {
                    return (
                        StatusCode::OK,
                        Json(json!({"errors": [{"message": "NRQL Syntax Error"}]})),
                    );
                }
            };
            let reply = json!({"data": {"actor": {"account": {"nrql": {"results": rows}}}}});
            (StatusCode::OK, Json(reply))
        }
        Router::new()
            .route("/graphql", post(graphql))
            .with_state(log)
    }

    async fn start(profile: &str) -> (Log, MemorySecrets) {
        let log: Log = Default::default();
        let url = serve(fake_nerdgraph(log.clone())).await;
        let secrets = MemorySecrets::new();
        let endpoint = format!("{url}/graphql");
        secrets.insert(
            "argo-rollouts",
            profile,
            [
                ("personal-api-key", KEY),
                ("account-id", "12345"),
                ("base-url-nerdgraph", endpoint.as_str()),
            ],
        );
        (log, secrets)
    }

    fn metric(nr: serde_json::Value, success: &str, failure: Option<&str>) -> Metric {
        metric_with(
            "success-rate",
            json!({"newRelic": nr}),
            Some(success),
            failure,
        )
    }

    #[tokio::test]
    async fn phases_from_the_first_row() {
        let (log, secrets) = start("newrelic").await;
        let p = providers_with(Default::default(), secrets);
        let cases = [
            ("healthy", AnalysisPhase::Successful),
            ("bad", AnalysisPhase::Failed),
            ("middle", AnalysisPhase::Inconclusive),
        ];
        for (query, phase) in cases {
            let m = metric(
                json!({"query": query}),
                "result.successRate >= 0.95",
                Some("result.successRate < 0.6"),
            );
            let measurement = p.measure(&ctx(), &m).await;
            assert_eq!(measurement.phase, Some(phase), "{:?}", measurement.message);
            assert!(measurement.finished_at.is_some());
        }
        let m = metric(
            json!({"query": "healthy", "timeout": 20}),
            "result.successRate >= 0.95",
            None,
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(
            measurement.value.as_deref(),
            Some(r#"{"successRate":0.99}"#)
        );
        let seen = log.lock().unwrap();
        assert_eq!(
            seen[0]["variables"],
            json!({"accountId": 12345, "query": "healthy"})
        );
        assert_eq!(seen[3]["variables"]["timeout"], 20);
        assert!(
            seen[3]["query"]
                .as_str()
                .unwrap()
                .contains("timeout: $timeout")
        );
    }

    #[tokio::test]
    async fn several_rows_are_a_list() {
        let (_, secrets) = start("team-a").await;
        let p = providers_with(Default::default(), secrets);
        let m = metric(
            json!({"query": "facet", "profile": "team-a"}),
            "len(result) == 2 && result[1].count == 2",
            None,
        );
        let measurement = p.measure(&ctx(), &m).await;
        assert_eq!(
            measurement.phase,
            Some(AnalysisPhase::Successful),
            "{:?}",
            measurement.message
        );
    }

    #[tokio::test]
    async fn errors() {
        let (_, secrets) = start("newrelic").await;
        let p = providers_with(Default::default(), secrets.clone());
        let cases = [
            (
                json!({"query": "none"}),
                "no results returned from NRQL query",
            ),
            (
                json!({"query": "blank"}),
                "no results returned from NRQL query",
            ),
            (
                json!({"query": "SELEC x"}),
                "newRelic query failed: NRQL Syntax Error",
            ),
            (json!({"query": ""}), "newRelic query is empty"),
            (
                json!({"query": "x", "timeout": -1}),
                "newRelic timeout should not be negative",
            ),
            (
                json!({"query": "x", "profile": "other"}),
                "newRelic secret \"other\" not found in namespace \"argo-rollouts\"",
            ),
        ];
        for (nr, message) in cases {
            let measurement = p.measure(&ctx(), &metric(nr, "true", None)).await;
            assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
            assert_eq!(measurement.message.as_deref(), Some(message));
        }
        secrets.insert(
            "argo-rollouts",
            "bad-id",
            [("personal-api-key", KEY), ("account-id", "abc")],
        );
        secrets.insert("argo-rollouts", "no-key", [("account-id", "1")]);
        let p = providers_with(Default::default(), secrets);
        let m = metric(json!({"query": "x", "profile": "bad-id"}), "true", None);
        let message = p.measure(&ctx(), &m).await.message.unwrap();
        assert!(
            message.starts_with("could not parse account ID"),
            "{message}"
        );
        let m = metric(json!({"query": "x", "profile": "no-key"}), "true", None);
        let message = p.measure(&ctx(), &m).await.message.unwrap();
        assert_eq!(message, "account ID or personal API key not found");
    }

    #[tokio::test]
    async fn wrong_key_is_an_error_and_redacted() {
        let (_, secrets) = start("newrelic").await;
        let url = serve(Router::new().route(
            "/graphql",
            post(|headers: HeaderMap| async move {
                let key = headers["api-key"].to_str().unwrap_or_default().to_owned();
                Json(json!({"errors": [{"message": format!("Invalid API key {key}")}]}))
            }),
        ))
        .await;
        let endpoint = format!("{url}/graphql");
        secrets.insert(
            "argo-rollouts",
            "newrelic",
            [
                ("personal-api-key", "NRAK-OTHER"),
                ("account-id", "12345"),
                ("base-url-nerdgraph", endpoint.as_str()),
            ],
        );
        let p = providers_with(Default::default(), secrets);
        let measurement = p
            .measure(&ctx(), &metric(json!({"query": "healthy"}), "true", None))
            .await;
        assert_eq!(measurement.phase, Some(AnalysisPhase::Error));
        assert_eq!(
            measurement.message.as_deref(),
            Some("newRelic query failed: Invalid API key *****")
        );
    }
}
