//! The calls of canary `plugin` steps, made through the plugin host: Argo's step plugins,
//! each behind its bridge (docs/plugins.md), with the host's deadline and restarts.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value as Json, json};
use sluice_api::Rollout;
use sluice_api::rollout::StepPluginPhase;
use sluice_engine::{StepPluginAnswer, StepPluginCall};
use sluice_plugins::{PluginHost, PluginKind};

use super::driver::StepPlugins;

/// Step plugins as `argo-rollouts-config` lists them.
pub struct HostStepPlugins<'a> {
    /// `None` before the ConfigMap has been read (or in a process that runs no plugins).
    pub host: Option<&'a PluginHost>,
    pub disabled: &'a BTreeSet<String>,
}

impl StepPlugins for HostStepPlugins<'_> {
    async fn call(&self, rollout: &Rollout, call: &StepPluginCall) -> StepPluginAnswer {
        if self.disabled.contains(&call.name) {
            return StepPluginAnswer {
                disabled: true,
                ..answer(call, StepPluginPhase::Successful, String::new(), None, None)
            };
        }
        let Some(host) = self.host else {
            let why = format!("plugin {} not configured in configmap", call.name);
            return answer(call, StepPluginPhase::Error, why, None, None);
        };
        let args = json!({
            "rollout": rollout,
            "pluginName": call.name,
            "config": call.config,
            "status": call.status,
        });
        let method = call.operation.as_str();
        match host.call(PluginKind::Step, &call.name, method, args).await {
            Ok(result) => from_result(call, &result),
            Err(e) => answer(call, StepPluginPhase::Error, e.to_string(), None, None),
        }
    }
}

/// The bridge's answer (`phase`, `message`, `requeueAfterNanos`, `status`, `error`): the
/// plugin's own error is an Error, as Argo records it.
fn from_result(call: &StepPluginCall, result: &Json) -> StepPluginAnswer {
    let text = |k: &str| result.get(k).and_then(Json::as_str).unwrap_or_default();
    let status = result.get("status").filter(|s| !s.is_null()).cloned();
    if !text("error").is_empty() {
        let why = format!(
            "{} rpc call error: {}",
            call.operation.as_str(),
            text("error")
        );
        return answer(call, StepPluginPhase::Error, why, None, status);
    }
    let requeue = result
        .get("requeueAfterNanos")
        .and_then(Json::as_u64)
        .filter(|n| *n > 0)
        .map(Duration::from_nanos);
    let phase = match text("phase") {
        "Running" => StepPluginPhase::Running,
        "Successful" => StepPluginPhase::Successful,
        "Failed" => StepPluginPhase::Failed,
        "Error" => StepPluginPhase::Error,
        other => {
            let why = format!("plugin {} answered an unknown phase {other:?}", call.name);
            return answer(call, StepPluginPhase::Error, why, None, status);
        }
    };
    answer(call, phase, text("message").to_owned(), requeue, status)
}

fn answer(
    call: &StepPluginCall,
    phase: StepPluginPhase,
    message: String,
    requeue_after: Option<Duration>,
    status: Option<Json>,
) -> StepPluginAnswer {
    StepPluginAnswer {
        call: call.clone(),
        phase,
        message,
        requeue_after,
        status,
        disabled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::rollout::StepPluginOperation;

    fn call() -> StepPluginCall {
        StepPluginCall {
            index: 1,
            name: "step/e2e-test".into(),
            operation: StepPluginOperation::Run,
            config: json!({"return": "Running"}),
            status: None,
        }
    }

    #[test]
    fn the_bridges_answers_are_read_as_argo_reads_them() {
        let a = from_result(
            &call(),
            &json!({"phase": "Running", "message": "", "requeueAfterNanos": 17_000_000_000_i64, "error": "", "status": {"Count": 1}}),
        );
        assert_eq!(a.phase, StepPluginPhase::Running);
        assert_eq!(a.requeue_after, Some(Duration::from_secs(17)));
        assert_eq!(a.status, Some(json!({"Count": 1})));
        let a = from_result(
            &call(),
            &json!({"phase": "", "requeueAfterNanos": 0, "error": "boom", "status": null}),
        );
        assert_eq!(
            (a.phase, a.message.as_str()),
            (StepPluginPhase::Error, "Run rpc call error: boom")
        );
        let a = from_result(&call(), &json!({"phase": "Sideways"}));
        assert_eq!(a.phase, StepPluginPhase::Error);
    }

    #[test]
    fn a_disabled_plugin_is_not_called_and_one_without_a_host_is_an_error() {
        let disabled: BTreeSet<String> = ["step/e2e-test".to_owned()].into();
        let rollout: Rollout =
            serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {}})).unwrap();
        let plugins = HostStepPlugins {
            host: None,
            disabled: &disabled,
        };
        let a = futures::executor::block_on(plugins.call(&rollout, &call()));
        assert!(a.disabled && a.phase == StepPluginPhase::Successful);
        let none = BTreeSet::new();
        let plugins = HostStepPlugins {
            host: None,
            disabled: &none,
        };
        let a = futures::executor::block_on(plugins.call(&rollout, &call()));
        assert_eq!(a.phase, StepPluginPhase::Error);
        assert_eq!(
            a.message,
            "plugin step/e2e-test not configured in configmap"
        );
    }
}
