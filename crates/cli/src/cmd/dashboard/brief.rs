//! The compact ReplicaSet the dashboard's cache keeps. A namespace of 1,000 Rollouts holds
//! about 11,000 ReplicaSets at the default history limit, and the pages read only their
//! metadata, counts and images; the API's `ReplicaSet` type holds every field of the pod
//! template inline, about 9 KB each in memory even for a one-container template. This type is
//! read straight from the API server's JSON, so the rest is never materialised: about 2.4 KB
//! each (measured on the soak's ReplicaSets, 11,000 of them: 24 MiB rather than 95).

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ReplicaSetStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;

use crate::info::{ReplicaSetFacts, replica_set};

/// A ReplicaSet as the dashboard keeps it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ReplicaSetBrief {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<Spec>,
    /// The API's own status type: a few counts and the conditions.
    #[serde(default)]
    status: Option<ReplicaSetStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Spec {
    replicas: Option<i32>,
    template: Option<Template>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Template {
    spec: Option<PodSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct PodSpec {
    #[serde(default)]
    containers: Vec<Container>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Container {
    image: Option<String>,
}

impl ReplicaSetFacts for ReplicaSetBrief {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn desired(&self) -> i32 {
        replica_set::desired(self.spec.as_ref().and_then(|s| s.replicas))
    }

    fn current(&self) -> i32 {
        replica_set::current_and_available(self.status.as_ref()).0
    }

    fn available(&self) -> i32 {
        replica_set::current_and_available(self.status.as_ref()).1
    }

    fn images(&self) -> Vec<String> {
        self.spec
            .iter()
            .filter_map(|s| s.template.as_ref()?.spec.as_ref())
            .flat_map(|s| &s.containers)
            .filter_map(|c| c.image.clone())
            .collect()
    }
}

/// Watched and listed at the ReplicaSets' own API (`apps/v1`, `replicasets`).
impl Resource for ReplicaSetBrief {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ReplicaSet".into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "apps".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        "replicasets".into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::json;

    use super::*;
    use crate::info::fixtures;

    /// Every ReplicaSet of the `get` fixtures reads the same through the brief as through the
    /// API's type.
    #[test]
    fn the_brief_reads_as_the_full_replica_set() {
        let (_, replica_sets, _) = fixtures::canary_world();
        let (_, routed, _) = fixtures::routed_canary_world();
        let mut all: Vec<ReplicaSet> = replica_sets.into_iter().chain(routed).collect();
        all.push(serde_json::from_value(json!({"metadata": {"name": "bare"}})).unwrap());
        all.push(
            serde_json::from_value(json!({
                "metadata": {"name": "two", "annotations": {"rollout.argoproj.io/revision": "4"}},
                "spec": {"replicas": 0, "selector": {},
                         "template": {"spec": {"containers": [
                             {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                             {"name": "b"}]}}},
                "status": {"replicas": 2, "availableReplicas": 1, "readyReplicas": 2}
            }))
            .unwrap(),
        );
        for full in &all {
            let brief: ReplicaSetBrief =
                serde_json::from_value(serde_json::to_value(full).unwrap()).unwrap();
            let facts = |r: &dyn ReplicaSetFacts| {
                (
                    r.name().to_owned(),
                    r.pod_hash().map(str::to_owned),
                    r.revision(),
                    (r.desired(), r.current(), r.available()),
                    r.images(),
                )
            };
            assert_eq!(
                facts(&brief),
                facts(full),
                "{}",
                full.metadata.name.as_deref().unwrap()
            );
        }
    }
}
