//! Plugin: a metric provider plugin of Argo's (`metrics[].provider.plugin["<org>/<name>"]`),
//! run through the plugin host (`sluice-plugins`), which the controller sets up from the
//! `metricProviderPlugins` of `argo-rollouts-config`.
//!
//! The plugin is passed the AnalysisRun and the metric as Argo passes them and answers with the
//! whole measurement, judged by itself; a measurement it leaves Running is resumed at the next
//! reconcile and terminated with the run. A plugin that is not configured, not installed or
//! not running makes the measurement an Error saying why (Argo's "unable to start plugin
//! system: ..."); a call that fails is Argo's "<Method> rpc call error: ...".

use serde_json::{Value, json};
use sluice_api::analysis::{Measurement, Metric, MetricProvider, ProviderKind};
use sluice_plugins::{PluginError, PluginKind};

use super::ProviderError;
use super::outcome::{Outcome, mark_error};
use super::provider::{Env, Provider};
use crate::redact::Redactor;

pub(crate) struct Plugin;

/// The plugin a metric names (validation lets a metric name exactly one).
pub(crate) struct Named<'a> {
    name: &'a str,
}

type PluginConfig = std::collections::BTreeMap<String, Value>;

impl Provider for Plugin {
    const KIND: ProviderKind = ProviderKind::Plugin;
    type Config = PluginConfig;
    type Query<'a> = Named<'a>;

    fn config(provider: &MetricProvider) -> Option<&Self::Config> {
        provider.plugin.as_ref()
    }

    fn parse<'a>(_env: Env<'a>, config: &'a Self::Config) -> Result<Named<'a>, ProviderError> {
        config
            .keys()
            .next()
            .map(|name| Named { name })
            .ok_or_else(|| ProviderError::new("unable to start plugin system: no plugin found"))
    }

    async fn measure<'a>(
        env: Env<'a>,
        query: Named<'a>,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        let answer = call(env, query.name, "Run", json!({})).await?;
        let measurement: Measurement = serde_json::from_value(answer).map_err(|e| {
            ProviderError(format!("Run rpc call error: unreadable measurement: {e}"))
        })?;
        Ok(Outcome {
            phase: measurement.phase,
            value: measurement.value,
            message: measurement.message,
            metadata: measurement.metadata.unwrap_or_default(),
            resume_at: measurement.resume_at,
        })
    }

    async fn resume<'a>(env: Env<'a>, measurement: Measurement) -> Measurement {
        follow_up(env, "Resume", measurement).await
    }

    async fn terminate<'a>(env: Env<'a>, measurement: Measurement) -> Measurement {
        follow_up(env, "Terminate", measurement).await
    }

    async fn garbage_collect<'a>(env: Env<'a>, keep: usize) -> Result<(), ProviderError> {
        let Some(name) = plugin_name(env.metric) else {
            return Ok(());
        };
        let answer = call(env, name, "GarbageCollect", json!({"limit": keep})).await?;
        match answer.get("error").and_then(Value::as_str) {
            Some(err) if !err.is_empty() => Err(ProviderError(err.to_string())),
            _ => Ok(()),
        }
    }
}

fn plugin_name(metric: &Metric) -> Option<&str> {
    metric
        .provider
        .as_ref()?
        .plugin
        .as_ref()?
        .keys()
        .next()
        .map(String::as_str)
}

/// Resume or Terminate: the plugin's measurement, or this one marked as an Error.
async fn follow_up(env: Env<'_>, method: &str, measurement: Measurement) -> Measurement {
    let Some(name) = plugin_name(env.metric) else {
        return measurement;
    };
    let args = json!({"measurement": measurement});
    match call(env, name, method, args).await {
        Ok(answer) => serde_json::from_value(answer).unwrap_or_else(|e| {
            mark_error(
                measurement,
                format!("{method} rpc call error: unreadable measurement: {e}"),
            )
        }),
        Err(err) => mark_error(measurement, err.0),
    }
}

/// Calls the plugin with the run and the metric added to `args`.
async fn call(
    env: Env<'_>,
    name: &str,
    method: &str,
    mut args: Value,
) -> Result<Value, ProviderError> {
    let host = env.providers.plugins().ok_or_else(|| {
        ProviderError(format!(
            "unable to start plugin system: unable to find plugin ({name}): plugin {name} not configured in configmap"
        ))
    })?;
    let run = match &env.run.object {
        Some(run) => (**run).clone(),
        None => json!({"metadata": {
            "name": env.run.name, "namespace": env.run.namespace, "uid": env.run.uid,
        }}),
    };
    args["analysisRun"] = run;
    args["metric"] = serde_json::to_value(env.metric).unwrap_or(Value::Null);
    host.call(PluginKind::MetricProvider, name, method, args)
        .await
        .map_err(|err| match err {
            PluginError::NotRunning(e) if e.ends_with("not configured in configmap") => {
                ProviderError(format!(
                    "unable to start plugin system: unable to find plugin ({name}): {e}"
                ))
            }
            PluginError::NotRunning(e) => {
                ProviderError(format!("unable to start plugin system: {e}"))
            }
            PluginError::Call(e) => ProviderError(e),
        })
}

#[cfg(test)]
mod tests;
