//! Fault injection: crashes and restarts of controller replicas, network partitions and their
//! healing, third parties writing the controller's objects, and the calm after which no random
//! fault comes. Each random fault books its next occurrence until the world calms down.

use serde_json::json;

use super::{Ev, Sim};
use crate::api_model::{Endpoint, Kind, name_of};

impl Sim {
    /// From now on no random fault: partitions end and Lease writes stop failing.
    pub(super) fn calm_down(&mut self) {
        if self.calm {
            return;
        }
        self.calm = true;
        self.log("calm: no more random faults".into());
        for i in 0..self.replicas.len() {
            self.replicas[i].partitioned = false;
            self.lease_fail_until[i] = 0;
        }
    }

    /// Someone else writes a ReplicaSet or router object chosen at random.
    pub(super) fn random_meddle(&mut self) {
        if self.calm {
            return;
        }
        let mut targets: Vec<(Kind, String)> = self
            .api
            .list(Kind::ReplicaSet)
            .iter()
            .map(|v| (Kind::ReplicaSet, name_of(v).to_string()))
            .collect();
        targets.extend(self.api.routers());
        if !targets.is_empty() {
            let (kind, n) = targets[self.rng.below(targets.len() as u64) as usize].clone();
            self.meddle(kind, &n);
        }
        if let Some(every) = self.setup.faults.meddle_every_ms {
            self.after(every, Ev::Meddle);
        }
    }

    /// A replica chosen at random crashes (if it is up).
    pub(super) fn random_crash(&mut self) {
        if self.calm {
            return;
        }
        let i = self.rng.below(self.replicas.len() as u64) as usize;
        if self.replicas[i].up {
            self.log(format!("fault: crash {}", self.replicas[i].identity()));
            self.crash(i);
        }
        if let Some(every) = self.setup.faults.crash_every_ms {
            self.after(every, Ev::RandomCrash);
        }
    }

    /// A replica chosen at random is cut off the network for a random time.
    pub(super) fn random_partition(&mut self) {
        if self.calm {
            return;
        }
        let i = self.rng.below(self.replicas.len() as u64) as usize;
        let len = self.rng.range(self.setup.faults.partition_ms);
        self.partition(i, len);
        if let Some(every) = self.setup.faults.partition_every_ms {
            self.after(every, Ev::RandomPartition);
        }
    }

    /// Someone else (kubectl, Argo CD) writes a ReplicaSet or a router object: a new
    /// resourceVersion that any controller decision based on the old one must not write over.
    /// Only an annotation changes: what the object routes or runs is the controller's.
    pub(super) fn meddle(&mut self, kind: Kind, name: &str) {
        self.seq += 1;
        let patch =
            json!({"metadata": {"annotations": {"example.com/touched": self.seq.to_string()}}});
        if self.api.patch(kind, name, &patch, Endpoint::Main).is_ok() {
            let what = match kind {
                Kind::ReplicaSet => "rs".to_string(),
                other => format!("{other:?}"),
            };
            self.log(format!("meddler: annotate {what}/{name}"));
        }
    }

    pub(super) fn crash(&mut self, i: usize) {
        self.stats.crashes += 1;
        self.replicas[i].crash();
        let restart = self.setup.faults.restart_after_ms;
        self.after(restart, Ev::Restart { replica: i });
    }

    /// A crashed replica starts again, as a new incarnation that lists and runs for the Lease.
    pub(super) fn restart(&mut self, replica: usize) {
        if !self.replicas[replica].up {
            self.replicas[replica].restart();
            self.log(format!("{}: started", self.replicas[replica].identity()));
            self.boot(replica);
        }
    }

    pub(super) fn partition(&mut self, i: usize, len: u64) {
        if !self.replicas[i].up || self.replicas[i].partitioned {
            return;
        }
        self.stats.partitions += 1;
        self.log(format!(
            "fault: partition {} for {len} ms",
            self.replicas[i].identity()
        ));
        let r = &mut self.replicas[i];
        r.partitioned = true;
        r.rollout_watch.disconnect();
        r.rs_watch.disconnect();
        r.run_watch.disconnect();
        r.exp_watch.disconnect();
        r.sts_watch.disconnect();
        r.ds_watch.disconnect();
        r.cm_watch.disconnect();
        r.secret_watch.disconnect();
        let to = r.addr();
        for kind in [Kind::Rollout, Kind::ReplicaSet] {
            let backoff = self.setup.faults.relist_backoff_ms;
            self.after(backoff, Ev::Relist { to, kind });
        }
        self.at(self.now_ms + len, Ev::Heal { replica: i });
    }

    pub(super) fn heal(&mut self, replica: usize) {
        if self.replicas[replica].partitioned {
            self.replicas[replica].partitioned = false;
            self.log(format!("replica {replica}: partition healed"));
        }
    }
}
