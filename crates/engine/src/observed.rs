//! The observed world of one Rollout: everything a decision needs, gathered by the I/O layer
//! before the engine runs. Plain values only.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::common::AnalysisTemplateRef;
use sluice_api::rollout::{Rollout, RolloutAnalysis};

use sluice_routers::kinds::{ApiVersions, ObjectRef};

use crate::labels::MANAGED_BY;
/// Kept here too: the engine's modules ask the observed world for ReplicaSets and read them.
pub use crate::replicaset::ReplicaSetExt;

/// One Rollout and the objects it owns, as seen at `now`.
#[derive(Debug, Clone)]
pub struct Observed {
    pub rollout: Rollout,
    /// ReplicaSets controlled by this Rollout (owner reference with `controller: true`).
    pub replica_sets: Vec<ReplicaSet>,
    /// Pods of the Rollout. Only needed (and only gathered) while a restart is pending or
    /// some pods are to get a new role's ephemeral metadata; see [`Observed::needs_pods`].
    pub pods: Vec<Pod>,
    /// The Services the Rollout names (blue-green active and preview, canary and stable), as
    /// found (absent ones are simply missing from the list), and those of its namespace that
    /// carry its managed-by annotation.
    pub services: Vec<Service>,
    /// AnalysisRuns controlled by this Rollout. Gathered only for a Rollout that has analysis
    /// (see [`Observed::analysis_template_refs`]); read fresh, so a decision never rests on a
    /// run's stale phase.
    pub analysis_runs: Vec<AnalysisRun>,
    /// The templates the Rollout's analyses name, and the templates those nest. A missing one
    /// is simply absent; the engine reports it.
    pub analysis_templates: AnalysisTemplates,
    /// The router objects the Rollout's traffic routing names ([`crate::router_references`]),
    /// as found; a missing one is absent.
    pub router_objects: BTreeMap<ObjectRef, serde_json::Value>,
    /// Which API versions of the router kinds this cluster serves (controller flags).
    pub router_versions: ApiVersions,
    /// Experiments controlled by this Rollout (gathered only for a Rollout with experiment
    /// steps, see [`Observed::has_experiment_steps`]).
    pub experiments: Vec<sluice_api::experiment::Experiment>,
    /// The object the Rollout's `spec.workloadRef` names ([`crate::workload::target`]), as
    /// read; `None` without a reference or when it is absent (the engine reports that).
    pub workload: Option<serde_json::Value>,
    /// The StatefulSet a Rollout with `rollouts.sluice.dev/statefulset` drives, and its
    /// ControllerRevisions; `None` for any other Rollout.
    pub stateful_set: Option<StatefulSetObserved>,
    /// The DaemonSet a Rollout drives (`rollouts.sluice.dev/daemonset`), with its
    /// ControllerRevisions; `None` for every other Rollout. Its pods are in `pods`.
    pub daemon_set: Option<DaemonSetObserved>,
    /// For a Rollout with `rollouts.sluice.dev/config-rollout: "true"`: the hashes of the
    /// ConfigMaps and Secrets its template references, and its copies of them; `None` for
    /// every other Rollout.
    pub config: Option<crate::config_copies::ConfigObserved>,
    /// Since when the controller has held back a status change that only reports progress
    /// (see [`crate::Plan::progress_held`]), if it holds one: the controller's memory, not the
    /// cluster's. `None` when nothing is held.
    pub progress_held_since: Option<Timestamp>,
    /// The answers of the step plugin calls an earlier decision of this reconcile asked for
    /// ([`crate::Plan::step_plugin_calls`]); empty on the first decision.
    pub step_plugin_answers: Vec<crate::StepPluginAnswer>,
    /// With `--aws-verify-target-group`: whether the AWS target groups bound to the Service
    /// that now selects the new pods have them all registered (gathered only when
    /// [`crate::target_registration::wanted`] names a Service and older pods are still up).
    pub target_registration: Option<crate::target_registration::Registration>,
    pub now: Timestamp,
}

/// A StatefulSet and its ControllerRevisions, as the controller read them for a Rollout that
/// opted in ([`crate::statefulset::STATEFULSET`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatefulSetObserved {
    /// The StatefulSet the annotation names; `None` when it does not exist.
    pub stateful_set: Option<serde_json::Value>,
    /// The ControllerRevisions of the namespace that the StatefulSet controls: each holds a
    /// template the StatefulSet had (`data.spec.template`), which an abort restores.
    pub revisions: Vec<serde_json::Value>,
}

/// A DaemonSet and its ControllerRevisions, as the controller read them for a Rollout that
/// opted in ([`crate::daemonset::DAEMONSET`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaemonSetObserved {
    /// The DaemonSet the annotation names; `None` when it does not exist.
    pub daemon_set: Option<serde_json::Value>,
    /// The ControllerRevisions of the namespace that the DaemonSet controls: the newest is
    /// the template its new pods are made from, each holds a template an abort may restore.
    pub revisions: Vec<serde_json::Value>,
}

/// Which template a reference names: namespaced AnalysisTemplate or ClusterAnalysisTemplate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TemplateKey {
    pub cluster_scope: bool,
    pub name: String,
}

impl TemplateKey {
    pub fn of(r: &AnalysisTemplateRef) -> Self {
        Self {
            cluster_scope: r.is_cluster_scoped(),
            name: r.template_name.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for TemplateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.cluster_scope {
            "ClusterAnalysisTemplate"
        } else {
            "AnalysisTemplate"
        };
        write!(f, "{kind} \"{}\"", self.name)
    }
}

/// Dereferenced analysis templates by reference.
pub type AnalysisTemplates = BTreeMap<TemplateKey, AnalysisTemplateSpec>;

impl Observed {
    /// A Rollout seen at `now` with nothing else observed yet; fill in the rest with struct
    /// update syntax (`Observed { services, ..Observed::new(rollout, now) }`).
    pub fn new(rollout: Rollout, now: Timestamp) -> Self {
        Observed {
            rollout,
            replica_sets: Vec::new(),
            pods: Vec::new(),
            services: Vec::new(),
            analysis_runs: Vec::new(),
            analysis_templates: Default::default(),
            router_objects: BTreeMap::new(),
            router_versions: Default::default(),
            experiments: Vec::new(),
            workload: None,
            stateful_set: None,
            daemon_set: None,
            config: None,
            progress_held_since: None,
            step_plugin_answers: Vec::new(),
            target_registration: None,
            now,
        }
    }

    /// Whether the Rollout's steps run Experiments (only then are they gathered).
    pub fn has_experiment_steps(rollout: &Rollout) -> bool {
        rollout
            .spec
            .strategy
            .as_ref()
            .and_then(|s| s.canary.as_ref())
            .and_then(|c| c.steps.as_ref())
            .is_some_and(|steps| steps.iter().any(|s| s.experiment.is_some()))
    }

    /// Names of the Services the Rollout routes traffic through: blue-green's active and
    /// preview Services, a canary's canary and stable Services and ping-pong pair.
    pub fn service_names(rollout: &Rollout) -> Vec<String> {
        let Some(strategy) = rollout.spec.strategy.as_ref() else {
            return Vec::new();
        };
        let bg = strategy.blue_green.as_ref();
        let canary = strategy.canary.as_ref();
        [
            bg.and_then(|b| b.active_service.as_ref()),
            bg.and_then(|b| b.preview_service.as_ref()),
            canary.and_then(|c| c.canary_service.as_ref()),
            canary.and_then(|c| c.stable_service.as_ref()),
            canary
                .and_then(|c| c.ping_pong.as_ref())
                .and_then(|p| p.ping_service.as_ref()),
            canary
                .and_then(|c| c.ping_pong.as_ref())
                .and_then(|p| p.pong_service.as_ref()),
        ]
        .into_iter()
        .flatten()
        .filter(|n| !n.is_empty())
        .cloned()
        .collect()
    }

    /// Whether a Service of the Rollout's namespace belongs in [`Observed::services`]: the
    /// Rollout names it, or it carries the Rollout's managed-by annotation (a Service the
    /// Rollout may have to give back).
    pub fn wants_service(rollout: &Rollout, service: &Service) -> bool {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let managed_by = service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MANAGED_BY));
        managed_by.is_some() && managed_by == rollout.metadata.name.as_ref()
            || Self::service_names(rollout).iter().any(|n| n == name)
    }

    /// The templates the Rollout's analyses reference directly (steps, background, blue-green
    /// pre- and post-promotion). Empty for a Rollout without analysis: then no AnalysisRun is
    /// read for it at all. Nested templates are found by following each template's
    /// `templates` list ([`nested_template_refs`]).
    pub fn analysis_template_refs(rollout: &Rollout) -> Vec<TemplateKey> {
        let analyses = rollout_analyses(rollout);
        let mut keys: Vec<TemplateKey> = analyses
            .into_iter()
            .flat_map(|a| a.templates.iter().flatten())
            .map(TemplateKey::of)
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Whether the decision needs the Rollout's pods: while `spec.restartAt` has passed and is
    /// not yet recorded as done, and while the ephemeral metadata recorded on one of its
    /// `replica_sets` differs from what that ReplicaSet's role needs. Pods are listed on
    /// demand, never cached cluster-wide.
    pub fn needs_pods(rollout: &Rollout, replica_sets: &[ReplicaSet], now: Timestamp) -> bool {
        Self::restart_pending(rollout, now) || Self::pod_metadata_pending(rollout, replica_sets)
    }

    /// Whether some ReplicaSet's pods are to get the ephemeral metadata of a new role.
    /// Decided from the ReplicaSets alone, exactly as the reconcile decides it, so the pods
    /// are there whenever the reconcile patches them.
    fn pod_metadata_pending(rollout: &Rollout, replica_sets: &[ReplicaSet]) -> bool {
        if !crate::ephemeral::in_use(rollout, replica_sets) {
            return false;
        }
        crate::pod_hash::current_pod_hash(rollout, replica_sets).is_some_and(|pod_hash| {
            !crate::ephemeral::out_of_date(rollout, replica_sets, &pod_hash).is_empty()
        })
    }

    fn restart_pending(rollout: &Rollout, now: Timestamp) -> bool {
        let Some(at) = &rollout.spec.restart_at else {
            return false;
        };
        let done = rollout
            .status
            .as_ref()
            .and_then(|s| s.restarted_at.as_ref())
            == Some(at);
        !done && at.0 <= now
    }
}

/// Every analysis a Rollout declares: canary background analysis and `analysis` steps,
/// blue-green pre- and post-promotion analysis.
pub fn rollout_analyses(rollout: &Rollout) -> Vec<&RolloutAnalysis> {
    let Some(strategy) = rollout.spec.strategy.as_ref() else {
        return Vec::new();
    };
    let mut analyses = Vec::new();
    if let Some(c) = &strategy.canary {
        analyses.extend(c.analysis.as_ref().map(|b| &b.analysis));
        for step in c.steps.iter().flatten() {
            analyses.extend(step.analysis.as_ref());
        }
    }
    if let Some(bg) = &strategy.blue_green {
        analyses.extend(bg.pre_promotion_analysis.as_ref());
        analyses.extend(bg.post_promotion_analysis.as_ref());
    }
    analyses
}

/// Whether the Rollout names the template `key` directly (in background, step or blue-green
/// analysis), so that a change to that template should wake the Rollout up.
pub fn references_template(rollout: &Rollout, key: &TemplateKey) -> bool {
    rollout_analyses(rollout)
        .into_iter()
        .flat_map(|a| a.templates.iter().flatten())
        .any(|r| TemplateKey::of(r) == *key)
}

/// The templates a template nests.
pub fn nested_template_refs(spec: &AnalysisTemplateSpec) -> Vec<TemplateKey> {
    spec.templates
        .iter()
        .flatten()
        .map(TemplateKey::of)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout(strategy: serde_json::Value) -> Rollout {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"strategy": strategy}
        }))
        .unwrap()
    }

    fn key(cluster_scope: bool, name: &str) -> TemplateKey {
        TemplateKey {
            cluster_scope,
            name: name.into(),
        }
    }

    #[test]
    fn finds_templates_named_anywhere_in_the_strategy() {
        let canary = rollout(serde_json::json!({"canary": {
            "analysis": {"templates": [{"templateName": "background"}]},
            "steps": [{"setWeight": 10}, {"analysis": {"templates": [
                {"templateName": "step", "clusterScope": true}
            ]}}]
        }}));
        assert!(references_template(&canary, &key(false, "background")));
        assert!(references_template(&canary, &key(true, "step")));
        assert!(!references_template(&canary, &key(false, "step")));
        assert!(!references_template(&canary, &key(false, "other")));

        let blue_green = rollout(serde_json::json!({"blueGreen": {
            "activeService": "active",
            "prePromotionAnalysis": {"templates": [{"templateName": "pre"}]},
            "postPromotionAnalysis": {"templates": [{"templateName": "post"}]}
        }}));
        assert!(references_template(&blue_green, &key(false, "pre")));
        assert!(references_template(&blue_green, &key(false, "post")));
        assert!(!references_template(
            &rollout(serde_json::json!({})),
            &key(false, "pre")
        ));
    }
}
