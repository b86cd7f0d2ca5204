//! A step plugin for the simulation: it answers at once with the phase its step's `config`
//! names (`{"return": "Running"|"Successful"|"Failed"|"Error"}`, Successful by default), as
//! Argo's own end-to-end step plugin does, after answering Running to the first `runningFor`
//! calls; it keeps a count of its calls as its status. The controller's driver calls it
//! exactly as it calls Argo's plugins through the plugin host.

use sluice_api::Rollout;
use sluice_api::rollout::StepPluginPhase;
use sluice_controller::loops::driver::StepPlugins;
use sluice_engine::{StepPluginAnswer, StepPluginCall};

/// See the module's documentation.
pub struct SimStepPlugin;

impl StepPlugins for SimStepPlugin {
    async fn call(&self, _rollout: &Rollout, call: &StepPluginCall) -> StepPluginAnswer {
        let count = call
            .status
            .as_ref()
            .and_then(|s| s.get("count"))
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0)
            + 1;
        let running_for = call
            .config
            .get("runningFor")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0);
        let answer = if count <= running_for {
            Some("Running")
        } else {
            call.config.get("return").and_then(|r| r.as_str())
        };
        let phase = match answer {
            Some("Running") => StepPluginPhase::Running,
            Some("Failed") => StepPluginPhase::Failed,
            Some("Error") => StepPluginPhase::Error,
            _ => StepPluginPhase::Successful,
        };
        StepPluginAnswer {
            call: call.clone(),
            phase,
            message: String::new(),
            requeue_after: None,
            status: Some(serde_json::json!({"count": count})),
            disabled: false,
        }
    }
}
