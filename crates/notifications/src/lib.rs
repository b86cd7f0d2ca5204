//! Notifications as Argo Rollouts sends them (the argoproj notifications engine's configuration
//! and bookkeeping), decided purely.
//!
//! - [`config`]: the `argo-rollouts-notification-configmap` ConfigMap (triggers, templates,
//!   services, `defaultTriggers`, `subscriptions`) and the `argo-rollouts-notification-secret`
//!   Secret (`$key` references in service settings). A bad entry is a [`config::Problem`]; every
//!   other entry still works.
//! - [`subscriptions`]: who is subscribed to a trigger, from the Rollout's
//!   `notifications.argoproj.io/subscribe.<trigger>.<service>` annotations and the ConfigMap's
//!   global subscriptions.
//! - [`state`]: the `notified.notifications.argoproj.io` annotation, as the engine records it.
//! - [`template`]: Go `text/template` rendering (the `gtmpl` crate) with the helpers Argo's
//!   catalog and documentation call.
//! - [`when`]: trigger conditions (`when`, `oncePer`), expr-lang expressions over the Rollout.
//! - [`go_time`]: Go's times, layouts and durations for both, at the time the caller decides at.
//! - [`due`]: which notifications an event of a Rollout makes due, never one already recorded.
//! - [`services`]: the senders (webhook, Slack, Teams, email, Grafana, and through
//!   [`more_services`] the engine's other service types: Teams Workflows, Google Chat, Webex,
//!   Telegram, Alertmanager, Opsgenie, PagerDuty v1 and v2, Pushover, GitHub, Mattermost,
//!   Rocket.Chat, New Relic); the only part that performs I/O.

pub mod catalog;
pub mod config;
pub mod due;
pub mod go_time;
pub mod more_services;
pub mod services;
pub mod state;
pub mod subscriptions;
pub mod template;
pub mod when;

#[cfg(test)]
mod test_support;

pub use config::{Config, Problem};
pub use due::{Due, Notification, due};
pub use state::NotifiedState;

/// The ConfigMap Argo Rollouts reads its notifications configuration from.
pub const CONFIG_MAP: &str = "argo-rollouts-notification-configmap";
/// The Secret the configuration's `$key` references are read from.
pub const SECRET: &str = "argo-rollouts-notification-secret";

/// The trigger an event reason fires, as Argo names it: `RolloutStepCompleted` fires
/// `on-rollout-step-completed`.
pub fn trigger_of_reason(reason: &str) -> String {
    let chars: Vec<char> = reason.chars().collect();
    let mut out = String::from("on-");
    for (i, c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            // Go's two regexps: `(.)([A-Z][a-z]+)` then `([a-z0-9])([A-Z])`.
            if prev.is_lowercase() || prev.is_ascii_digit() || (next_lower && prev != '-') {
                out.push('-');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::trigger_of_reason;

    #[test]
    fn event_reasons_name_argos_triggers() {
        for (reason, trigger) in [
            ("RolloutCompleted", "on-rollout-completed"),
            ("RolloutStepCompleted", "on-rollout-step-completed"),
            ("RolloutPaused", "on-rollout-paused"),
            ("RolloutAborted", "on-rollout-aborted"),
            ("RolloutUpdated", "on-rollout-updated"),
            ("AnalysisRunRunning", "on-analysis-run-running"),
            ("AnalysisRunFailed", "on-analysis-run-failed"),
            ("AnalysisRunError", "on-analysis-run-error"),
            ("ScalingReplicaSet", "on-scaling-replica-set"),
            ("SwitchService", "on-switch-service"),
        ] {
            assert_eq!(trigger_of_reason(reason), trigger, "{reason}");
        }
    }
}
