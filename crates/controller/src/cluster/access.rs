//! What the observe and apply steps may read and write: the trait both the real API server
//! and the simulator stand behind.

use std::future::Future;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::experiment::Experiment;
use sluice_engine::Observed;
use sluice_engine::config_rollout::{ConfigKind, ConfigObserved, Owner};
use sluice_engine::daemonset::DaemonSetObserved;
use sluice_engine::observed::TemplateKey;
use sluice_engine::statefulset::StatefulSetObserved;
use sluice_engine::workload::WorkloadTarget;
use sluice_routers::kinds::{ApiVersions, ObjectRef, RouterKind};

use super::WriteError;
/// The reads and writes of the loops' reconciles (Rollouts, AnalysisRuns, Experiments): every
/// write the controller makes goes through here. Patches are JSON merge patches that carry the
/// `metadata.resourceVersion` they were computed from, so a stale decision is refused.
pub trait ClusterAccess: Send + Sync {
    /// Whether a write may be made now. The apply layer asks right before each write, so a
    /// controller that lost its leader lease stops at once, even in the middle of a plan.
    fn may_write(&self) -> Result<(), WriteError> {
        Ok(())
    }

    fn create_replica_set(
        &self,
        namespace: &str,
        rs: &ReplicaSet,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    fn patch_replica_set(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Checks that a ReplicaSet is still at `resource_version`: [`WriteError::Conflict`] if it
    /// changed since it was observed, [`WriteError::NotFound`] if it is gone. A plan confirms
    /// the ReplicaSets whose availability it counts before it scales anything down. By
    /// default a merge patch that changes nothing and carries the resourceVersion, which the
    /// API server checks and then writes nothing.
    fn confirm_replica_set(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let patch = match resource_version {
            Some(rv) => serde_json::json!({ "metadata": { "resourceVersion": rv } }),
            None => serde_json::json!({ "metadata": {} }),
        };
        async move { self.patch_replica_set(namespace, name, &patch).await }
    }

    fn delete_replica_set(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Evicts a pod through the Eviction API (PodDisruptionBudgets apply).
    fn evict_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Merge-patches a pod's labels and annotations (ephemeral metadata of its role).
    fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Reads a Service (blue-green Rollouts route through theirs); `None` when it is absent.
    fn get_service(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Service>, WriteError>> + Send;

    /// Lists the Services of a namespace.
    fn list_services(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<Service>, WriteError>> + Send;

    /// The Services of the Rollout's namespace that the Rollout names or that carry its
    /// managed-by annotation ([`Observed::wants_service`]), in name order. By default, those
    /// of [`ClusterAccess::list_services`].
    fn rollout_services(
        &self,
        rollout: &Rollout,
    ) -> impl Future<Output = Result<Vec<Service>, WriteError>> + Send {
        async move {
            let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
            Ok(self
                .list_services(ns)
                .await?
                .into_iter()
                .filter(|svc| Observed::wants_service(rollout, svc))
                .collect())
        }
    }

    /// Merge-patches a Service (its selector and managed-by annotation).
    fn patch_service(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Lists the pods a label selector matches (only read when a decision needs them).
    fn list_pods(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<Vec<Pod>, WriteError>> + Send;

    /// Reads a Rollout from the API server (not from a cache: the notifications driver must
    /// see the latest `notified` record before it sends); `None` when it is gone.
    fn get_rollout(
        &self,
        _namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Rollout>, WriteError>> + Send {
        let message = format!("Rollout {name}: reads not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Patches Rollout metadata; returns the new resourceVersion.
    fn patch_rollout(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<Option<String>, WriteError>> + Send;

    /// Patches the Rollout's status subresource; returns the new resourceVersion.
    fn patch_rollout_status(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<Option<String>, WriteError>> + Send;

    /// Lists the AnalysisRuns of a namespace that a Rollout created (they carry the
    /// `rollout-type` label).
    ///
    /// A watch cache may answer: a run's verdict only ever moves from running to final, so a
    /// view that lags holds the update back rather than moving it on, and a run missing from
    /// it is created again under the same name (the names follow from the runs seen), which
    /// the API server refuses as a conflict.
    fn list_analysis_runs(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<AnalysisRun>, WriteError>> + Send;

    /// The AnalysisRuns of [`ClusterAccess::list_analysis_runs`] that `rollout` controls.
    fn rollout_analysis_runs(
        &self,
        rollout: &Rollout,
    ) -> impl Future<Output = Result<Vec<AnalysisRun>, WriteError>> + Send {
        async move {
            let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
            Ok(self
                .list_analysis_runs(ns)
                .await?
                .into_iter()
                .filter(|run| controlled_by(&run.metadata, rollout))
                .collect())
        }
    }

    /// Reads an AnalysisTemplate (in `namespace`) or ClusterAnalysisTemplate; `None` when absent.
    fn get_analysis_template(
        &self,
        namespace: &str,
        key: &TemplateKey,
    ) -> impl Future<Output = Result<Option<AnalysisTemplateSpec>, WriteError>> + Send;

    fn create_analysis_run(
        &self,
        namespace: &str,
        run: &AnalysisRun,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// Merge-patches an AnalysisRun (terminate, annotations).
    fn patch_analysis_run(
        &self,
        namespace: &str,
        name: &str,
        merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    fn delete_analysis_run(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send;

    /// With `--aws-verify-target-group`: how many of `service`'s endpoints the AWS target groups
    /// bound to it have registered (`None` where AWS is not reached, as in the simulator).
    fn target_registration(
        &self,
        _service: &Service,
    ) -> impl Future<Output = Option<sluice_engine::target_registration::Registration>> + Send {
        std::future::ready(None)
    }

    /// Which API versions of the router kinds to speak (`--istio-api-version`,
    /// `--traffic-split-api-version`).
    fn router_versions(&self) -> ApiVersions {
        ApiVersions::default()
    }

    /// Reads a router object (a VirtualService, an Ingress, ...); `None` when it is absent.
    fn get_router_object(
        &self,
        _target: &ObjectRef,
    ) -> impl Future<Output = Result<Option<Value>, WriteError>> + Send {
        async { Ok(None) }
    }

    /// Lists the router objects of one kind in `namespace` that `label_selector` selects.
    fn list_router_objects(
        &self,
        _kind: RouterKind,
        _namespace: &str,
        _label_selector: &str,
    ) -> impl Future<Output = Result<Vec<Value>, WriteError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Creates a router object the Rollout owns (a canary Ingress, a TrafficSplit).
    fn create_router_object(
        &self,
        target: &ObjectRef,
        _object: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{target}: router objects are not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Replaces a router object; refused with a conflict when its resourceVersion is stale.
    fn replace_router_object(
        &self,
        target: &ObjectRef,
        _object: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{target}: router objects are not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Reads the object a Rollout's `workloadRef` names (a Deployment, ReplicaSet or
    /// PodTemplate); `None` when it is absent.
    fn get_workload(
        &self,
        _target: &WorkloadTarget,
    ) -> impl Future<Output = Result<Option<Value>, WriteError>> + Send {
        async { Ok(None) }
    }

    /// Replaces the Deployment a `workloadRef` names with its edited copy (its replicas); the
    /// copy carries the resourceVersion it was read at, so a stale one is refused.
    fn replace_deployment(
        &self,
        namespace: &str,
        name: &str,
        _object: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("deployment {namespace}/{name}: not writable here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Reads the StatefulSet a Rollout drives (`rollouts.sluice.dev/statefulset`) and the
    /// ControllerRevisions it controls; a missing one reads as `stateful_set: None`.
    fn get_stateful_set(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> impl Future<Output = Result<StatefulSetObserved, WriteError>> + Send {
        std::future::ready(Ok(StatefulSetObserved::default()))
    }

    /// Replaces the StatefulSet a Rollout drives with its edited copy (partition, template);
    /// the copy carries the resourceVersion it was read at, so a stale one is refused.
    fn replace_stateful_set(
        &self,
        namespace: &str,
        name: &str,
        _object: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("statefulset {namespace}/{name}: not writable here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Reads the DaemonSet a Rollout drives (`rollouts.sluice.dev/daemonset`) and the
    /// ControllerRevisions it controls; a missing one reads as `daemon_set: None`.
    fn get_daemon_set(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> impl Future<Output = Result<DaemonSetObserved, WriteError>> + Send {
        std::future::ready(Ok(DaemonSetObserved::default()))
    }

    /// Replaces the DaemonSet a Rollout drives with its edited copy (its template, on abort);
    /// the copy carries the resourceVersion it was read at, so a stale one is refused.
    fn replace_daemon_set(
        &self,
        namespace: &str,
        name: &str,
        _object: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("daemonset {namespace}/{name}: not writable here");
        async move { Err(WriteError::Api(message)) }
    }

    /// For a Rollout with config rollouts on (`rollouts.sluice.dev/config-rollout`): its
    /// copies and the hashes of what its template references. `None` where the controller
    /// runs without `--config-rollouts` (the Rollout then rolls out as Argo would).
    fn observe_config(
        &self,
        _rollout: &Rollout,
    ) -> impl Future<Output = Result<Option<ConfigObserved>, WriteError>> + Send {
        std::future::ready(Ok(None))
    }

    /// Makes `copy` of the ConfigMap or Secret `source`, if it still hashes to `hash`.
    fn copy_config(
        &self,
        _rollout: &Rollout,
        kind: ConfigKind,
        source: &str,
        _hash: &str,
        _copy: &str,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{} {source}: not copied here", kind.name());
        async move { Err(WriteError::Api(message)) }
    }

    /// Sets the owners of a copy, at the resourceVersion read.
    fn set_config_owners(
        &self,
        _namespace: &str,
        kind: ConfigKind,
        name: &str,
        _resource_version: Option<&str>,
        _owners: &[Owner],
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{} {name}: not writable here", kind.name());
        async move { Err(WriteError::Api(message)) }
    }

    /// Lists the Experiments of a namespace (a Rollout's experiment steps).
    fn list_experiments(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<Experiment>, WriteError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// The Experiments of [`ClusterAccess::list_experiments`] that `rollout` controls.
    fn rollout_experiments(
        &self,
        rollout: &Rollout,
    ) -> impl Future<Output = Result<Vec<Experiment>, WriteError>> + Send {
        async move {
            let ns = rollout.metadata.namespace.as_deref().unwrap_or_default();
            Ok(self
                .list_experiments(ns)
                .await?
                .into_iter()
                .filter(|e| controlled_by(&e.metadata, rollout))
                .collect())
        }
    }

    /// Creates the Experiment of an experiment step.
    fn create_experiment(
        &self,
        _namespace: &str,
        experiment: &Experiment,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!(
            "Experiment {}: not supported here",
            experiment.metadata.name.as_deref().unwrap_or_default()
        );
        async move { Err(WriteError::Api(message)) }
    }

    /// Merge-patches an Experiment: `spec.terminate` from a Rollout, the status from the
    /// Experiment loop (the kind has no status subresource: both go to the main resource).
    fn patch_experiment(
        &self,
        _namespace: &str,
        name: &str,
        _merge_patch: &Value,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("Experiment {name}: not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Deletes an Experiment with a uid precondition; an absent one is not an error.
    fn delete_experiment(
        &self,
        _namespace: &str,
        name: &str,
        _uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("Experiment {name}: not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Lists every ReplicaSet of a namespace: an Experiment's carry none of the labels the
    /// Rollout loop's cache selects on.
    fn list_replica_sets(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<ReplicaSet>, WriteError>> + Send {
        async {
            Err(WriteError::Api(
                "ReplicaSet lists: not supported here".into(),
            ))
        }
    }

    /// Lists the ReplicaSets of a namespace that match `selector` (a label selector's text),
    /// from the API server rather than a cache: what a reconcile reads after its last one met
    /// a stale view. By default every ReplicaSet of the namespace;
    /// the caller keeps only those the Rollout owns either way.
    fn list_replica_sets_matching(
        &self,
        namespace: &str,
        _selector: &str,
    ) -> impl Future<Output = Result<Vec<ReplicaSet>, WriteError>> + Send {
        self.list_replica_sets(namespace)
    }

    /// Lists every AnalysisRun of a namespace, unlike [`ClusterAccess::list_analysis_runs`]:
    /// an Experiment's runs carry no `rollout-type` label.
    fn list_every_analysis_run(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<AnalysisRun>, WriteError>> + Send {
        async {
            Err(WriteError::Api(
                "AnalysisRun lists: not supported here".into(),
            ))
        }
    }

    /// Creates the Service of an Experiment's template.
    fn create_service(
        &self,
        _namespace: &str,
        svc: &Service,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!(
            "Service {}: not supported here",
            svc.metadata.name.as_deref().unwrap_or_default()
        );
        async move { Err(WriteError::Api(message)) }
    }

    /// Deletes a Service with a uid precondition; an absent one is not an error.
    fn delete_service(
        &self,
        _namespace: &str,
        name: &str,
        _uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("Service {name}: not supported here");
        async move { Err(WriteError::Api(message)) }
    }

    /// Deletes a router object with a uid precondition; an absent object is not an error.
    fn delete_router_object(
        &self,
        target: &ObjectRef,
        _uid: Option<&str>,
    ) -> impl Future<Output = Result<(), WriteError>> + Send {
        let message = format!("{target}: router objects are not supported here");
        async move { Err(WriteError::Api(message)) }
    }
}

/// Whether `rollout` (by uid) is the controller owner of the object with `meta`.
pub fn controlled_by(meta: &ObjectMeta, rollout: &Rollout) -> bool {
    let uid = rollout.metadata.uid.as_deref();
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
}
