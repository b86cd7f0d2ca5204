//! The services of the notifications engine beyond the five built into [`Sender`]
//! (webhook, Slack, Teams, email, Grafana): each is a module with a `parse` of its
//! `service.<type>` settings (the engine's field names) and a [`NotificationService`] that sends.
//! [`parse`] is the one table of them.
//!
//! [`Sender`]: super::Sender

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
        "awssqs" => boxed(super::awssqs::parse(settings)),
        "gcppubsub" => boxed(super::gcppubsub::parse(settings)),
        "nats" => boxed(super::nats::parse(settings)),
        "pushover" => boxed(super::pushover::parse(settings)),
        _ => return None,
    })
}

/// `T` from the settings, with serde's message stripped of the values it may quote.
pub(crate) fn settings<T: serde::de::DeserializeOwned>(settings: Value) -> Result<T, String> {
    serde_json::from_value(settings).map_err(|e| crate::config::redact(&e))
}
