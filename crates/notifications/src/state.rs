//! The `notified.notifications.argoproj.io` annotation: which notifications were sent, as the
//! notifications engine records them, a JSON object from key to the Unix time of the send.
//!
//! A key is `[<oncePer>:]<trigger>:[<i>].<sha1(when)>:<service>:<recipient>`, the engine's;
//! a notification of a Rollout's own namespace configuration (self-service) has that namespace
//! before the trigger, as the engine keys it.
//! For a trigger fired by an event, the event's occurrence (revision, step, ...) stands where
//! `oncePer` stands, so that each occurrence is sent once and a second event of the same
//! occurrence (a restart, a repeated reconcile) sends nothing.

use std::collections::BTreeMap;

/// The annotation's key.
pub const NOTIFIED: &str = "notified.notifications.argoproj.io";
/// The most entries kept; the oldest go first, as in the engine.
pub const MAX_ENTRIES: usize = 100;

/// Sent notifications by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifiedState(pub BTreeMap<String, i64>);

impl NotifiedState {
    /// Reads the annotation's value; an unreadable one is an empty record, as in the engine.
    pub fn parse(value: Option<&str>) -> NotifiedState {
        value
            .and_then(|v| serde_json::from_str(v).ok())
            .map(NotifiedState)
            .unwrap_or_default()
    }

    /// Reads the record from a Rollout's annotations.
    pub fn of(annotations: &BTreeMap<String, String>) -> NotifiedState {
        Self::parse(annotations.get(NOTIFIED).map(String::as_str))
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Records `key` as sent at `unix_seconds`, dropping the oldest entries past the limit.
    pub fn record(&mut self, key: &str, unix_seconds: i64) {
        self.0.insert(key.to_owned(), unix_seconds);
        while self.0.len() > MAX_ENTRIES {
            let oldest = self
                .0
                .iter()
                .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) if k != key => {
                    self.0.remove(&k);
                }
                _ => break,
            }
        }
    }

    /// Forgets `key` (a condition that no longer holds may notify again when it holds again).
    pub fn forget(&mut self, key: &str) -> bool {
        self.0.remove(key).is_some()
    }

    /// The annotation's value (`None`: no entry, the annotation is removed).
    pub fn to_annotation(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| serde_json::to_string(&self.0).unwrap_or_default())
    }
}

/// The engine's key of one notification; `config_namespace` is the namespace of a
/// self-service configuration (none for the controller's).
pub fn key(
    once_per: Option<&str>,
    config_namespace: Option<&str>,
    trigger: &str,
    condition_key: &str,
    service: &str,
    recipient: &str,
) -> String {
    let key = match config_namespace {
        Some(ns) => format!("{ns}:{trigger}:{condition_key}:{service}:{recipient}"),
        None => format!("{trigger}:{condition_key}:{service}:{recipient}"),
    };
    match once_per.filter(|p| !p.is_empty()) {
        Some(p) => format!("{p}:{key}"),
        None => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_and_writes_the_engines_format() {
        let mut state = NotifiedState::parse(Some(
            r#"{"on-rollout-completed:[0].2jmj7l5rSw0yVb_vlWAYkK_YBwk:slack:chan":1700000000}"#,
        ));
        assert!(state.contains("on-rollout-completed:[0].2jmj7l5rSw0yVb_vlWAYkK_YBwk:slack:chan"));
        state.record("k2", 1700000001);
        assert_eq!(
            state.to_annotation().unwrap(),
            r#"{"k2":1700000001,"on-rollout-completed:[0].2jmj7l5rSw0yVb_vlWAYkK_YBwk:slack:chan":1700000000}"#
        );
        assert!(state.forget("k2"));
        assert!(!state.forget("k2"));
    }

    #[test]
    fn an_unreadable_record_is_empty_and_an_empty_record_removes_the_annotation() {
        let state = NotifiedState::parse(Some("not json"));
        assert_eq!(state, NotifiedState::default());
        assert_eq!(state.to_annotation(), None);
    }

    #[test]
    fn the_oldest_entries_go_past_the_limit() {
        let mut state = NotifiedState::default();
        for i in 0..(MAX_ENTRIES as i64 + 5) {
            state.record(&format!("k{i:03}"), 1000 + i);
        }
        assert_eq!(state.0.len(), MAX_ENTRIES);
        assert!(!state.contains("k000"));
        assert!(!state.contains("k004"));
        assert!(state.contains("k005"));
        assert!(state.contains("k104"));
    }

    #[test]
    fn keys_are_the_engines() {
        assert_eq!(
            key(None, None, "on-x", "[0].h", "slack", "chan"),
            "on-x:[0].h:slack:chan"
        );
        assert_eq!(
            key(Some("3"), None, "on-x", "[0].h", "slack", ""),
            "3:on-x:[0].h:slack:"
        );
        assert_eq!(
            key(Some(""), None, "on-x", "[0].h", "webhook", ""),
            "on-x:[0].h:webhook:"
        );
        assert_eq!(
            key(Some("3"), Some("team-a"), "on-x", "[0].h", "slack", "c"),
            "3:team-a:on-x:[0].h:slack:c"
        );
    }
}
