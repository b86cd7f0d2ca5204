//! Watch traffic as the scheduler runs it: every committed change is fanned out to each
//! replica's stream with its own delay (and, by the seed, duplicated or lost with the whole
//! connection), then applied to the replica's cache when due; a broken stream re-lists.

use super::{Ev, Sim};
use crate::api_model::{Kind, WatchEvent, name_of};
use crate::controller::{Addr, Replica};
use crate::kubelet::Cluster;

impl Sim {
    /// Hands committed changes to the watches, the ReplicaSet controller and the checks.
    pub(super) fn fan_out(&mut self) {
        let changes = self.api.take_changes();
        if changes.is_empty() {
            return;
        }
        for (kind, name, event) in &changes {
            self.checker.on_change(self.now_ms, *kind, event);
            if let Some(rs) = Cluster::interested_in(*kind, event)
                && self.rs_sync_pending.insert(rs.clone())
            {
                let delay = self.setup.faults.rs_controller_delay_ms;
                self.after(delay, Ev::SyncReplicaSet { name: rs });
            }
            // Controllers watch Rollouts and ReplicaSets only; pods and Services are read on
            // demand, the Lease by the elector.
            if !matches!(kind, Kind::Rollout | Kind::ReplicaSet) {
                continue;
            }
            for i in 0..self.replicas.len() {
                self.push_watch(i, *kind, name, event);
            }
        }
        if self.api.resource_version() != self.checked_rv {
            self.checked_rv = self.api.resource_version();
            let now = self.now();
            self.checker.after_change(&self.api, self.now_ms, now);
        }
    }

    fn push_watch(&mut self, i: usize, kind: Kind, name: &str, event: &WatchEvent) {
        let f = &self.setup.faults;
        let (delay, dup, brk, backoff) = (
            f.watch_delay_ms,
            f.watch_duplicate,
            f.watch_break,
            f.relist_backoff_ms,
        );
        let r = &self.replicas[i];
        let connected = match kind {
            Kind::Rollout => r.rollout_watch.connected,
            _ => r.rs_watch.connected,
        };
        if !r.up || r.partitioned || !connected {
            return;
        }
        let to = r.addr();
        if !self.calm && self.rng.chance(brk) {
            self.stats.watch_breaks += 1;
            let who = self.replicas[i].identity();
            self.log(format!("{who}: {kind:?} watch broke"));
            let r = &mut self.replicas[i];
            match kind {
                Kind::Rollout => r.rollout_watch.disconnect(),
                _ => r.rs_watch.disconnect(),
            }
            self.after(backoff, Ev::Relist { to, kind });
            return;
        }
        let copies = if !self.calm && self.rng.chance(dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let due = self.now_ms + self.rng.range(delay);
            self.seq += 1;
            let seq = self.seq;
            let r = &mut self.replicas[i];
            let stream = match kind {
                Kind::Rollout => &mut r.rollout_watch,
                _ => &mut r.rs_watch,
            };
            let due = stream.push(name, event.clone(), due, seq);
            self.at(due, Ev::Deliver { to, kind });
        }
    }
    pub(super) fn deliver(&mut self, to: Addr, kind: Kind) {
        let Some(i) = self.current(to) else {
            return;
        };
        let now_ms = self.now_ms;
        let r = &mut self.replicas[i];
        let event = match kind {
            Kind::Rollout => r.rollout_watch.pop_due(now_ms),
            _ => r.rs_watch.pop_due(now_ms),
        };
        let Some(event) = event else {
            return;
        };
        match kind {
            Kind::Rollout => {
                r.rollouts.apply(&event);
                r.trigger(name_of(event.object()), now_ms);
            }
            _ => {
                r.replica_sets.apply(&event);
                let owner = serde_json::from_value(event.object().clone())
                    .ok()
                    .and_then(|rs| Replica::owner_of(&rs));
                if let Some(owner) = owner {
                    r.trigger(&owner, now_ms);
                }
            }
        }
        self.try_start(i);
    }

    pub(super) fn relist(&mut self, to: Addr, kind: Kind) {
        let Some(i) = self.current(to) else {
            return;
        };
        if self.replicas[i].partitioned {
            let backoff = self.setup.faults.relist_backoff_ms;
            self.after(backoff, Ev::Relist { to, kind });
            return;
        }
        let list = self.api.list(kind);
        let r = &mut self.replicas[i];
        match kind {
            Kind::Rollout => {
                r.rollouts.replace(&list);
                r.rollout_watch.connected = true;
            }
            _ => {
                r.replica_sets.replace(&list);
                r.rs_watch.connected = true;
            }
        }
        let cached = match kind {
            Kind::Rollout => r.rollouts.objects.len(),
            _ => r.replica_sets.objects.len(),
        };
        let who = r.identity();
        r.trigger_all(self.now_ms);
        self.log(format!(
            "{who}: listed {kind:?}: {cached} of {}",
            list.len()
        ));
        self.try_start(i);
    }
}
