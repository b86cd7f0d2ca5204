//! The Argo-shaped infos of the watched objects: of every Rollout of a namespace (shallow, as
//! Argo's list: ReplicaSets and pods only) and of one Rollout (with its AnalysisRuns and
//! Experiments). Built from the shared `RolloutInfo` model that `get rollout` renders.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use sluice_api::experiment::Experiment;
use sluice_engine::labels::POD_TEMPLATE_HASH;

use super::argo_json;
use super::cache::{Cache, in_namespace};
use crate::info::RolloutInfo;

/// The info of every Rollout of `namespace`, by name.
pub fn list(cache: &Cache, namespace: &str, now: Timestamp) -> Vec<(String, Value)> {
    let replica_sets = in_namespace(&cache.replica_sets, namespace);
    let pods = in_namespace(&cache.pods, namespace);
    // Grouped once, so that a namespace of many Rollouts costs one pass over its objects.
    let mut by_owner: HashMap<&str, Vec<ReplicaSet>> = HashMap::new();
    for rs in &replica_sets {
        let owner = rs
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true) && r.kind == "Rollout");
        if let Some(owner) = owner {
            by_owner
                .entry(owner.uid.as_str())
                .or_default()
                .push(ReplicaSet::clone(rs));
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
    let replica_sets = owned(in_namespace(&cache.replica_sets, namespace));
    let pods = owned(in_namespace(&cache.pods, namespace));
    let runs = owned(in_namespace(&cache.runs, namespace));
    let experiments: Vec<Experiment> = owned(in_namespace(&cache.experiments, namespace));
    let info = RolloutInfo::new(&rollout, &replica_sets, &pods, now)
        .with_experiments(&rollout, &experiments, &replica_sets, &pods, &runs, now)
        .with_analysis_runs(&rollout, &runs);
    Some(argo_json::rollout_info(&rollout, &info, &runs))
}

fn owned<K: Clone>(objects: Vec<Arc<K>>) -> Vec<K> {
    objects.iter().map(|o| K::clone(o)).collect()
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
fn pods_of(replica_sets: &[ReplicaSet], by_hash: &HashMap<&str, Vec<&Pod>>) -> Vec<Pod> {
    replica_sets
        .iter()
        .filter_map(|rs| rs.metadata.labels.as_ref()?.get(POD_TEMPLATE_HASH))
        .flat_map(|hash| by_hash.get(hash.as_str()).into_iter().flatten())
        .map(|pod| Pod::clone(pod))
        .collect()
}

/// The Rollouts of `namespace` as `RolloutWatchEvent`s for the list's stream.
pub fn watch_event(info: Value) -> Value {
    serde_json::json!({"result": {"type": "Updated", "rolloutInfo": info}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_events_are_wrapped_as_grpc_gateway_does() {
        let event = watch_event(serde_json::json!({"objectMeta": {"name": "a"}}));
        assert_eq!(event["result"]["type"], "Updated");
        assert_eq!(event["result"]["rolloutInfo"]["objectMeta"]["name"], "a");
    }
}
