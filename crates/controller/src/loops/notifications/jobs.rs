//! Working the queue: each notification is sent, then recorded on its Rollout, before the
//! next of the same Rollout and trigger; failures are retried with back-off.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt as _};
use serde_json::json;
use sluice_api::Rollout;
use sluice_notifications::NotifiedState;
use sluice_notifications::services::{SLACK_THREADS, Sender, slack_threads};
use sluice_notifications::state::NOTIFIED;
use tracing::{debug, info, warn};

use super::annotations::{pending_of, pending_value, update_annotations};
use super::{FIRST_RETRY, Job, Loop, MAX_ATTEMPTS, MAX_RETRY, PENDING};

impl Loop {
    /// How long until a job may be worked on.
    pub(super) fn next_ready_in(&self) -> Duration {
        let now = Instant::now();
        self.queue
            .iter()
            .map(|j| j.not_before.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_secs(3600))
    }

    /// Works on the first ready job of each Rollout and trigger (a later one waits for the
    /// earlier to be recorded).
    pub(super) async fn work(&mut self) {
        if !self.gate.is_open() {
            return;
        }
        let now = Instant::now();
        let mut blocked: HashSet<(String, String, String)> = HashSet::new();
        let mut i = 0;
        while i < self.queue.len() {
            let lane = {
                let (a, b, c) = self.queue[i].lane();
                (a.to_owned(), b.to_owned(), c.to_owned())
            };
            if blocked.contains(&lane) || self.queue[i].not_before > now {
                blocked.insert(lane);
                i += 1;
                continue;
            }
            let mut job = self.queue.remove(i).expect("in range");
            let done = self.step(&mut job).await;
            if done {
                self.queued.remove(&job.notification.key);
            } else {
                blocked.insert(lane);
                self.queue.insert(i, job);
                i += 1;
            }
        }
    }

    /// Sends or records one job; true once it is finished with (recorded, already sent, or
    /// given up).
    async fn step(&mut self, job: &mut Job) -> bool {
        let api: Api<Rollout> = Api::namespaced(self.client.clone(), &job.namespace);
        let key = job.notification.key.clone();
        let Some(thread) = job.sent.clone() else {
            // Not sent yet: read the Rollout afresh; a recorded notification is never sent again.
            let ro = match api.get_opt(&job.name).await {
                Ok(Some(ro)) => ro,
                Ok(None) => return true,
                Err(e) => {
                    debug!(error = %e, "reading the Rollout before a notification");
                    self.retry_later(job);
                    return false;
                }
            };
            if NotifiedState::of(ro.annotations()).contains(&key) {
                self.forget_pending(&api, job).await;
                return true;
            }
            let sender = match &self.sender {
                Some(s) => s.clone(),
                None => match Sender::new() {
                    Ok(s) => {
                        self.sender = Some(s.clone());
                        s
                    }
                    Err(e) => {
                        warn!("notifications cannot be sent: {e}");
                        return true;
                    }
                },
            };
            let threads = slack_threads(ro.annotations());
            let started = Instant::now();
            let config = self.config_of(job.config_namespace.as_deref());
            let result = sender.send(&config, &job.notification, &threads).await;
            if let Some(m) = &self.metrics {
                m.observe_notification_send(&job.namespace, &job.name, started.elapsed());
            }
            let dest = &job.notification.destination;
            match result {
                Ok(sent) => {
                    self.count(job, true);
                    info!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, recipient = %dest.recipient, "notification sent");
                    job.sent = Some(sent.slack_thread);
                    job.attempts = 0;
                }
                Err(e) => {
                    self.count(job, false);
                    job.attempts += 1;
                    if job.attempts >= MAX_ATTEMPTS {
                        warn!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, attempts = job.attempts, "notification failed, giving up: {e}");
                        self.forget_pending(&api, job).await;
                        return true;
                    }
                    warn!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, attempt = job.attempts, "notification failed, will retry: {e}");
                    self.retry_later(job);
                    return false;
                }
            }
            return self.record(&api, job, job.sent.clone().flatten()).await;
        };
        self.record(&api, job, thread).await
    }

    /// Records a sent notification on its Rollout; false to try again later.
    async fn record(
        &self,
        api: &Api<Rollout>,
        job: &mut Job,
        thread: Option<(String, String, String)>,
    ) -> bool {
        for _ in 0..5 {
            let ro = match api.get_opt(&job.name).await {
                Ok(Some(ro)) => ro,
                Ok(None) => return true,
                Err(e) => {
                    debug!(error = %e, "reading the Rollout to record a notification");
                    break;
                }
            };
            let mut state = NotifiedState::of(ro.annotations());
            state.record(&job.notification.key, Timestamp::now().as_second());
            let mut annotations = serde_json::Map::new();
            annotations.insert(NOTIFIED.into(), json!(state.to_annotation()));
            let mut pending = pending_of(&ro);
            if pending.remove(&job.notification.key).is_some() {
                annotations.insert(PENDING.into(), json!(pending_value(&pending)));
            }
            if let Some((id, group, ts)) = &thread {
                let mut threads = slack_threads(ro.annotations());
                threads
                    .entry(id.clone())
                    .or_default()
                    .insert(group.clone(), ts.clone());
                annotations.insert(
                    SLACK_THREADS.into(),
                    json!(serde_json::to_string(&threads).unwrap_or_default()),
                );
            }
            let patch = json!({"metadata": {
                "resourceVersion": ro.resource_version(),
                "annotations": annotations,
            }});
            match api
                .patch(&job.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return true,
                Err(kube::Error::Api(s)) if s.is_conflict() => continue,
                Err(kube::Error::Api(s)) if s.is_not_found() => return true,
                Err(e) => {
                    debug!(error = %e, "recording a notification");
                    break;
                }
            }
        }
        job.attempts += 1;
        self.retry_later(job);
        false
    }

    /// Takes a notification off the Rollout's pending record (best effort).
    async fn forget_pending(&self, api: &Api<Rollout>, job: &Job) {
        let key = job.notification.key.clone();
        let result = update_annotations(api, &job.name, |ro| {
            let mut pending = pending_of(ro);
            pending.remove(&key)?;
            Some(vec![(PENDING.to_owned(), pending_value(&pending))])
        })
        .await;
        if let Err(e) = result {
            debug!(error = %e, "updating pending notifications");
        }
    }

    fn retry_later(&self, job: &mut Job) {
        let exp = job.attempts.saturating_sub(1).min(16);
        let delay = FIRST_RETRY.saturating_mul(1 << exp).min(MAX_RETRY);
        job.not_before = Instant::now() + delay;
    }

    fn count(&self, job: &Job, ok: bool) {
        if let Some(m) = &self.metrics {
            m.count_notification(&job.namespace, &job.name, job.type_, &job.reason, ok);
        }
    }
}
