//! The checks of notifications: what the recording service delivered, against the events the
//! leaders' reconciles published and what the notifiers committed on the Rollout.
//!
//! - [`AT_MOST_ONCE`]: each notification (Rollout, trigger, occurrence or `oncePer` value,
//!   destination: the engine's key) is delivered at most once. The one exemption is the window
//!   no sender can close: a process that delivered it and stopped (crashed, or its leader term
//!   ended) before its record on the Rollout was committed; the next leader delivers it again.
//!   Those repeats are counted, not forgiven otherwise: a repeat of a notification already in
//!   the Rollout's record when it was sent, or one whose first sender still leads, is a
//!   violation.
//! - [`AT_LEAST_ONCE`]: at the end (after the calm, when no fault comes any more), every
//!   notification the configuration makes due for an event a leader's reconcile published was
//!   delivered at least once. Exempt, and counted: an event whose publisher stopped before
//!   anything of it was written to the Rollout's pending record (nothing is left for the next
//!   leader to find).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sluice_notifications::due::{Subject, due_in_all, occurrence};
use sluice_notifications::state::NOTIFIED;
use sluice_notifications::{Config, NotifiedState};

use super::Violation;
use crate::notifications::{Delivery, Life};

pub const AT_MOST_ONCE: &str = "notified-at-most-once";
pub const AT_LEAST_ONCE: &str = "notified-at-least-once-after-calm";

const PENDING: &str = sluice_controller::loops::notification_driver::PENDING;

/// One event a leader's reconcile published.
#[derive(Debug, Clone)]
struct Published {
    at_ms: u64,
    /// The simulated wall-clock time of `at_ms` (`time.Now()` for conditions and templates).
    at: jiff::Timestamp,
    /// The publishing process's term (none: it no longer led when the reconcile finished).
    life: Option<Life>,
    rollout: Value,
    reason: String,
    message: String,
}

#[derive(Debug, Default)]
pub struct NotificationChecks {
    /// Deliveries by (Rollout, key).
    delivered: BTreeMap<(String, String), Vec<Delivery>>,
    /// Who committed each record.
    recorded_by: BTreeMap<(String, String), Life>,
    /// Keys that were in a Rollout's pending record at some point.
    pending: BTreeSet<(String, String)>,
    published: Vec<Published>,
    /// Repeats in the send-to-record window, exempt from [`AT_MOST_ONCE`].
    pub window_repeats: u64,
    /// Notifications of events whose publisher stopped before writing them as pending,
    /// exempt from [`AT_LEAST_ONCE`].
    pub lost_unwritten: u64,
    /// What was exempted, for the trace.
    pub notes: Vec<String>,
}

fn keys_of(annotations: Option<&Value>, key: &str) -> BTreeSet<String> {
    let value = annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    let parsed: BTreeMap<String, Value> = value
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    parsed.into_keys().collect()
}

impl NotificationChecks {
    pub fn published(
        &mut self,
        at_ms: u64,
        at: jiff::Timestamp,
        life: Option<Life>,
        rollout: Value,
        reason: &str,
        message: &str,
    ) {
        self.published.push(Published {
            at_ms,
            at,
            life,
            rollout,
            reason: reason.to_string(),
            message: message.to_string(),
        });
    }

    /// A notifier's write of Rollout `name` committed: `before` and `after` are its annotations.
    pub fn on_write(
        &mut self,
        name: &str,
        life: Life,
        before: Option<&Value>,
        after: Option<&Value>,
    ) {
        let was = keys_of(before, NOTIFIED);
        for key in keys_of(after, NOTIFIED).difference(&was) {
            self.recorded_by
                .insert((name.to_string(), key.clone()), life);
        }
        for key in keys_of(after, PENDING) {
            self.pending.insert((name.to_string(), key));
        }
    }

    /// The service delivered `d`; `recorded` is whether the Rollout's record held it then,
    /// `ended` whether a process's term is over by now.
    pub fn on_delivery(
        &mut self,
        d: Delivery,
        recorded: bool,
        ended: impl Fn(Life) -> bool,
    ) -> Option<Violation> {
        let id = (d.rollout.clone(), d.key.clone());
        let earlier = self.delivered.get(&id).and_then(|v| v.last()).cloned();
        let at_ms = d.at_ms;
        let detail = |why: &str, first: &Delivery| {
            format!(
                "{} to {} of rollout/{} ({}) delivered again by {} at {} ms, first by {} at {} ms: {why}",
                d.trigger, d.recipient, d.rollout, d.key, d.life, d.at_ms, first.life, first.at_ms
            )
        };
        self.delivered
            .entry(id.clone())
            .or_default()
            .push(d.clone());
        let first = earlier?;
        let violation = |why: &str| {
            Some(Violation {
                at_ms,
                invariant: AT_MOST_ONCE,
                detail: detail(why, &first),
            })
        };
        if recorded {
            return violation("it was in the Rollout's record when sent");
        }
        if !ended(first.life) {
            return violation("its first sender still leads");
        }
        if self.recorded_by.get(&id) == Some(&first.life) {
            return violation("its first sender had recorded it");
        }
        self.window_repeats += 1;
        self.notes.push(detail(
            "exempt: its first sender stopped before recording it",
            &first,
        ));
        None
    }

    /// At the end: every notification due for a published event was delivered.
    pub fn at_end(
        &mut self,
        config: &Config,
        now_ms: u64,
        ended: impl Fn(Life) -> bool,
    ) -> Vec<Violation> {
        let mut violations = Vec::new();
        let mut judged = BTreeSet::new();
        for p in &self.published {
            let subject = Subject {
                rollout: &p.rollout,
                analysis_runs: &Value::Null,
                now: p.at,
            };
            let occurrence = occurrence(&p.rollout, &p.message);
            let (due, _) = due_in_all(
                &[config],
                subject,
                &p.reason,
                &occurrence,
                &NotifiedState::default(),
            );
            let name = p
                .rollout
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            for (_, n) in due {
                let id = (name.clone(), n.key.clone());
                if self.delivered.contains_key(&id) || !judged.insert(id.clone()) {
                    continue;
                }
                let stopped = p.life.is_none_or(&ended);
                if !self.pending.contains(&id) && stopped {
                    self.lost_unwritten += 1;
                    let by = p
                        .life
                        .map_or("a replica no longer leading".into(), |l| l.to_string());
                    self.notes.push(format!(
                        "{} to {} of rollout/{name} ({}), due for {} at {} ms, never delivered: exempt: its publisher {by} stopped before recording it as pending",
                        n.trigger, n.destination.recipient, n.key, p.reason, p.at_ms
                    ));
                    continue;
                }
                let why = if self.pending.contains(&id) {
                    "it was pending on the Rollout and no leader sent it"
                } else {
                    "its publisher still leads and never sent it"
                };
                violations.push(Violation {
                    at_ms: now_ms,
                    invariant: AT_LEAST_ONCE,
                    detail: format!(
                        "{} to {} of rollout/{name} ({}), due for {} at {} ms, never delivered: {why}",
                        n.trigger, n.destination.recipient, n.key, p.reason, p.at_ms
                    ),
                });
            }
        }
        violations
    }

    /// How many notifications were delivered, repeats included.
    pub fn deliveries(&self) -> u64 {
        self.delivered.values().map(|v| v.len() as u64).sum()
    }
}
