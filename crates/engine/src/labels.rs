//! Label and annotation keys shared with Argo Rollouts. They are part of the compatibility
//! contract: Argo CD, dashboards and a controller taking over read exactly these.

/// Pod-template hash label on ReplicaSets, their selectors and pods.
pub const POD_TEMPLATE_HASH: &str = "rollouts-pod-template-hash";
/// Revision number on the Rollout and on its ReplicaSets.
pub const REVISION: &str = "rollout.argoproj.io/revision";
/// Earlier revisions a re-used ReplicaSet served, comma separated.
pub const REVISION_HISTORY: &str = "rollout.argoproj.io/revision-history";
/// `spec.replicas` of the Rollout when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "rollout.argoproj.io/desired-replicas";
/// RFC 3339 time after which a delayed ReplicaSet is scaled down. Unprefixed, as Argo writes it.
pub const SCALE_DOWN_DEADLINE: &str = "scale-down-deadline";
/// Notification state on the Rollout; never copied to ReplicaSets.
pub const NOTIFIED: &str = "notified.notifications.argoproj.io";
/// kubectl's client-side apply record; never copied to ReplicaSets.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// JSON of the ephemeral pod metadata (canary/stable, preview/active) a ReplicaSet's pod template
/// carries, so that a role change knows which keys to take away.
pub const EPHEMERAL_METADATA: &str = "rollout.argoproj.io/ephemeral-metadata";
/// Time a restart was applied to a ReplicaSet.
pub const RESTARTED_AFTER: &str = "argo-rollouts.argoproj.io/restarted-after";
/// Rollout-to-ReplicaSet annotation copy rule: everything except these keys.
pub const NOT_COPIED_TO_REPLICA_SET: &[&str] = &[
    LAST_APPLIED,
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    NOTIFIED,
];
/// Label that ties Rollouts and their AnalysisRuns to one controller instance
/// (`--instance-id`); without one, a controller leaves labelled objects alone.
pub const CONTROLLER_INSTANCE_ID: &str = "argo-rollouts.argoproj.io/controller-instance-id";
/// Rollout name on a Service whose selector the controller manages.
pub const MANAGED_BY: &str = "argo-rollouts.argoproj.io/managed-by-rollouts";
/// Experiment name on the ReplicaSets and Services of an Experiment: with the controller
/// reference, it is how an Experiment claims them.
pub const EXPERIMENT_NAME: &str = "experiment.argoproj.io/name";
/// Template name on the ReplicaSets and Services of an Experiment: which template they serve.
pub const EXPERIMENT_TEMPLATE_NAME: &str = "experiment.argoproj.io/template-name";
