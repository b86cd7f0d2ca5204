//! What is compared of one controller's world at a settle point.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::ResourceExt as _;
use kube::api::ListParams;
use sluice_api::{AnalysisRun, Experiment, Rollout};
use sluice_engine::labels::{POD_TEMPLATE_HASH, REVISION};

use crate::harness::TestNamespace;

/// NGINX's annotation of the canary Ingress that carries the weight.
const CANARY_WEIGHT: &str = "nginx.ingress.kubernetes.io/canary-weight";

/// What is compared of one controller's world at a settle point. ReplicaSets, selectors,
/// AnalysisRuns and Experiments are named by revision, so that a difference reads the same in
/// both namespaces whatever hashes the templates have.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub phase: String,
    pub message: String,
    pub step_index: Option<i32>,
    pub abort: bool,
    pub paused: Vec<String>,
    pub conditions: Vec<(String, String, String)>,
    pub counts: (i32, i32, i32, i32),
    /// revision -> (spec replicas, whether it is the stable one, whether it is the current one)
    pub replica_sets: BTreeMap<String, (i32, bool, bool)>,
    /// Service -> revision its selector names
    pub selectors: BTreeMap<String, String>,
    /// The canary Ingress's weight, when NGINX routes the canary.
    pub canary_weight: Option<String>,
    /// AnalysisRun name (the hash as its revision) -> phase
    pub analysis_runs: BTreeMap<String, String>,
    /// Experiment name (the hash as its revision) -> phase
    pub experiments: BTreeMap<String, String>,
}

/// One look at a controller's world: what is compared, whether the controller has observed
/// the Rollout's generation, and what the ReplicaSet controller reports of each ReplicaSet.
#[derive(Debug)]
pub struct Look {
    pub snapshot: Snapshot,
    pub observed: bool,
    /// ReplicaSet name -> (status replicas, ready, available): not compared (the two sides'
    /// pods come and go at their own pace), but a settle point waits for it to be quiet too,
    /// since a status may report the pods' last change up to one status-write interval later.
    pub pods: BTreeMap<String, (i32, i32, i32)>,
}

impl Snapshot {
    pub async fn take(ns: &TestNamespace) -> anyhow::Result<Look> {
        let ro: Rollout = crate::rollouts(ns).get("web").await?;
        let rss: Vec<ReplicaSet> = ns
            .api::<ReplicaSet>()
            .list(&ListParams::default())
            .await?
            .items;
        let services: Vec<Service> = ns
            .api::<Service>()
            .list(&ListParams::default())
            .await?
            .items;
        let ingresses: Vec<Ingress> = ns
            .api::<Ingress>()
            .list(&ListParams::default())
            .await?
            .items;
        let canary_weight = ingresses
            .iter()
            .filter(|i| i.name_any() != "web")
            .find_map(|i| i.annotations().get(CANARY_WEIGHT).cloned());
        let runs: Vec<(String, String)> = ns
            .api::<AnalysisRun>()
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(|r| {
                let phase = r.status.as_ref().and_then(|s| s.phase.clone());
                (r.name_any(), format!("{phase:?}"))
            })
            .collect();
        let experiments: Vec<(String, String)> = ns
            .api::<Experiment>()
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(|e| {
                let phase = e.status.as_ref().and_then(|s| s.phase.clone());
                (e.name_any(), format!("{phase:?}"))
            })
            .collect();
        let status = ro.status.clone().unwrap_or_default();
        let observed = status.observed_generation == ro.metadata.generation.map(|g| g.to_string());
        let mut revision_of = BTreeMap::new();
        let mut replica_sets = BTreeMap::new();
        // The Rollout's own ReplicaSets: an Experiment's have no revision.
        for rs in rss
            .iter()
            .filter(|rs| rs.annotations().contains_key(REVISION))
        {
            let meta = &rs.metadata;
            let hash = meta
                .labels
                .as_ref()
                .and_then(|l| l.get(POD_TEMPLATE_HASH))
                .cloned()
                .unwrap_or_default();
            let revision = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(REVISION))
                .cloned()
                .unwrap_or_default();
            revision_of.insert(hash.clone(), revision.clone());
            let spec = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            replica_sets.insert(
                revision,
                (
                    spec,
                    status.stable_rs.as_deref() == Some(hash.as_str()),
                    status.current_pod_hash.as_deref() == Some(hash.as_str()),
                ),
            );
        }
        let selectors = services
            .iter()
            .filter_map(|svc| {
                let hash = svc
                    .spec
                    .as_ref()?
                    .selector
                    .as_ref()?
                    .get(POD_TEMPLATE_HASH)?;
                let revision = revision_of.get(hash).cloned().unwrap_or_else(|| "?".into());
                Some((svc.metadata.name.clone().unwrap_or_default(), revision))
            })
            .collect();
        let mut conditions: Vec<(String, String, String)> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.type_
                        .as_ref()
                        .map(|t| format!("{t:?}"))
                        .unwrap_or_default(),
                    c.status
                        .as_ref()
                        .map(|s| format!("{s:?}"))
                        .unwrap_or_default(),
                    c.reason.clone().unwrap_or_default(),
                )
            })
            // A `Paused` condition that is False says only that a pause was once seen and has
            // ended. Argo writes it only if one of its passes fell inside the pause, which for
            // a pause of a second or two depends on the load of the machine, so an ended pause
            // and no pause read the same here.
            .filter(|(type_, status, _)| !(type_ == "Paused" && status == "False"))
            .collect();
        conditions.sort();
        let mut paused: Vec<String> = status
            .pause_conditions
            .iter()
            .flatten()
            .map(|p| format!("{:?}", p.reason))
            .collect();
        paused.sort();
        let snapshot = Snapshot {
            phase: status
                .phase
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            message: status.message.clone().unwrap_or_default(),
            step_index: status.current_step_index,
            abort: status.abort == Some(true),
            paused,
            conditions,
            counts: (
                status.replicas.unwrap_or(0),
                status.updated_replicas.unwrap_or(0),
                status.ready_replicas.unwrap_or(0),
                status.available_replicas.unwrap_or(0),
            ),
            replica_sets,
            selectors,
            canary_weight,
            analysis_runs: by_revision(&runs, &revision_of),
            experiments: by_revision(&experiments, &revision_of),
        };
        let pods = rss
            .iter()
            .map(|rs| {
                let s = rs.status.as_ref();
                (
                    rs.name_any(),
                    (
                        s.map_or(0, |s| s.replicas),
                        s.and_then(|s| s.ready_replicas).unwrap_or(0),
                        s.and_then(|s| s.available_replicas).unwrap_or(0),
                    ),
                )
            })
            .collect();
        Ok(Look {
            snapshot,
            observed,
            pods,
        })
    }
}

/// Names with a ReplicaSet's hash in them (`web-<hash>-<revision>-<step>`), the hash written
/// as the revision it is.
fn by_revision(
    named: &[(String, String)],
    revision_of: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    named
        .iter()
        .map(|(name, phase)| {
            let name = revision_of
                .iter()
                .filter(|(hash, _)| !hash.is_empty())
                .fold(name.clone(), |name, (hash, revision)| {
                    name.replace(hash.as_str(), &format!("r{revision}"))
                });
            (name, phase.clone())
        })
        .collect()
}
