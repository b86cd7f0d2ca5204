//! The services of the notifications engine beyond the five built into [`Sender`]
//! (webhook, Slack, Teams, email, Grafana): each is a module with a `parse` of its
//! `service.<type>` settings (the engine's field names) and a [`NotificationService`] that sends.
//! [`parse`] is the one table of them.
//!
//! [`Sender`]: crate::more_services::Sender

use std::sync::Arc;

use serde_json::Value;

use super::NotificationService;

/// Parses the settings of a service of `type_`, if the type is one of this table's: the
/// service, or why the settings cannot be used (never quoting a value, which may come from the
/// Secret).
pub fn parse(type_: &str, settings: Value) -> Option<Result<Arc<dyn NotificationService>, String>> {
    fn boxed<S: NotificationService + 'static>(
        parsed: Result<S, String>,
    ) -> Result<Arc<dyn NotificationService>, String> {
        parsed.map(|s| Arc::new(s) as Arc<dyn NotificationService>)
    }
    Some(match type_ {
        "alertmanager" => boxed(super::alertmanager::parse(settings)),
        "awssqs" => boxed(super::awssqs::parse(settings)),
        "gcppubsub" => boxed(super::gcppubsub::parse(settings)),
        "github" => boxed(super::github::parse(settings)),
        "googlechat" => boxed(super::googlechat::parse(settings)),
        "mattermost" => boxed(super::mattermost::parse(settings)),
        "nats" => boxed(super::nats::parse(settings)),
        "newrelic" => boxed(super::newrelic::parse(settings)),
        "opsgenie" => boxed(super::opsgenie::parse(settings)),
        "pagerduty" => boxed(super::pagerduty::parse(settings)),
        "pagerdutyv2" => boxed(super::pagerdutyv2::parse(settings)),
        "pushover" => boxed(super::pushover::parse(settings)),
        "rocketchat" => boxed(super::rocketchat::parse(settings)),
        "teams-workflows" => boxed(super::teams_workflows::parse(settings)),
        "telegram" => boxed(super::telegram::parse(settings)),
        "webex" => boxed(super::webex::parse(settings)),
        _ => return None,
    })
}
