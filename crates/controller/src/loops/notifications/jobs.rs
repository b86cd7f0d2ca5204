//! Working the queue: each notification is sent, then recorded on its Rollout, before the
//! next of the same Rollout and trigger ([`driver::step`]); failures are retried with
//! back-off.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use sluice_notifications::services::{SendError, Sender, Sent, SlackThreads};
use sluice_notifications::{Config, Notification};
use tracing::{info, warn};

use super::Loop;
use crate::loops::notification_driver::{self as driver, Deliver, Job, Stepped};
use crate::serve::metrics::Metrics;

/// The HTTP sender, each send timed and counted into the metrics as it returns: a send made
/// is counted even when the process stops before its record on the Rollout is written.
struct Timed<'a> {
    sender: &'a Sender,
    metrics: Option<&'a Arc<Metrics>>,
    /// The event's type and reason, the labels of the counts.
    type_: &'static str,
    reason: String,
}

impl Deliver for Timed<'_> {
    async fn deliver(
        &self,
        namespace: &str,
        name: &str,
        cfg: &Config,
        n: &Notification,
        threads: &SlackThreads,
    ) -> Result<Sent, SendError> {
        let started = Instant::now();
        let result = self.sender.send(cfg, n, threads).await;
        if let Some(m) = self.metrics {
            m.observe_notification_send(namespace, name, started.elapsed());
            m.count_notification(namespace, name, self.type_, &self.reason, result.is_ok());
        }
        result
    }
}

impl Loop {
    /// How long until a job may be worked on.
    pub(super) fn next_ready_in(&self) -> Duration {
        let now = Instant::now();
        self.queue
            .iter()
            .map(|(_, at)| at.saturating_duration_since(now))
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
        while let Some(i) = driver::next_job(&self.queue, &blocked, |at| *at <= now) {
            let (mut job, _) = self.queue.remove(i);
            let stepped = self.step(&mut job).await;
            if stepped.done() {
                self.queued.remove(&job.notification.key);
            } else {
                let (a, b, c) = job.lane();
                blocked.insert((a.to_owned(), b.to_owned(), c.to_owned()));
                let at = Instant::now() + driver::retry_delay(job.attempts);
                self.queue.insert(i, (job, at));
            }
        }
    }

    /// One step of a job, logged and counted.
    async fn step(&mut self, job: &mut Job) -> Stepped {
        let sender = match &self.sender {
            Some(s) => s.clone(),
            None => match Sender::new() {
                Ok(s) => {
                    self.sender = Some(s.clone());
                    s
                }
                Err(e) => {
                    warn!("notifications cannot be sent: {e}");
                    return Stepped::Gone;
                }
            },
        };
        let deliver = Timed {
            sender: &sender,
            metrics: self.metrics.as_ref(),
            type_: job.type_,
            reason: job.reason.clone(),
        };
        let config = self.config_of(job.config_namespace.as_deref());
        let now = Timestamp::now().as_second();
        let stepped = driver::step(&self.cluster, &deliver, &config, job, now).await;
        let dest = &job.notification.destination;
        if stepped.sent_now() {
            info!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, recipient = %dest.recipient, "notification sent");
        }
        match &stepped {
            Stepped::SendFailed { error, given_up } => {
                if *given_up {
                    warn!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, attempts = job.attempts, "notification failed, giving up: {error}");
                } else {
                    warn!(rollout = %job.name, namespace = %job.namespace, trigger = %job.notification.trigger, service = %dest.service, attempt = job.attempts, "notification failed, will retry: {error}");
                }
            }
            Stepped::RecordFailed { error, .. } | Stepped::ReadFailed(error) => {
                tracing::debug!(rollout = %job.name, error = %error, "notification record: will retry");
            }
            _ => {}
        }
        stepped
    }
}
