//! InfluxDB: a Flux query (`POST <address>/api/v2/query?org=<org>`), answered in annotated CSV.
//!
//! As in Argo: the connection comes from the Secret `profile` (default `influxdb`) in the
//! controller's namespace, keys `address`, `authToken` and `org`, all three required. The
//! result is the list of every record's `_value`, over all tables, typed by the `#datatype`
//! annotation (`double` a float, `long` an integer, `boolean` a bool, ...); the value reads as
//! Go prints that list, `[0.99 0.98]`. No record is an Error (`no results returned from flux
//! query`), and so is a condition that cannot be evaluated, without a value. Like Argo, reading
//! stops at an error table in the answer, keeping the records read before it.

mod csv;

use std::time::Duration;

use expr::Value;
use serde_json::json;
use sluice_api::analysis::{InfluxdbMetric, MetricProvider, ProviderKind};

use super::ProviderError;
use super::http::{join_url, read_body, request_error};
use super::outcome::Outcome;
use super::provider::{Env, Provider};
use crate::expression::evaluate_metric;
use crate::redact::Redactor;

/// Default Secret name and its keys.
const INFLUXDB_SECRET: &str = "influxdb";
const AUTH_TOKEN: &str = "authToken";
const ORG: &str = "org";
const ADDRESS: &str = "address";
const TIMEOUT: Duration = Duration::from_secs(30);

/// The InfluxDB provider (`provider.influxdb`).
pub(crate) struct Influxdb;

/// A Flux query and the profile Secret to send it with.
pub(crate) struct Query<'a> {
    profile: &'a str,
    flux: &'a str,
}

impl Provider for Influxdb {
    const KIND: ProviderKind = ProviderKind::Influxdb;
    type Config = InfluxdbMetric;
    type Query<'a> = Query<'a>;

    fn config(provider: &MetricProvider) -> Option<&InfluxdbMetric> {
        provider.influxdb.as_ref()
    }

    fn parse<'a>(_env: Env<'a>, influx: &'a InfluxdbMetric) -> Result<Query<'a>, ProviderError> {
        Ok(Query {
            profile: influx
                .profile
                .as_deref()
                .filter(|p| !p.is_empty())
                .unwrap_or(INFLUXDB_SECRET),
            flux: influx.query.as_deref().unwrap_or_default(),
        })
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Query<'a>,
        redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        let connection = connection(env, query.profile).await?;
        redactor.add(&connection.token);
        let response = env
            .providers
            .http(false)
            .post(join_url(&connection.address, "/api/v2/query"))
            .query(&[("org", connection.org.as_str())])
            .header("Authorization", format!("Token {}", connection.token))
            .header("Accept", "text/csv")
            .json(&json!({
                "query": query.flux,
                "type": "flux",
                "dialect": {
                    "header": true,
                    "delimiter": ",",
                    "annotations": ["datatype", "group", "default"],
                },
            }))
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| request_error(&e, TIMEOUT))?;
        let status = response.status();
        let body = read_body(response).await?;
        if !status.is_success() {
            return Err(http_error(status.as_u16(), &body));
        }
        let values = csv::record_values(&String::from_utf8_lossy(&body));
        if values.is_empty() {
            return Err(ProviderError::new("no results returned from flux query"));
        }
        let shown: Vec<String> = values.iter().map(csv::go_print).collect();
        let result = Value::Array(values);
        // Unlike most providers, Argo records no value when the conditions fail to evaluate.
        let phase = evaluate_metric(env.metric, &result).map_err(|e| ProviderError(e.0))?;
        Ok(Outcome {
            phase: Some(phase),
            value: Some(format!("[{}]", shown.join(" "))),
            ..Default::default()
        })
    }
}

/// Where and as whom to query.
struct Connection {
    address: String,
    token: String,
    org: String,
}

async fn connection(env: Env<'_>, profile: &str) -> Result<Connection, ProviderError> {
    let namespace = &env.providers.settings().controller_namespace;
    let data = env
        .providers
        .secrets()
        .get(namespace, profile)
        .await
        .map_err(|e| ProviderError(e.0))?
        .ok_or_else(|| ProviderError(format!("secrets \"{profile}\" not found")))?;
    let key = |k: &str| data.get(k).filter(|v| !v.is_empty()).cloned();
    match (key(AUTH_TOKEN), key(ORG), key(ADDRESS)) {
        (Some(token), Some(org), Some(address)) => Ok(Connection {
            address,
            token,
            org,
        }),
        _ => Err(ProviderError::new("authToken, org, or address not found")),
    }
}

/// An error answer as InfluxDB's Go client reports it: `<code>: <message>` from the JSON body,
/// else the status.
fn http_error(status: u16, body: &[u8]) -> ProviderError {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|p| p.get(name))
            .and_then(|v| v.as_str())
            .filter(|v| !v.is_empty())
    };
    match (field("code"), field("message")) {
        (Some(code), Some(message)) => ProviderError(format!("{code}: {message}")),
        _ => ProviderError(format!("Unexpected status code {status}")),
    }
}

#[cfg(test)]
mod tests;
