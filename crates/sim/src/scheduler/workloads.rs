//! Kubernetes' own part of the world as the scheduler runs it: the ReplicaSet controller
//! creating and deleting pods, the kubelet making them ready, and the garbage collector.

use super::{Ev, Sim};
use crate::kubelet::Followup;

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
}
