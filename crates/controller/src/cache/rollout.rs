//! Rollouts as the watch cache keeps them: the spec as compact JSON text, decoded when a
//! reconcile reads the whole Rollout; the metadata and status decoded.
//!
//! A Rollout decoded into its structs takes 12 KiB or more even for a one-container canary
//! without steps: the struct alone is 5.5 KiB (the spec's every optional strategy and router
//! setting and the pod template's every optional field have their place in the layout), the
//! pod template's maps and vectors come on top. Its spec as JSON is a few hundred bytes. The
//! spec is read whole only by a reconcile of its own Rollout (and by a notification about it),
//! which decodes the whole Rollout; what is read on every event or scrape stays decoded: the
//! metadata (the notification loop's annotations, the trigger mappings), the status and the
//! two facts of the spec the metrics read ([`CachedRollout::replicas`],
//! [`CachedRollout::strategy_labels`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use sluice_api::{Rollout, RolloutSpec, RolloutStatus};

/// A cached Rollout: the object without `managedFields` (never read), its spec as text.
/// [`CachedRollout::to_rollout`] decodes it whole.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedRollout {
    metadata: ObjectMeta,
    /// `spec` as compact JSON.
    spec: Box<str>,
    status: Option<Box<RolloutStatus>>,
    replicas: Option<i32>,
    strategy_labels: (&'static str, &'static str),
}

impl CachedRollout {
    /// The cached form of `ro` (its managed fields dropped, as for every cached kind).
    pub fn new(ro: Rollout) -> serde_json::Result<Self> {
        let Rollout {
            mut metadata,
            spec,
            status,
        } = ro;
        metadata.managed_fields = None;
        Ok(CachedRollout {
            replicas: spec.replicas,
            strategy_labels: strategy_labels(&spec),
            spec: serde_json::to_string(&spec)?.into_boxed_str(),
            status: status.map(Box::new),
            metadata,
        })
    }

    /// The whole Rollout, its spec decoded. Fails only for a spec text that is no Rollout
    /// spec, which [`CachedRollout::new`] does not write.
    pub fn to_rollout(&self) -> serde_json::Result<Rollout> {
        Ok(Rollout {
            metadata: self.metadata.clone(),
            spec: serde_json::from_str(&self.spec)?,
            status: self.status.as_deref().cloned(),
        })
    }

    /// The status, as the API server has it.
    pub fn status(&self) -> Option<&RolloutStatus> {
        self.status.as_deref()
    }

    /// `spec.replicas`, as written (unset means one).
    pub fn replicas(&self) -> Option<i32> {
        self.replicas
    }

    /// Argo's `strategy` and `traffic_router` metric labels of the spec.
    pub fn strategy_labels(&self) -> (&'static str, &'static str) {
        self.strategy_labels
    }
}

/// Argo's `strategy` and `traffic_router` metric labels: `none`, `blueGreen` or `canary`, and
/// the canary's first traffic router in Argo's order of precedence.
fn strategy_labels(spec: &RolloutSpec) -> (&'static str, &'static str) {
    let Some(strategy) = spec.strategy.as_ref() else {
        return ("none", "");
    };
    if strategy.blue_green.is_some() {
        return ("blueGreen", "");
    }
    let Some(canary) = strategy.canary.as_ref() else {
        return ("none", "");
    };
    let router = canary.traffic_routing.as_ref().map_or("", |t| {
        [
            (t.app_mesh.is_some(), "AppMesh"),
            (t.smi.is_some(), "SMI"),
            (t.nginx.is_some(), "Nginx"),
            (t.istio.is_some(), "Istio"),
            (t.ambassador.is_some(), "Ambassador"),
            (t.alb.is_some(), "ALB"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
        .unwrap_or("")
    });
    ("canary", router)
}

resource_as!(CachedRollout, Rollout);

/// Decoded as a Rollout is (an object that is no Rollout fails the same way), then cached.
impl<'de> Deserialize<'de> for CachedRollout {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ro = Rollout::deserialize(deserializer)?;
        CachedRollout::new(ro).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource as _;
    use kube::ResourceExt as _;
    use serde_json::{Value, json};
    use sluice_api::pod_template_hash::compute_pod_template_hash;

    /// A Rollout as the API server returns it: defaults filled in, managed fields and all.
    fn served() -> Value {
        json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {
                "name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "app", "image": "web:2",
                        "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
                    }]},
                },
                "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}},
            },
            "status": {"replicas": 2, "availableReplicas": 1, "phase": "Progressing",
                       "observedGeneration": "2", "currentPodHash": "5d8f"},
        })
    }

    #[test]
    fn gives_back_the_rollout_without_its_managed_fields() {
        let cached: CachedRollout = serde_json::from_value(served()).unwrap();
        let mut expected: Rollout = serde_json::from_value(served()).unwrap();
        expected.metadata.managed_fields = None;
        assert_eq!(cached.to_rollout().unwrap(), expected);
        assert_eq!(cached.meta().name.as_deref(), Some("web"));
        assert!(cached.meta().managed_fields.is_none());
    }

    #[test]
    fn keeps_the_spec_as_compact_text_and_the_rest_decoded() {
        let cached: CachedRollout = serde_json::from_value(served()).unwrap();
        assert!(!cached.spec.contains(' '), "{}", cached.spec);
        assert!(cached.spec.contains("web:2"), "{}", cached.spec);
        assert_eq!(cached.replicas(), Some(2));
        assert_eq!(cached.strategy_labels(), ("canary", ""));
        assert_eq!(cached.status().unwrap().available_replicas, Some(1));
        assert!(
            cached
                .annotations()
                .contains_key("kubectl.kubernetes.io/last-applied-configuration"),
            "an analysis argument may read every annotation"
        );
    }

    #[test]
    fn a_rollout_without_a_template_status_or_spec_round_trips() {
        for spec in [
            json!({"workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}),
            json!({"template": {}}),
            json!({"template": {"spec": {"containers": []}}}),
            json!({}),
        ] {
            let ro: Rollout =
                serde_json::from_value(json!({"metadata": {"name": "a"}, "spec": spec})).unwrap();
            let cached = CachedRollout::new(ro.clone()).unwrap();
            assert_eq!(cached.to_rollout().unwrap(), ro, "{spec}");
        }
    }

    /// Every Rollout of Argo's examples and e2e fixtures, cached and decoded again, is the
    /// Rollout it was: its pod-template hash, computed from the decoded template, stays too.
    #[test]
    fn every_corpus_rollout_comes_back_whole_with_its_pod_template_hash() {
        let root = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
        let mut dirs = vec![root.join("examples"), root.join("test")];
        let mut checked = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if !path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let Ok(docs) = sluice_api::yaml::from_multi_doc_str(&text) else {
                    continue;
                };
                for doc in docs.into_iter().filter(|d| d["kind"] == "Rollout") {
                    let Ok(ro) = serde_json::from_value::<Rollout>(doc) else {
                        continue;
                    };
                    let back = CachedRollout::new(ro.clone())
                        .unwrap()
                        .to_rollout()
                        .unwrap();
                    assert_eq!(back, ro, "{}", path.display());
                    if let Some(template) = &ro.spec.template {
                        let hash = |t| compute_pod_template_hash(t, None).unwrap();
                        assert_eq!(hash(template), hash(back.spec.template.as_ref().unwrap()));
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked >= 70, "only {checked} corpus Rollouts found");
    }

    #[test]
    fn a_watch_event_and_a_list_page_decode_as_they_would_as_rollouts() {
        let event = json!({"type": "MODIFIED", "object": served()}).to_string();
        let event: kube::core::WatchEvent<CachedRollout> = serde_json::from_str(&event).unwrap();
        let kube::core::WatchEvent::Modified(from_event) = event else {
            panic!("a MODIFIED event");
        };
        let list = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "RolloutList",
                          "metadata": {"resourceVersion": "10"}, "items": [served()]})
        .to_string();
        let list: kube::core::ObjectList<CachedRollout> = serde_json::from_str(&list).unwrap();
        assert_eq!(list.items, std::slice::from_ref(&from_event));
        // What fails to decode as a Rollout fails as a cached one.
        let bad = json!({"metadata": {"name": "a"}, "spec": {"replicas": "two"}});
        assert!(serde_json::from_value::<Rollout>(bad.clone()).is_err());
        assert!(serde_json::from_value::<CachedRollout>(bad).is_err());
    }
}
