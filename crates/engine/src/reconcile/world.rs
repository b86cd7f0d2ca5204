//! The world of one reconcile: the Rollout, the prepared spec, the time, and its ReplicaSets
//! sorted into their roles (new, stable, older), with what else was observed.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::Rollout;

use super::spec::Prepared;
use sluice_routers::kinds::{ApiVersions, ObjectRef};

use crate::labels::POD_TEMPLATE_HASH;
use crate::observed::{AnalysisTemplates, Observed, ReplicaSetExt};
use crate::replicaset;

/// The ReplicaSets of one reconcile, sorted into their roles.
pub(super) struct World<'a> {
    pub(super) ro: &'a Rollout,
    /// What validation and hashing established about the spec.
    pub(super) spec: &'a Prepared,
    pub(super) now: Timestamp,
    pub(super) new_rs: Option<&'a ReplicaSet>,
    pub(super) stable_rs: Option<&'a ReplicaSet>,
    /// Neither new nor stable, oldest revision first.
    pub(super) older: Vec<&'a ReplicaSet>,
    pub(super) all: Vec<&'a ReplicaSet>,
    pub(super) pods: &'a [Pod],
    pub(super) services: &'a [Service],
    pub(super) analysis_runs: &'a [AnalysisRun],
    pub(super) analysis_templates: &'a AnalysisTemplates,
    pub(super) router_objects: &'a BTreeMap<ObjectRef, serde_json::Value>,
    pub(super) router_versions: &'a ApiVersions,
    /// Experiments the Rollout's experiment steps made.
    pub(super) experiments: &'a [sluice_api::experiment::Experiment],
    /// Answers of the step plugin calls made in this reconcile.
    pub(super) step_plugin_answers: &'a [crate::StepPluginAnswer],
    pub(super) target_registration: Option<&'a crate::target_registration::Registration>,
    /// The weight the router objects give each pod-template hash right now (traffic routing
    /// only): no ReplicaSet is scaled below what it needs.
    pub(super) routed_hashes: BTreeMap<String, i32>,
    /// The canary weight the router objects route now (the largest, over all routers).
    pub(super) routed_canary_weight: i32,
    /// The revision of the new ReplicaSet, once the reconcile has settled it.
    pub(super) revision: i64,
}

impl<'a> World<'a> {
    pub(super) fn new(observed: &'a Observed, spec: &'a Prepared, now: Timestamp) -> Self {
        let status = observed.rollout.status.as_ref();
        let stable_hash = status.and_then(|s| s.stable_rs.as_deref());
        let all: Vec<&ReplicaSet> = observed
            .replica_sets
            .iter()
            .filter(|rs| !rs.is_being_deleted())
            .collect();
        let new_rs = all
            .iter()
            .copied()
            .find(|rs| rs.pod_hash() == Some(spec.pod_hash.as_str()));
        let stable_rs =
            stable_hash.and_then(|h| all.iter().copied().find(|rs| rs.pod_hash() == Some(h)));
        let mut older: Vec<&ReplicaSet> = all
            .iter()
            .copied()
            .filter(|rs| {
                let h = rs.pod_hash();
                h != Some(spec.pod_hash.as_str()) && (stable_hash.is_none() || h != stable_hash)
            })
            .collect();
        older.sort_by_key(|rs| (rs.revision().unwrap_or(0), rs.name().to_string()));
        Self {
            ro: &observed.rollout,
            spec,
            now,
            new_rs,
            stable_rs,
            older,
            all,
            pods: &observed.pods,
            services: &observed.services,
            analysis_runs: &observed.analysis_runs,
            analysis_templates: &observed.analysis_templates,
            router_objects: &observed.router_objects,
            router_versions: &observed.router_versions,
            experiments: &observed.experiments,
            step_plugin_answers: &observed.step_plugin_answers,
            target_registration: observed.target_registration.as_ref(),
            routed_hashes: BTreeMap::new(),
            routed_canary_weight: 0,
            revision: 0,
        }
    }

    /// Hash of the stable ReplicaSet, when there is one to keep new pods away from.
    pub(super) fn stable_hash(&self) -> Option<&str> {
        self.stable_rs.and_then(|rs| rs.pod_hash())
    }

    pub(super) fn rollout_name(&self) -> &str {
        self.ro.metadata.name.as_deref().unwrap_or_default()
    }

    pub(super) fn new_rs_name(&self) -> String {
        replicaset::replica_set_name(self.rollout_name(), &self.spec.pod_hash)
    }

    /// The canary and stable Services that routers weigh and selectors point: `canaryService`
    /// and `stableService`, or the ping-pong pair in their current roles. ALB always uses the
    /// ping-pong pair when there is one (`prefer_ping_pong`); the other routers only when
    /// neither canaryService nor stableService is named, as in Argo.
    pub(super) fn service_roles(&self, prefer_ping_pong: bool) -> (String, String) {
        let canary = self.spec.canary();
        let named = |s: &Option<String>| s.as_deref().filter(|n| !n.is_empty()).is_some();
        let plain = !named(&canary.canary_service) && !named(&canary.stable_service);
        match super::ping_pong::roles(canary, self.ro.status.as_ref()) {
            Some(roles) if prefer_ping_pong || plain => roles,
            _ => (
                canary.canary_service.clone().unwrap_or_default(),
                canary.stable_service.clone().unwrap_or_default(),
            ),
        }
    }

    /// The pod-template hashes the canary's Services select now (of a ping-pong pair, the
    /// stable one: the canary's keeps selecting the previous stable pods after a promotion,
    /// at weight 0, until the next update moves it).
    pub(super) fn service_hashes(&self) -> Vec<String> {
        let canary = self.spec.canary();
        let ping_pong_stable =
            super::ping_pong::roles(canary, self.ro.status.as_ref()).map(|r| r.1);
        let names = [
            canary.canary_service.as_ref(),
            canary.stable_service.as_ref(),
            ping_pong_stable.as_ref(),
        ];
        self.services
            .iter()
            .filter(|s| names.contains(&s.metadata.name.as_ref()))
            .filter_map(|s| s.spec.as_ref()?.selector.as_ref()?.get(POD_TEMPLATE_HASH))
            .cloned()
            .collect()
    }

    /// The fewest pods `rs` may have while the router objects send it their current weight.
    pub(super) fn traffic_floor(&self, rs: &ReplicaSet) -> i32 {
        let Some(weight) = rs.pod_hash().and_then(|h| self.routed_hashes.get(h)) else {
            return 0;
        };
        self.pods_for_weight(*weight)
    }

    /// ceil(weight × replicas / maxTrafficWeight): the pods a weight needs.
    pub(super) fn pods_for_weight(&self, weight: i32) -> i32 {
        let max = self
            .spec
            .canary()
            .traffic_routing
            .as_ref()
            .map_or(100, |t| t.max_traffic_weight())
            .max(1);
        let need = (i64::from(weight.max(0)) * i64::from(self.spec.replicas) + i64::from(max) - 1)
            / i64::from(max);
        i32::try_from(need).unwrap_or(i32::MAX)
    }

    pub(super) fn max_revision(&self, excluding_new: bool) -> i64 {
        self.all
            .iter()
            .filter(|rs| !(excluding_new && rs.pod_hash() == Some(self.spec.pod_hash.as_str())))
            .filter_map(|rs| rs.revision())
            .max()
            .unwrap_or(0)
    }
}
