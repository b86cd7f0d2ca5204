//! The StatefulSet as the engine reads it: its size, partition, revisions and pod counts, from
//! the object as the API server returned it (kept as JSON so that it is written back whole,
//! with every field Sluice does not know of).

use serde_json::Value;

/// `partition = replicas - ceil(replicas * weight / 100)`: the lowest ordinal that runs the
/// update revision when `weight` percent of the pods are to run it.
pub fn partition_for(replicas: i32, weight: i32) -> i32 {
    let replicas = i64::from(replicas.max(0));
    let weight = i64::from(weight.clamp(0, 100));
    let updated = (replicas * weight + 99) / 100;
    // Both within 0..=replicas, which came from an i32.
    i32::try_from(replicas - updated).unwrap_or(0)
}

/// The hash part of a revision name: the StatefulSet controller names revisions (and labels
/// pods with `controller-revision-hash`) `<statefulset>-<hash>`.
pub fn revision_hash<'a>(stateful_set: &str, revision: &'a str) -> &'a str {
    revision
        .strip_prefix(stateful_set)
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or(revision)
}

/// Typed reads of the StatefulSet's JSON; absent fields read as Kubernetes defaults them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sts<'a>(pub &'a Value);

fn int(v: &Value) -> Option<i32> {
    v.as_i64().and_then(|n| i32::try_from(n).ok())
}

impl<'a> Sts<'a> {
    pub fn name(self) -> &'a str {
        self.0["metadata"]["name"].as_str().unwrap_or_default()
    }

    pub fn replicas(self) -> i32 {
        int(&self.0["spec"]["replicas"]).unwrap_or(1).max(0)
    }

    /// `spec.updateStrategy.type`, `RollingUpdate` when unset (the API server's default).
    pub fn strategy_type(self) -> &'a str {
        self.0["spec"]["updateStrategy"]["type"]
            .as_str()
            .unwrap_or("RollingUpdate")
    }

    /// `spec.updateStrategy.rollingUpdate.partition`; unset means 0 to the StatefulSet
    /// controller.
    pub fn partition(self) -> Option<i32> {
        int(&self.0["spec"]["updateStrategy"]["rollingUpdate"]["partition"])
    }

    /// Whether the StatefulSet controller has seen the current spec.
    pub fn status_is_current(self) -> bool {
        let generation = self.0["metadata"]["generation"].as_i64().unwrap_or(0);
        self.0["status"]["observedGeneration"].as_i64().unwrap_or(0) >= generation
    }

    fn status_count(self, field: &str) -> i32 {
        int(&self.0["status"][field]).unwrap_or(0).max(0)
    }

    pub fn status_replicas(self) -> i32 {
        self.status_count("replicas")
    }

    pub fn ready(self) -> i32 {
        self.status_count("readyReplicas")
    }

    pub fn available(self) -> i32 {
        self.status_count("availableReplicas")
    }

    /// Pods (not terminating) on the update revision.
    pub fn updated(self) -> i32 {
        self.status_count("updatedReplicas")
    }

    /// Pods (not terminating) on the current revision.
    pub fn current(self) -> i32 {
        self.status_count("currentReplicas")
    }

    /// The hashes of `status.updateRevision` and `status.currentRevision`, once the
    /// StatefulSet controller has written them.
    pub fn revisions(self) -> Option<(&'a str, &'a str)> {
        let update = self.0["status"]["updateRevision"].as_str()?;
        let current = self.0["status"]["currentRevision"].as_str()?;
        Some((
            revision_hash(self.name(), update),
            revision_hash(self.name(), current),
        ))
    }

    /// Whether every pod runs the update revision and is ready: what the StatefulSet
    /// controller records by making the update revision the current one.
    pub fn all_updated(self) -> bool {
        let replicas = self.replicas();
        self.revisions().is_some_and(|(u, c)| u == c)
            && self.status_is_current()
            && self.status_replicas() == replicas
            && self.updated() == replicas
            && self.ready() == replicas
    }

    /// Whether the pods at or above `partition` run the update revision and are ready (those
    /// below keep theirs): a `setWeight` step is done.
    pub fn at_partition(self, partition: i32) -> bool {
        let replicas = self.replicas();
        self.partition().unwrap_or(0) == partition
            && self.status_is_current()
            && self.status_replicas() == replicas
            && self.updated() >= replicas - partition.min(replicas)
            && self.ready() == replicas
    }
}
