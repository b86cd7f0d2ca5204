//! Kubernetes' own part of the world as the scheduler runs it: the ReplicaSet controller
//! creating and deleting pods, the kubelet making them ready, the StatefulSet controller
//! replacing its pods, the DaemonSet controller giving each node a pod, and the garbage
//! collector.

use super::{Ev, Sim};
use crate::kubelet::Followup;
use crate::stateful_sets;

impl Sim {
    /// The ReplicaSet controller's sync of `name`; what it starts finishes later as events.
    pub(super) fn sync_replica_set(&mut self, name: &str) {
        self.rs_sync_pending.remove(name);
        let now = self.now();
        let kubelet = self.setup.kubelet.clone();
        let followups = self.cluster.sync_replica_set(
            &mut self.api,
            name,
            self.now_ms,
            now,
            &kubelet,
            &mut self.rng,
        );
        for f in followups {
            match f {
                Followup::PodReady { pod, at_ms } => self.at(at_ms, Ev::PodReady { pod }),
                Followup::SyncReplicaSet { name, at_ms } => {
                    if self.rs_sync_pending.insert(name.clone()) {
                        self.at(at_ms, Ev::SyncReplicaSet { name });
                    }
                }
            }
        }
    }

    pub(super) fn pod_ready(&mut self, pod: &str) {
        let now = self.now();
        self.cluster.pod_ready(&mut self.api, pod, now);
    }

    pub(super) fn collect_garbage(&mut self) {
        self.gc_pending = false;
        for (kind, name) in crate::gc::collect(&mut self.api) {
            self.log(format!("gc: delete {kind:?}/{name}"));
        }
    }

    /// The StatefulSet controller's sync of `name`; the pods it starts get ready later.
    pub(super) fn sync_stateful_set(&mut self, name: &str) {
        self.sts_sync_pending.remove(name);
        let now = self.now();
        let kubelet = self.setup.kubelet.clone();
        let followups = self.stateful_sets.sync(
            &mut self.api,
            name,
            self.now_ms,
            now,
            &kubelet,
            &mut self.rng,
        );
        for stateful_sets::Followup::OrdinalReady {
            stateful_set,
            ordinal,
            revision,
            at_ms,
        } in followups
        {
            self.at(
                at_ms,
                Ev::OrdinalReady {
                    stateful_set,
                    ordinal,
                    revision,
                },
            );
        }
    }

    /// A StatefulSet's pod is ready: its controller looks again (the next pod, the status).
    pub(super) fn ordinal_ready(&mut self, stateful_set: &str, ordinal: usize, revision: &str) {
        if self
            .stateful_sets
            .ordinal_ready(stateful_set, ordinal, revision)
        {
            self.queue_stateful_set_sync(stateful_set.to_string());
        }
    }

    /// The DaemonSet controller's sync of `name`; the pods it makes get ready later.
    pub(super) fn sync_daemon_set(&mut self, name: &str) {
        self.ds_sync_pending.remove(name);
        let now = self.now();
        let kubelet = self.setup.kubelet.clone();
        let followups = self.daemon_sets.sync(
            &mut self.api,
            name,
            self.now_ms,
            now,
            &kubelet,
            &mut self.rng,
        );
        for f in followups {
            if let Followup::PodReady { pod, at_ms } = f {
                self.at(at_ms, Ev::PodReady { pod });
            }
        }
    }

    pub(super) fn queue_daemon_set_sync(&mut self, name: String) {
        if self.ds_sync_pending.insert(name.clone()) {
            let delay = self.setup.faults.rs_controller_delay_ms;
            self.after(delay, Ev::SyncDaemonSet { name });
        }
    }

    pub(super) fn queue_stateful_set_sync(&mut self, name: String) {
        if self.sts_sync_pending.insert(name.clone()) {
            let delay = self.setup.faults.rs_controller_delay_ms;
            self.after(delay, Ev::SyncStatefulSet { name });
        }
    }
}
