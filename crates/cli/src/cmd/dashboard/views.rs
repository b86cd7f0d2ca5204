//! The Argo-shaped infos of the watched objects: of every Rollout of a namespace (shallow, as
//! Argo's list: ReplicaSets and pods only) and of one Rollout (with its AnalysisRuns and
//! Experiments). Built from the shared `RolloutInfo` model that `get rollout` renders.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::Store;
use serde_json::Value;
use sluice_api::experiment::Experiment;
use sluice_engine::labels::POD_TEMPLATE_HASH;

use super::argo_json;
use super::brief::ReplicaSetBrief;
use super::cache::{Cache, in_namespace};
use crate::info::{ReplicaSetFacts, RolloutInfo, is_controlled_by, is_controlled_by_kind};

/// The info of every Rollout of `namespace`, by name.
pub fn list(cache: &Cache, namespace: &str, now: Timestamp) -> Vec<(String, Value)> {
    let replica_sets = in_namespace(&cache.replica_sets, namespace);
    let pods = in_namespace(&cache.pods, namespace);
    // Grouped once, so that a namespace of many Rollouts costs one pass over its objects.
    let mut by_owner: HashMap<&str, Vec<&ReplicaSetBrief>> = HashMap::new();
    for rs in &replica_sets {
        let owner = rs
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true) && r.kind == "Rollout");
        if let Some(owner) = owner {
            by_owner.entry(owner.uid.as_str()).or_default().push(rs);
        }
    }
    let pods_by_hash = by_hash(&pods);
    let mut rollouts = in_namespace(&cache.rollouts, namespace);
    rollouts.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    rollouts
        .iter()
        .map(|rollout| {
            let uid = rollout.metadata.uid.as_deref().unwrap_or_default();
            let own = by_owner.get(uid).map(Vec::as_slice).unwrap_or_default();
            let own_pods = pods_of(own, &pods_by_hash);
            let info = RolloutInfo::new(rollout, own, &own_pods, now);
            let name = rollout.metadata.name.clone().unwrap_or_default();
            (name, argo_json::rollout_info(rollout, &info, &[]))
        })
        .collect()
}

/// The full info of Rollout `name` of `namespace`; `None` when there is no such Rollout.
pub fn one(cache: &Cache, namespace: &str, name: &str, now: Timestamp) -> Option<Value> {
    let rollout = in_namespace(&cache.rollouts, namespace)
        .into_iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))?;
    // Only this Rollout's objects (and its Experiments') are copied out of the stores: a
    // namespace of many Rollouts holds thousands of ReplicaSets, and a page follows one.
    let experiments: Vec<Experiment> = copies(&cache.experiments, namespace, |meta| {
        is_controlled_by(meta, &rollout.metadata)
    });
    let mine = |meta: &ObjectMeta| {
        is_controlled_by(meta, &rollout.metadata)
            || experiments
                .iter()
                .any(|e| is_controlled_by_kind(meta, "Experiment", &e.metadata))
    };
    let replica_sets: Vec<ReplicaSetBrief> = copies(&cache.replica_sets, namespace, mine);
    let runs = copies(&cache.runs, namespace, mine);
    let namespace_pods = in_namespace(&cache.pods, namespace);
    let pods: Vec<Pod> = pods_of(&replica_sets, &by_hash(&namespace_pods))
        .into_iter()
        .cloned()
        .collect();
    let info = RolloutInfo::new(&rollout, &replica_sets, &pods, now)
        .with_experiments(&rollout, &experiments, &replica_sets, &pods, &runs, now)
        .with_analysis_runs(&rollout, &runs);
    Some(argo_json::rollout_info(&rollout, &info, &runs))
}

/// Copies of the objects of `namespace` whose metadata `keep` accepts.
fn copies<K>(store: &Store<K>, namespace: &str, keep: impl Fn(&ObjectMeta) -> bool) -> Vec<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state_filter(|object| {
            let meta = object.meta();
            meta.namespace.as_deref() == Some(namespace) && keep(meta)
        })
        .iter()
        .map(|o| K::clone(o))
        .collect()
}

fn by_hash(pods: &[Arc<Pod>]) -> HashMap<&str, Vec<&Pod>> {
    let mut map: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for pod in pods {
        if let Some(hash) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_TEMPLATE_HASH))
        {
            map.entry(hash.as_str()).or_default().push(pod);
        }
    }
    map
}

/// The pods of the pod-template hashes of `replica_sets`.
fn pods_of<'p, R: ReplicaSetFacts>(
    replica_sets: &[R],
    by_hash: &HashMap<&str, Vec<&'p Pod>>,
) -> Vec<&'p Pod> {
    replica_sets
        .iter()
        .filter_map(|rs| rs.pod_hash())
        .flat_map(|hash| by_hash.get(hash).into_iter().flatten())
        .copied()
        .collect()
}

/// A Rollout's info (as JSON text) as a `RolloutWatchEvent` line of the list's stream.
pub fn watch_event(info: &str) -> String {
    format!("{{\"result\":{{\"type\":\"Updated\",\"rolloutInfo\":{info}}}}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_events_are_wrapped_as_grpc_gateway_does() {
        let event = watch_event(&serde_json::json!({"objectMeta": {"name": "a"}}).to_string());
        let event: Value = serde_json::from_str(&event).unwrap();
        assert_eq!(event["result"]["type"], "Updated");
        assert_eq!(event["result"]["rolloutInfo"]["objectMeta"]["name"], "a");
    }
}
