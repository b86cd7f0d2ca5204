//! The engine's output: the writes one reconcile should make, in order, plus the status to
//! record and the events to publish. The apply layer executes it; the simulator can too.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::RolloutStatus;
use sluice_routers::kinds::ObjectRef;

/// One write against the API server. Each names the object and the resourceVersion it was
/// decided on, so that the apply layer can refuse to write over newer state (a 409 makes the
/// controller observe again and decide afresh).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create the ReplicaSet for the current pod template.
    CreateReplicaSet { replica_set: Box<ReplicaSet> },
    /// Set `spec.replicas` and annotations of a ReplicaSet. Annotation values of `None` remove
    /// the key. Only the named keys are touched; nothing else on the object is rewritten.
    ScaleReplicaSet {
        name: String,
        resource_version: Option<String>,
        from: i32,
        to: i32,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// A precondition check that writes nothing: refused with a conflict if the ReplicaSet
    /// changed since it was observed (the controller reads its metadata from the API server
    /// and compares the versions). Placed before scale-downs, so that an availability
    /// budget counted from a stale cache is never spent.
    ConfirmReplicaSet {
        name: String,
        resource_version: Option<String>,
    },
    /// Set or remove annotations on a ReplicaSet without scaling it.
    AnnotateReplicaSet {
        name: String,
        resource_version: Option<String>,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Delete an old, scaled-down ReplicaSet beyond the revision history limit.
    DeleteReplicaSet { name: String, uid: Option<String> },
    /// Point a Service at the pods of one ReplicaSet: sets its `rollouts-pod-template-hash`
    /// selector and the managed-by annotation, leaving every other field alone.
    SwitchService {
        name: String,
        resource_version: Option<String>,
        pod_hash: String,
        rollout: String,
    },
    /// Give back a Service the Rollout no longer names: remove its `rollouts-pod-template-hash`
    /// selector and the managed-by annotation, so that it selects every pod of the app again
    /// instead of the pods of one ReplicaSet (or, once that is gone, none).
    ReleaseService {
        name: String,
        resource_version: Option<String>,
    },
    /// Evict a pod (restart): the Eviction API, so PodDisruptionBudgets apply.
    EvictPod { name: String, uid: Option<String> },
    /// Give a ReplicaSet's pod template the ephemeral metadata of its current role: set or
    /// (with `None`) remove the named template labels and annotations, and record what is now
    /// injected in the `rollout.argoproj.io/ephemeral-metadata` annotation (`None` removes
    /// it). Never touches the pod-template-hash label or the selector.
    SetReplicaSetPodMetadata {
        name: String,
        resource_version: Option<String>,
        labels: BTreeMap<String, Option<String>>,
        annotations: BTreeMap<String, Option<String>>,
        record: Option<String>,
    },
    /// Set or remove labels and annotations of a running pod, so that it carries its
    /// ReplicaSet's new role without a restart.
    PatchPodMetadata {
        name: String,
        resource_version: Option<String>,
        labels: BTreeMap<String, Option<String>>,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Set or remove annotations on the Rollout itself (its revision number).
    AnnotateRollout {
        resource_version: Option<String>,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Start an analysis of the update.
    CreateAnalysisRun { run: Box<AnalysisRun> },
    /// Stop a run nothing waits on any more: `{"spec":{"terminate":true}}`.
    TerminateAnalysisRun { name: String },
    /// Set or remove annotations on an AnalysisRun.
    AnnotateAnalysisRun {
        name: String,
        resource_version: Option<String>,
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Delete a finished run beyond the Rollout's history limits.
    DeleteAnalysisRun { name: String, uid: Option<String> },
    /// Create a router object the Rollout owns (a canary Ingress, a TrafficSplit).
    CreateRouterObject {
        target: ObjectRef,
        object: Box<serde_json::Value>,
    },
    /// Replace a router object with its edited copy. The copy carries the resourceVersion it
    /// was read at, so a concurrent change makes the write fail with a conflict instead of
    /// being overwritten.
    UpdateRouterObject {
        target: ObjectRef,
        object: Box<serde_json::Value>,
    },
    /// Delete a router object the Rollout made and no longer needs (an Ambassador canary
    /// Mapping at weight 0, an APISIX header route). `uid` is the one observed, so that an
    /// object recreated in between is not deleted by mistake.
    DeleteRouterObject {
        target: ObjectRef,
        uid: Option<String>,
    },
    /// Create the Experiment of the current `experiment` step.
    CreateExperiment {
        experiment: Box<sluice_api::experiment::Experiment>,
    },
    /// Stop an Experiment the update no longer waits on: `{"spec":{"terminate":true}}`.
    TerminateExperiment { name: String },
    /// Set `spec.replicas` of the Deployment a Rollout's `workloadRef` names (its
    /// `scaleDown`): `object` is the Deployment as observed with only its replicas changed,
    /// written whole (Argo's RBAC grants `update` on Deployments, not `patch`). It carries
    /// the resourceVersion it was read at, so a Deployment changed since is read again
    /// rather than overwritten.
    ScaleDeployment {
        name: String,
        object: Box<serde_json::Value>,
        from: i32,
        to: i32,
    },
    /// Replace the StatefulSet a Rollout drives (`rollouts.sluice.dev/statefulset`) with its
    /// edited copy: its partition, or on abort its template set back to the stable
    /// revision's. The copy carries the resourceVersion it was read at, so a StatefulSet
    /// changed since (a user's edit) is read again rather than overwritten.
    UpdateStatefulSet {
        name: String,
        object: Box<serde_json::Value>,
    },
    /// Replace the DaemonSet a Rollout drives (`rollouts.sluice.dev/daemonset`) with its
    /// edited copy: on abort its template set back to the stable revision's. As for a
    /// StatefulSet, the copy carries the resourceVersion it was read at.
    UpdateDaemonSet {
        name: String,
        object: Box<serde_json::Value>,
    },
    /// Delete an Experiment of a ReplicaSet that is gone (its ReplicaSets, Services and runs
    /// go with it, through their owner references).
    DeleteExperiment { name: String, uid: Option<String> },
    /// Make `copy`, an immutable copy of the ConfigMap or Secret `source` owned by the Rollout
    /// (`rollouts.sluice.dev/config-rollout`). The content is the controller's to read: it
    /// copies only while the source still hashes to `hash`, the content this was decided on.
    CopyConfig {
        kind: crate::config_copies::ConfigKind,
        source: String,
        hash: String,
        copy: String,
    },
    /// Set the owners of a copy (the ReplicaSets that read it, or the Rollout), at the
    /// resourceVersion read.
    OwnConfigCopy {
        kind: crate::config_copies::ConfigKind,
        name: String,
        resource_version: Option<String>,
        owners: Vec<crate::config_copies::Owner>,
    },
}

/// The event of a write of a StatefulSet a Rollout drives (its partition or template).
pub const UPDATED_STATEFUL_SET: &str = "UpdatedStatefulSet";

/// The event of a write of a DaemonSet a Rollout drives (its template, on abort).
pub const UPDATED_DAEMON_SET: &str = "UpdatedDaemonSet";

/// The event of a DaemonSet's pod evicted so that its node's next pod runs another revision.
pub const EVICTED_DAEMON_SET_POD: &str = "EvictedDaemonSetPod";

/// Event severity, as Kubernetes names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An event to publish on the Rollout once the plan's writes succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

impl Action {
    /// The ReplicaSet an action writes to, by name, when it writes to one that exists.
    fn replica_set(&self) -> Option<&str> {
        match self {
            Action::ScaleReplicaSet { name, .. }
            | Action::ConfirmReplicaSet { name, .. }
            | Action::AnnotateReplicaSet { name, .. }
            | Action::DeleteReplicaSet { name, .. }
            | Action::SetReplicaSetPodMetadata { name, .. } => Some(name),
            _ => None,
        }
    }
}

impl Event {
    pub fn normal(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Normal,
            reason,
            message: message.into(),
        }
    }

    /// Whether the event reports a write of the plan's actions (a scale, a Service switch, a
    /// router edit, an experiment step's Experiment, the Rollout's revision) rather than a change of status: such an event is
    /// published once the actions are written even if the status patch then fails, since the
    /// next reconcile finds the write done and would not report it again.
    pub fn reports_a_write(&self) -> bool {
        matches!(
            self.reason,
            "ScalingReplicaSet"
                | "NewReplicaSetCreated"
                | "ExperimentCreated"
                | "RolloutUpdated"
                | "SwitchService"
                | "Updated VirtualService"
                | "UpdatedDestinationRule"
                | "CreatingCanaryIngress"
                | "PatchingCanaryIngress"
                | "TrafficSplitCreated"
                | UPDATED_STATEFUL_SET
                | UPDATED_DAEMON_SET
                | EVICTED_DAEMON_SET_POD
        ) || (self.reason.starts_with("Updated") && self.reason.ends_with("Route"))
    }

    pub fn warning(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            type_: EventType::Warning,
            reason,
            message: message.into(),
        }
    }
}

/// What one reconcile decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Writes in the order they must happen.
    pub actions: Vec<Action>,
    /// The status the Rollout should have after this reconcile. The apply layer writes only the
    /// difference from the observed status, and nothing when there is none.
    pub status: RolloutStatus,
    pub events: Vec<Event>,
    /// Come back after this long even if nothing changes (a pause or deadline expires).
    pub requeue_after: Option<Duration>,
    /// A status change that only reports progress was held back (`status` is the observed
    /// one): the controller remembers since when, as [`crate::Observed::progress_held_since`].
    pub progress_held: bool,
    /// What the update waits for, as decided in this reconcile (empty when it moves on or
    /// is done). Only explained to users; the controller does not act on it.
    pub waits: Vec<crate::Wait>,
    /// Step plugins to call before the plan is applied: the controller calls them and
    /// decides again with their answers ([`crate::Observed::step_plugin_answers`]).
    pub step_plugin_calls: Vec<crate::StepPluginCall>,
}

impl Plan {
    /// Puts the writes in their final order. A ReplicaSet's annotations (a revision bump)
    /// go with the next write to the same ReplicaSet made from the same observed copy (its
    /// scaling, or its confirmation), not in one of their own: the second write would carry a
    /// resourceVersion the first made stale, and always conflict. The Rollout's annotations
    /// (its revision) go last, so that a plan stopped by a conflict has not recorded a
    /// revision whose announcement (`RolloutUpdated`) it never sent: the next reconcile
    /// records and announces it.
    pub(crate) fn order_writes(&mut self) {
        let mut i = 0;
        while i < self.actions.len() {
            if let Action::AnnotateReplicaSet {
                name,
                resource_version,
                annotations,
            } = &self.actions[i]
            {
                let later = self.actions[i + 1..]
                    .iter()
                    .position(|a| a.replica_set() == Some(name.as_str()))
                    .map(|k| i + 1 + k);
                let (name, rv, extra) =
                    (name.clone(), resource_version.clone(), annotations.clone());
                let merged = match later.map(|j| (j, &mut self.actions[j])) {
                    Some((
                        _,
                        Action::ScaleReplicaSet {
                            resource_version,
                            annotations,
                            ..
                        },
                    )) if *resource_version == rv => {
                        for (k, v) in extra {
                            annotations.entry(k).or_insert(v);
                        }
                        true
                    }
                    Some((
                        j,
                        Action::ConfirmReplicaSet {
                            resource_version, ..
                        },
                    )) if *resource_version == rv => {
                        self.actions[j] = Action::AnnotateReplicaSet {
                            name,
                            resource_version: rv,
                            annotations: extra,
                        };
                        true
                    }
                    _ => false,
                };
                if merged {
                    self.actions.remove(i);
                    continue;
                }
            }
            i += 1;
        }
        if let Some(at) = self
            .actions
            .iter()
            .position(|a| matches!(a, Action::AnnotateRollout { .. }))
        {
            let annotate = self.actions.remove(at);
            self.actions.push(annotate);
        }
    }

    /// Sets (or, with `None`, removes) a Rollout annotation. All of a reconcile's annotations
    /// go in one write: two writes at the same resourceVersion would make the second conflict.
    pub(crate) fn annotate_rollout(
        &mut self,
        resource_version: Option<String>,
        key: &str,
        value: Option<String>,
    ) {
        for action in &mut self.actions {
            if let Action::AnnotateRollout { annotations, .. } = action {
                annotations.insert(key.to_string(), value);
                return;
            }
        }
        self.actions.push(Action::AnnotateRollout {
            resource_version,
            annotations: [(key.to_string(), value)].into(),
        });
    }
}

/// Asks to come back after `after` at the latest (never sooner than a second, so that a
/// deadline just missed does not spin), keeping an earlier requeue already asked for.
pub(crate) fn set_requeue(requeue: &mut Option<Duration>, after: Duration) {
    let after = after.max(Duration::from_secs(1));
    *requeue = Some(requeue.map_or(after, |r| r.min(after)));
}

#[cfg(test)]
mod tests {
    use super::Event;

    #[test]
    fn events_of_writes_are_told_from_events_of_status() {
        for reason in [
            "SwitchService",
            "ScalingReplicaSet",
            "RolloutUpdated",
            "Updated VirtualService",
            "UpdatedHTTPRoute",
            // Live scenario seed 358: the Experiment was created, the status patch after it
            // conflicted, and the next reconcile found the Experiment there to tell nothing.
            "ExperimentCreated",
        ] {
            assert!(Event::normal(reason, "").reports_a_write(), "{reason}");
        }
        for reason in [
            "RolloutStepCompleted",
            "RolloutPaused",
            "TrafficWeightUpdated",
            "RolloutCompleted",
        ] {
            assert!(!Event::normal(reason, "").reports_a_write(), "{reason}");
        }
    }
}
