//! ReplicaSets as the watch cache keeps them: as compact JSON text, decoded when read.
//!
//! A ReplicaSet decoded into k8s-openapi's structs takes about 9 KiB for a one-container pod
//! (every optional field of a PodSpec and a Container has its place in the layout, probes and
//! security contexts included, and every label map is a B-tree node of eleven places), while
//! its JSON is about a kilobyte. A Rollout keeps up to eleven ReplicaSets (its revision
//! history) and the cache holds every one, most of them scaled down and never read but by
//! the reconcile of their own Rollout. So the cache keeps each as text and decodes it when a
//! reconcile reads it; only what the index, the ownership filter and the reflector read on
//! every event (name, namespace, uid, resourceVersion, owners, deletion) is kept decoded.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use super::lean_meta::LeanMeta;

/// A cached ReplicaSet: the object as compact JSON, without `managedFields` and kubectl's
/// last-applied annotation (never read: see [`super::drop_unread_metadata`]), and the part of
/// its metadata read on every event. [`CachedReplicaSet::to_replica_set`] decodes it.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedReplicaSet {
    /// Name, namespace, uid, resourceVersion, owner references and deletion time only.
    metadata: ObjectMeta,
    /// The whole object as compact JSON.
    text: Box<str>,
}

impl CachedReplicaSet {
    /// The whole ReplicaSet, decoded. Fails only for a text that is no ReplicaSet, which
    /// the API server does not store.
    pub fn to_replica_set(&self) -> serde_json::Result<ReplicaSet> {
        serde_json::from_str(&self.text)
    }

    /// The cached form of `rs`, as if it had come from a watch.
    pub fn from_replica_set(rs: &ReplicaSet) -> serde_json::Result<Self> {
        serde_json::from_value(serde_json::to_value(rs)?)
    }
}

resource_as!(CachedReplicaSet, ReplicaSet);

/// The wire form: what the API server sends, with the spec and status re-written as text
/// while they are parsed.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: LeanMeta,
    spec: Option<JsonText>,
    status: Option<JsonText>,
}

/// A JSON value re-written as compact JSON text while it is parsed, without being decoded.
struct JsonText(String);

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut text = Vec::with_capacity(512);
        serde_transcode::transcode(deserializer, &mut serde_json::Serializer::new(&mut text))
            .map_err(D::Error::custom)?;
        String::from_utf8(text)
            .map(JsonText)
            .map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for CachedReplicaSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let mut metadata = ObjectMeta::from(wire.metadata);
        super::drop_unread_meta(&mut metadata);
        let meta_text = serde_json::to_string(&metadata).map_err(D::Error::custom)?;
        let mut text = String::with_capacity(
            meta_text.len()
                + wire.spec.as_ref().map_or(0, |s| s.0.len())
                + wire.status.as_ref().map_or(0, |s| s.0.len())
                + 64,
        );
        text.push_str(r#"{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":"#);
        text.push_str(&meta_text);
        for (key, value) in [("spec", wire.spec), ("status", wire.status)] {
            if let Some(JsonText(value)) = value {
                text.push_str(&format!(r#","{key}":"#));
                text.push_str(&value);
            }
        }
        text.push('}');
        let kept = ObjectMeta {
            name: metadata.name,
            namespace: metadata.namespace,
            uid: metadata.uid,
            resource_version: metadata.resource_version,
            owner_references: metadata.owner_references,
            deletion_timestamp: metadata.deletion_timestamp,
            ..ObjectMeta::default()
        };
        Ok(CachedReplicaSet {
            metadata: kept,
            text: text.into_boxed_str(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource as _;
    use serde_json::{Value, json};
    use sluice_engine::labels::LAST_APPLIED;

    /// A ReplicaSet as the API server returns it: defaults filled in, managed fields and all.
    fn served() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": "web-5d8f", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "web", "rollouts-pod-template-hash": "5d8f"},
                "annotations": {"rollout.argoproj.io/revision": "3", LAST_APPLIED: "{}"},
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                                     "name": "web", "uid": "o", "controller": true}],
                "managedFields": [{"manager": "sluice-controller", "operation": "Update",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {
                "replicas": 2, "minReadySeconds": 5,
                "selector": {"matchLabels": {"app": "web", "rollouts-pod-template-hash": "5d8f"}},
                "template": {
                    "metadata": {"labels": {"app": "web", "rollouts-pod-template-hash": "5d8f"}},
                    "spec": {
                        "containers": [{
                            "name": "app", "image": "web:2",
                            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                            "readinessProbe": {"httpGet": {"path": "/", "port": 8080}},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File",
                            "imagePullPolicy": "IfNotPresent",
                        }],
                        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                        "dnsPolicy": "ClusterFirst", "securityContext": {},
                        "schedulerName": "default-scheduler",
                    },
                },
            },
            "status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1,
                       "observedGeneration": 2},
        })
    }

    #[test]
    fn gives_back_the_replica_set_without_what_is_never_read() {
        let cached: CachedReplicaSet = serde_json::from_value(served()).unwrap();
        let mut expected: ReplicaSet = serde_json::from_value(served()).unwrap();
        crate::cache::drop_unread_metadata(&mut expected);
        assert_eq!(cached.to_replica_set().unwrap(), expected);
        assert_eq!(cached.meta().name.as_deref(), Some("web-5d8f"));
        assert!(cached.meta().managed_fields.is_none());
    }

    #[test]
    fn keeps_compact_text_and_decoded_only_what_every_event_reads() {
        let cached: CachedReplicaSet = serde_json::from_value(served()).unwrap();
        assert!(!cached.text.contains(' '), "{}", cached.text);
        assert!(!cached.text.contains("managedFields"), "{}", cached.text);
        let m = cached.meta();
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()),
            (Some("web-5d8f"), Some("ns"), Some("u"))
        );
        assert_eq!(m.resource_version.as_deref(), Some("9"));
        assert_eq!(m.owner_references.as_ref().unwrap()[0].uid, "o");
        assert_eq!(m.labels, None, "read from the text");
    }

    #[test]
    fn decodes_a_watch_event_and_a_list_page() {
        // A watch event is decoded straight from the text; a list page is first buffered by
        // serde (its `flatten`), and the pod spec must survive both.
        let event = json!({"type": "MODIFIED", "object": served()}).to_string();
        let event: kube::core::WatchEvent<CachedReplicaSet> = serde_json::from_str(&event).unwrap();
        let kube::core::WatchEvent::Modified(from_event) = event else {
            panic!("a MODIFIED event");
        };
        let list = json!({"apiVersion": "apps/v1", "kind": "ReplicaSetList",
                          "metadata": {"resourceVersion": "10"}, "items": [served()]})
        .to_string();
        let list: kube::core::ObjectList<CachedReplicaSet> = serde_json::from_str(&list).unwrap();
        assert_eq!(list.items, std::slice::from_ref(&from_event));
        let rs = from_event.to_replica_set().unwrap();
        let probe = rs.spec.unwrap().template.unwrap().spec.unwrap().containers[0]
            .readiness_probe
            .clone();
        assert!(probe.unwrap().http_get.is_some());
    }

    #[test]
    fn a_replica_set_without_a_template_or_spec_round_trips() {
        for rs in [
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"name": "a"}, "spec": {"selector": {}}}),
            json!({"metadata": {"name": "a"}, "spec": {"selector": {}, "template": {}}}),
            json!({"metadata": {"name": "a"}, "spec": {"selector": {}}, "status": {"replicas": 0}}),
        ] {
            let want: ReplicaSet = serde_json::from_value(rs.clone()).unwrap();
            let cached = CachedReplicaSet::from_replica_set(&want).unwrap();
            assert_eq!(cached.to_replica_set().unwrap(), want, "{rs}");
        }
    }
}
