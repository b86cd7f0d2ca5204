//! Taking over the notifications a leader before this one (or this process before a restart)
//! recorded as pending and did not send ([`driver::take_over`]).

use std::time::Instant;

use kube::ResourceExt as _;
use sluice_notifications::Config;
use tracing::{info, warn};

use super::Loop;
use crate::loops::notification_driver as driver;

impl Loop {
    /// Queues the pending notifications of every cached Rollout that this process has not
    /// queued (left by a leader before it, or by this process before a restart), decided again
    /// from the Rollout with the status it had at the event; entries no longer due are taken off.
    pub(super) async fn recover(&mut self) {
        if !self.gate.is_open() || self.synced != (true, true) {
            return;
        }
        for cached in self.rollouts.state() {
            // Most Rollouts have nothing pending: only those that do are decoded whole.
            if !cached.annotations().contains_key(driver::PENDING) {
                continue;
            }
            // Its reconcile reports the same error; the other Rollouts go on.
            let ro = match cached.to_rollout() {
                Ok(ro) => ro,
                Err(e) => {
                    warn!(rollout = %cached.name_any(), error = %e, "cannot decode the cached Rollout");
                    continue;
                }
            };
            let configs = self.configs_for(&ro.namespace().unwrap_or_default());
            let configs: Vec<&Config> = configs.iter().map(AsRef::as_ref).collect();
            let jobs = driver::take_over(
                &self.cluster,
                &configs,
                &ro,
                &self.queued,
                jiff::Timestamp::now(),
            )
            .await;
            let now = Instant::now();
            for job in jobs {
                info!(rollout = %ro.name_any(), namespace = ro.namespace().unwrap_or_default(), trigger = %job.notification.trigger, "pending notification taken over");
                self.queued.insert(job.notification.key.clone());
                self.queue.push((job, now));
            }
        }
    }
}
