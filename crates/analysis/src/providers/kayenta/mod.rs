//! Kayenta: a canary judgement run by a Kayenta server, polled until it completes.
//!
//! As in Argo: the canary config is looked up by name (`GET <address>/canaryConfig`), a judgement
//! started (`POST <address>/canary/<config id>` with the scopes and thresholds) and the
//! measurement left Running with its `canaryExecutionId`, resumed every 15 s
//! (`GET <address>/canary/<id>`) until `complete`; then the score
//! (`result.judgeResult.score.score`, truncated) is Successful from `threshold.pass`,
//! Inconclusive from `threshold.marginal`, Failed below. Any answer other than 200 is an Error,
//! `Invalid Response`. The success and failure conditions are not used.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Map, Value, json};
use sluice_api::analysis::{KayentaMetric, Measurement, MetricProvider, ProviderKind, ScopeDetail};
use sluice_api::common::AnalysisPhase;

use super::ProviderError;
use super::http::{read_body, request_error};
use super::outcome::{Outcome, mark_error, now};
use super::provider::{Env, Provider};
use crate::redact::Redactor;

/// Measurement metadata key holding the judgement's id.
const EXECUTION_ID: &str = "canaryExecutionId";
const RESUME_DELAY: Duration = Duration::from_secs(15);
const TIMEOUT: Duration = Duration::from_secs(15);

/// The Kayenta provider (`provider.kayenta`).
pub(crate) struct Kayenta;

impl Provider for Kayenta {
    const KIND: ProviderKind = ProviderKind::Kayenta;
    type Config = KayentaMetric;
    type Query<'a> = &'a KayentaMetric;

    fn config(provider: &MetricProvider) -> Option<&KayentaMetric> {
        provider.kayenta.as_ref()
    }

    /// Argo checks nothing before its first request.
    fn parse<'a>(
        _env: Env<'a>,
        kayenta: &'a KayentaMetric,
    ) -> Result<&'a KayentaMetric, ProviderError> {
        Ok(kayenta)
    }

    async fn measure<'a>(
        env: Env<'a>,
        kayenta: &'a KayentaMetric,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        let field = |f: &Option<String>| f.clone().unwrap_or_default();
        let address = field(&kayenta.address);
        let application = field(&kayenta.application);
        // Argo looks the config up under the storage account.
        let configs = get_json(
            env,
            &format!("{address}/canaryConfig"),
            &[
                ("application", application.as_str()),
                (
                    "configurationAccountName",
                    &field(&kayenta.storage_account_name),
                ),
            ],
        )
        .await?;
        let wanted = kayenta.canary_config_name.as_deref().unwrap_or_default();
        let config_id = configs
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(wanted))
            .and_then(|c| c.get("id").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        let response = env
            .providers
            .http(false)
            .post(format!("{address}/canary/{config_id}"))
            .query(&[
                ("application", application.as_str()),
                ("metricsAccountName", &field(&kayenta.metrics_account_name)),
                (
                    "configurationAccountName",
                    &field(&kayenta.configuration_account_name),
                ),
                ("storageAccountName", &field(&kayenta.storage_account_name)),
            ])
            .json(&payload(kayenta))
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| request_error(&e, TIMEOUT))?;
        let started = json_of(response).await?;
        // Go's `%v` of what is there: a missing id reads `<nil>`.
        let id = match started.get(EXECUTION_ID) {
            None | Some(Value::Null) => "<nil>".to_owned(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        if id.is_empty() {
            return Err(ProviderError::new("Invalid canaryExecutionId"));
        }
        let mut outcome = Outcome::running([(EXECUTION_ID.to_owned(), id)].into());
        outcome.resume_at = Some(resume_at());
        Ok(outcome)
    }

    async fn resume<'a>(env: Env<'a>, measurement: Measurement) -> Measurement {
        let kayenta = env
            .metric
            .provider
            .as_ref()
            .and_then(|p| p.kayenta.as_ref());
        let address = kayenta.and_then(|k| k.address.clone()).unwrap_or_default();
        let id = measurement
            .metadata
            .as_ref()
            .and_then(|m| m.get(EXECUTION_ID))
            .cloned()
            .unwrap_or_default();
        let judgement = match get_json(env, &format!("{address}/canary/{id}"), &[]).await {
            Ok(judgement) => judgement,
            Err(e) => return mark_error(measurement, e.0),
        };
        let mut measurement = measurement;
        match judgement.get("complete") {
            Some(Value::Bool(true)) => {}
            Some(Value::Bool(false)) => {
                measurement.phase = Some(AnalysisPhase::Running);
                measurement.resume_at = Some(resume_at());
                return measurement;
            }
            None => return mark_error(measurement, "Missing Complete Status"),
            Some(other) => {
                return mark_error(
                    measurement,
                    format!(".complete accessor error: {other} is not a bool"),
                );
            }
        }
        let Some(score) = judgement
            .pointer("/result/judgeResult/score/score")
            .and_then(Value::as_f64)
        else {
            return mark_error(measurement, "Missing Score");
        };
        let score = score as i64;
        let threshold = kayenta.and_then(|k| k.threshold.as_ref());
        let pass = threshold.and_then(|t| t.pass).unwrap_or_default();
        let marginal = threshold.and_then(|t| t.marginal).unwrap_or_default();
        measurement.value = Some(score.to_string());
        measurement.phase = Some(if score >= pass {
            AnalysisPhase::Successful
        } else if score >= marginal {
            AnalysisPhase::Inconclusive
        } else {
            AnalysisPhase::Failed
        });
        measurement.finished_at = Some(now());
        measurement
    }
}

/// The judgement request: each scope's control and experiment with every field, as Go writes
/// them, and the thresholds.
fn payload(kayenta: &KayentaMetric) -> Value {
    let scope = |detail: Option<&ScopeDetail>| {
        let d = detail.cloned().unwrap_or_default();
        json!({
            "scope": d.scope.unwrap_or_default(),
            "region": d.region.unwrap_or_default(),
            "step": d.step.unwrap_or_default(),
            "start": d.start.unwrap_or_default(),
            "end": d.end.unwrap_or_default(),
        })
    };
    let mut scopes = Map::new();
    for s in kayenta.scopes.iter().flatten() {
        scopes.insert(
            s.name.clone().unwrap_or_default(),
            json!({
                "controlScope": scope(s.control_scope.as_ref()),
                "experimentScope": scope(s.experiment_scope.as_ref()),
            }),
        );
    }
    let threshold = kayenta.threshold.as_ref();
    json!({
        "scopes": scopes,
        "thresholds": {
            "pass": threshold.and_then(|t| t.pass).unwrap_or_default(),
            "marginal": threshold.and_then(|t| t.marginal).unwrap_or_default(),
        },
    })
}

async fn get_json(env: Env<'_>, url: &str, query: &[(&str, &str)]) -> Result<Value, ProviderError> {
    let response = env
        .providers
        .http(false)
        .get(url)
        .query(query)
        .timeout(TIMEOUT)
        .send()
        .await
        .map_err(|e| request_error(&e, TIMEOUT))?;
    json_of(response).await
}

/// A 200 answer's JSON; anything else is Argo's `Invalid Response`.
async fn json_of(response: reqwest::Response) -> Result<Value, ProviderError> {
    if response.status().as_u16() != 200 {
        return Err(ProviderError::new("Invalid Response"));
    }
    let body = read_body(response).await?;
    serde_json::from_slice(&body)
        .map_err(|e| ProviderError(format!("could not parse JSON body: {e}")))
}

fn resume_at() -> Time {
    let at = now().0 + jiff::SignedDuration::try_from(RESUME_DELAY).unwrap_or_default();
    Time(at)
}

#[cfg(test)]
mod tests;
