//! Taking over the notifications a leader before this one (or this process before a restart)
//! recorded as pending and did not send.

use std::collections::BTreeSet;
use std::time::Instant;

use kube::{Api, ResourceExt as _};
use serde_json::Value as Json;
use sluice_api::Rollout;
use sluice_notifications::Config;
use sluice_notifications::NotifiedState;
use sluice_notifications::due::{Subject, due_in_all};
use tracing::{debug, info};

use super::annotations::{as_at_event, pending_of, pending_value, update_annotations};
use super::{Job, Loop, PENDING};

impl Loop {
    /// Queues the pending notifications of every cached Rollout that this process has not
    /// queued (left by a leader before it, or by this process before a restart), decided again
    /// from the Rollout with the status it had at the event; entries no longer due are taken off.
    pub(super) async fn recover(&mut self) {
        if !self.gate.is_open() || self.synced != (true, true) {
            return;
        }
        for ro in self.rollouts.state() {
            let pending = pending_of(&ro);
            let stale: Vec<&String> = pending
                .keys()
                .filter(|k| !self.queued.contains(*k))
                .collect();
            if stale.is_empty() {
                continue;
            }
            let Ok(rollout) = serde_json::to_value(&*ro) else {
                continue;
            };
            let notified = NotifiedState::of(ro.annotations());
            let configs = self.configs_for(&ro.namespace().unwrap_or_default());
            let configs: Vec<&Config> = configs.iter().map(AsRef::as_ref).collect();
            let mut found = BTreeSet::new();
            for key in &stale {
                let entry = &pending[*key];
                let text = |k: &str| {
                    entry
                        .get(k)
                        .and_then(Json::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let (reason, occurrence) = (text("reason"), text("occurrence"));
                let type_ = if text("type") == "Warning" {
                    "Warning"
                } else {
                    "Normal"
                };
                let at_event = as_at_event(&rollout, entry);
                let subject = Subject {
                    rollout: &at_event,
                    analysis_runs: &Json::Null,
                };
                let (due, _) = due_in_all(&configs, subject, &reason, &occurrence, &notified);
                for (config_namespace, notification) in due {
                    if notification.key != **key || !self.queued.insert(notification.key.clone()) {
                        continue;
                    }
                    found.insert(notification.key.clone());
                    info!(rollout = %ro.name_any(), namespace = ro.namespace().unwrap_or_default(), trigger = %notification.trigger, "pending notification taken over");
                    self.queue.push_back(Job {
                        namespace: ro.namespace().unwrap_or_default(),
                        name: ro.name_any(),
                        type_,
                        reason: reason.clone(),
                        notification,
                        attempts: 0,
                        not_before: Instant::now(),
                        sent: None,
                        config_namespace,
                    });
                }
            }
            let gone: Vec<String> = stale
                .into_iter()
                .filter(|k| !found.contains(*k))
                .cloned()
                .collect();
            if !gone.is_empty() {
                let api: Api<Rollout> =
                    Api::namespaced(self.client.clone(), &ro.namespace().unwrap_or_default());
                let result = update_annotations(&api, &ro.name_any(), |ro| {
                    let mut pending = pending_of(ro);
                    let before = pending.len();
                    pending.retain(|k, _| !gone.contains(k));
                    (pending.len() != before)
                        .then(|| vec![(PENDING.to_owned(), pending_value(&pending))])
                })
                .await;
                if let Err(e) = result {
                    debug!(error = %e, "updating pending notifications");
                }
            }
        }
    }
}
