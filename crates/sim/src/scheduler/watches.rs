//! Watch traffic as the scheduler runs it: every committed change is fanned out to each
//! replica's stream with its own delay (and, by the seed, duplicated or lost with the whole
//! connection), then applied to the replica's cache when due; a broken stream re-lists.

use serde_json::Value;
use sluice_engine::analysis::ROLLOUT_TYPE;

use super::{Ev, Sim};
use crate::analysis_runs;
use crate::api_model::{Kind, WatchEvent, name_of};
use crate::controller::{Addr, Replica};
use crate::daemon_sets::DaemonSetController;
use crate::experiments;
use crate::kubelet::Cluster;
use crate::stateful_sets::StatefulSetController;

impl Sim {
    /// Hands committed changes to the watches, the ReplicaSet, AnalysisRun and Experiment
    /// controllers, the garbage collector and the checks.
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
            if let Some(sts) = StatefulSetController::interested_in(*kind, event) {
                self.queue_stateful_set_sync(sts);
            }
            for ds in DaemonSetController::interested_in(&self.api, *kind, event) {
                self.queue_daemon_set_sync(ds);
            }
            if let Some(run) = analysis_runs::interested_in(*kind, event) {
                let at = self.now_ms + self.rng.range(self.setup.analysis.notice_ms);
                if let Some(at) = self.runs.trigger(&run, at) {
                    self.at(at, Ev::SyncAnalysisRun { name: run });
                }
            }
            if let Some(exp) = experiments::interested_in(*kind, event) {
                let at = self.now_ms + self.rng.range(self.setup.faults.watch_delay_ms);
                if let Some(at) = self.experiments.trigger(&exp, at) {
                    self.at(at, Ev::SyncExperiment { name: exp });
                }
            }
            if !self.gc_pending && crate::gc::interested_in(&self.api, *kind, event) {
                self.gc_pending = true;
                let delay = self.setup.faults.rs_controller_delay_ms;
                self.after(delay, Ev::CollectGarbage);
            }
            // Controllers watch Rollouts, ReplicaSets, the AnalysisRuns Rollouts made and the
            // Experiments Rollouts own; pods and Services are read on demand, the Lease by the
            // elector.
            let watched = match kind {
                Kind::Rollout | Kind::ReplicaSet => true,
                Kind::AnalysisRun => made_by_a_rollout(event.object()),
                Kind::Experiment => owned_by_a_rollout(event.object()),
                Kind::StatefulSet | Kind::DaemonSet | Kind::ConfigMap | Kind::Secret => true,
                _ => false,
            };
            if !watched {
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
            self.book_deadline_checks();
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
        let r = &mut self.replicas[i];
        let (up, partitioned) = (r.up, r.partitioned);
        let connected = r.watch_mut(kind).is_some_and(|w| w.connected);
        if !up || partitioned || !connected {
            return;
        }
        let to = r.addr();
        if !self.calm && self.rng.chance(brk) {
            self.stats.watch_breaks += 1;
            let who = self.replicas[i].identity();
            self.log(format!("{who}: {kind:?} watch broke"));
            if let Some(w) = self.replicas[i].watch_mut(kind) {
                w.disconnect();
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
            let Some(stream) = self.replicas[i].watch_mut(kind) else {
                return;
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
        let Some(event) = r.watch_mut(kind).and_then(|w| w.pop_due(now_ms)) else {
            return;
        };
        match kind {
            Kind::Rollout => {
                r.rollouts.apply(&event);
                r.trigger(name_of(event.object()), now_ms);
            }
            Kind::AnalysisRun | Kind::Experiment => {
                if let Some(owner) = Replica::run_owner(event.object()) {
                    r.trigger(&owner, now_ms);
                }
            }
            Kind::StatefulSet => r.trigger_stateful_set(name_of(event.object()), now_ms),
            Kind::DaemonSet => r.trigger_daemon_set(name_of(event.object()), now_ms),
            Kind::ConfigMap | Kind::Secret => {
                r.trigger_config(kind, name_of(event.object()), now_ms);
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
        if kind == Kind::AnalysisRun {
            self.relist_runs(i);
            self.try_start(i);
            return;
        }
        if kind == Kind::Experiment {
            self.relist_experiments(i);
            self.try_start(i);
            return;
        }
        if kind == Kind::StatefulSet {
            self.relist_stateful_sets(i);
            self.try_start(i);
            return;
        }
        if kind == Kind::DaemonSet {
            self.relist_daemon_sets(i);
            self.try_start(i);
            return;
        }
        if matches!(kind, Kind::ConfigMap | Kind::Secret) {
            self.relist_config(i, kind);
            self.try_start(i);
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
        if kind == Kind::Rollout {
            // The run and Experiment watches (re)connect with the Rollout watch: scheduling
            // them on their own would draw from the seed's stream and change every schedule
            // without analysis or Experiments.
            self.relist_runs(i);
            self.relist_experiments(i);
            self.relist_stateful_sets(i);
            self.relist_daemon_sets(i);
            self.relist_config(i, Kind::ConfigMap);
            self.relist_config(i, Kind::Secret);
        }
        self.try_start(i);
    }

    /// The ConfigMap or Secret watch (re)connects: the Rollouts whose template references
    /// what it lists are reconciled. One that broke alone re-lists through [`Sim::relist`].
    fn relist_config(&mut self, i: usize, kind: Kind) {
        let names: Vec<String> = self
            .api
            .list(kind)
            .iter()
            .map(|o| name_of(o).to_string())
            .collect();
        let now_ms = self.now_ms;
        let r = &mut self.replicas[i];
        if let Some(watch) = r.watch_mut(kind) {
            watch.connected = true;
        }
        for name in &names {
            r.trigger_config(kind, name, now_ms);
        }
        if !names.is_empty() {
            let who = r.identity();
            self.log(format!("{who}: listed {kind:?}: {}", names.len()));
        }
    }

    /// The DaemonSet watch (re)connects: the Rollouts driving what it lists are reconciled.
    /// A DaemonSet watch that broke alone re-lists through [`Sim::relist`].
    fn relist_daemon_sets(&mut self, i: usize) {
        let names: Vec<String> = self
            .api
            .list(Kind::DaemonSet)
            .iter()
            .map(|s| name_of(s).to_string())
            .collect();
        let now_ms = self.now_ms;
        let r = &mut self.replicas[i];
        r.ds_watch.connected = true;
        for name in &names {
            r.trigger_daemon_set(name, now_ms);
        }
        if !names.is_empty() {
            let who = r.identity();
            self.log(format!("{who}: listed DaemonSet: {}", names.len()));
        }
    }

    /// The StatefulSet watch (re)connects: the Rollouts driving what it lists are reconciled.
    /// A StatefulSet watch that broke alone re-lists through [`Sim::relist`].
    fn relist_stateful_sets(&mut self, i: usize) {
        let names: Vec<String> = self
            .api
            .list(Kind::StatefulSet)
            .iter()
            .map(|s| name_of(s).to_string())
            .collect();
        let now_ms = self.now_ms;
        let r = &mut self.replicas[i];
        r.sts_watch.connected = true;
        for name in &names {
            r.trigger_stateful_set(name, now_ms);
        }
        if !names.is_empty() {
            let who = r.identity();
            self.log(format!("{who}: listed StatefulSet: {}", names.len()));
        }
    }

    /// The run watch (re)connects: as after any list, the owners of what it lists are
    /// reconciled. A run watch that broke alone re-lists through [`Sim::relist`].
    fn relist_runs(&mut self, i: usize) {
        let runs: Vec<_> = self
            .api
            .list(Kind::AnalysisRun)
            .into_iter()
            .filter(made_by_a_rollout)
            .collect();
        let now_ms = self.now_ms;
        let r = &mut self.replicas[i];
        r.run_watch.connected = true;
        for owner in runs.iter().filter_map(Replica::run_owner) {
            r.trigger(&owner, now_ms);
        }
        let who = r.identity();
        self.log(format!("{who}: listed AnalysisRun: {}", runs.len()));
    }

    /// The Experiment watch (re)connects: the owners of what it lists are reconciled. An
    /// Experiment watch that broke alone re-lists through [`Sim::relist`].
    fn relist_experiments(&mut self, i: usize) {
        let experiments: Vec<_> = self
            .api
            .list(Kind::Experiment)
            .into_iter()
            .filter(owned_by_a_rollout)
            .collect();
        let now_ms = self.now_ms;
        let r = &mut self.replicas[i];
        r.exp_watch.connected = true;
        for owner in experiments.iter().filter_map(Replica::run_owner) {
            r.trigger(&owner, now_ms);
        }
        if !experiments.is_empty() {
            let who = r.identity();
            self.log(format!("{who}: listed Experiment: {}", experiments.len()));
        }
    }
}

/// The controller watches the Experiments whose controller is a Rollout.
fn owned_by_a_rollout(e: &Value) -> bool {
    crate::experiments::controller_owner(e, "Rollout").is_some()
}

/// The controller watches only runs with a `rollout-type` label, the ones Rollouts make.
fn made_by_a_rollout(run: &Value) -> bool {
    run.pointer("/metadata/labels")
        .and_then(|l| l.get(ROLLOUT_TYPE))
        .is_some()
}
