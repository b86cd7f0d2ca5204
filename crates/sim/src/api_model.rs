//! An in-memory API server with the semantics the controller relies on: one global
//! resourceVersion counter, optimistic concurrency (a patch naming a `metadata.resourceVersion`
//! that is no longer current is refused with 409), JSON merge patches as RFC 7386 defines them
//! (`null` deletes a key, objects merge key by key, anything else is replaced), the status
//! subresource split (the main endpoint ignores status, the status endpoint ignores the rest),
//! `metadata.generation` bumped on spec changes only, and no new resourceVersion or watch event
//! for a write that changes nothing. Router objects (VirtualServices, Ingresses, ...) are
//! stored like any other kind and written by whole-object updates (PUT).
//!
//! Objects are kept as JSON so that patches apply exactly as they would on the wire; typed
//! views are made where the engine or the checks need them.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::{Map, Value};
use sluice_routers::kinds::RouterKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Rollout,
    ReplicaSet,
    Pod,
    Service,
    Lease,
    AnalysisRun,
    AnalysisTemplate,
    ClusterAnalysisTemplate,
    Experiment,
    /// A StatefulSet a Rollout drives, and its revisions.
    StatefulSet,
    ControllerRevision,
    /// A DaemonSet a Rollout drives; its pods are Pods, one per Node.
    DaemonSet,
    Node,
    /// What pods read (config rollouts copy them); `immutable: true` freezes their content.
    ConfigMap,
    Secret,
    /// A traffic router's object (the simulated cluster has one namespace).
    Router(RouterKind),
}

impl Kind {
    /// Whether the kind has a `/status` subresource, which splits status writes from the rest.
    pub fn has_status_subresource(self) -> bool {
        match self {
            Kind::Rollout
            | Kind::ReplicaSet
            | Kind::Pod
            | Kind::Service
            | Kind::StatefulSet
            | Kind::DaemonSet
            | Kind::Node => true,
            // As their CRDs define them: Istio's, the Gateway API's and Ingress have one,
            // SMI's TrafficSplit does not.
            Kind::Router(kind) => kind != RouterKind::TrafficSplit,
            // Argo's Experiment CRD has none either: its controller writes status through the
            // main resource.
            Kind::Lease
            | Kind::AnalysisRun
            | Kind::AnalysisTemplate
            | Kind::ClusterAnalysisTemplate
            | Kind::Experiment
            | Kind::ControllerRevision
            | Kind::ConfigMap
            | Kind::Secret => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 409: a resourceVersion or uid precondition failed.
    Conflict,
    NotFound,
    AlreadyExists,
    Invalid(String),
}

/// Which endpoint a patch goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Main,
    Status,
}

/// One change as a watch would report it: the object after the change, or its last state.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    Applied(Value),
    Deleted(Value),
}

impl WatchEvent {
    pub fn object(&self) -> &Value {
        match self {
            WatchEvent::Applied(v) | WatchEvent::Deleted(v) => v,
        }
    }
}

#[derive(Debug, Default)]
pub struct ApiServer {
    rv: u64,
    uid_serial: u64,
    objects: BTreeMap<(Kind, String), Value>,
    /// Changes not yet fanned out to the watches, in commit order.
    changes: Vec<(Kind, String, WatchEvent)>,
}

pub fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub fn rv_of(v: &Value) -> Option<&str> {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
}

/// RFC 7386: applies `patch` to `target` in place.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return;
    };
    for (k, v) in p {
        if v.is_null() {
            t.shift_remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// The merge patch that turns `old` into `new`: keys `new` leaves out become `null`, objects
/// present on both sides are compared key by key, anything else is taken from `new`.
fn replacing_patch(old: &Value, new: &Value) -> Value {
    let (Value::Object(o), Value::Object(n)) = (old, new) else {
        return new.clone();
    };
    let mut patch = Map::new();
    for (k, v) in n {
        let p = match o.get(k) {
            Some(before) if before.is_object() && v.is_object() => replacing_patch(before, v),
            _ => v.clone(),
        };
        patch.insert(k.clone(), p);
    }
    for k in o.keys() {
        if !n.contains_key(k) {
            patch.insert(k.clone(), Value::Null);
        }
    }
    Value::Object(patch)
}

/// Whether a write changes the content of an immutable ConfigMap or Secret (its metadata
/// may still change), which the API server refuses.
fn frozen_content_changed(old: &Value, new: &Value) -> bool {
    old.get("immutable") == Some(&Value::Bool(true))
        && ["data", "binaryData", "stringData", "type", "immutable"]
            .iter()
            .any(|field| old.get(field) != new.get(field))
}

fn timestamp(now: Timestamp) -> Value {
    // The API server stores metav1.Time with second precision.
    let t = sluice_api::time::whole_seconds(now);
    Value::String(t.to_string())
}

impl ApiServer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    pub fn get(&self, kind: Kind, name: &str) -> Option<&Value> {
        self.objects.get(&(kind, name.to_string()))
    }

    /// All objects of a kind, by name: what a list (and so a re-list) returns.
    pub fn list(&self, kind: Kind) -> Vec<Value> {
        self.objects
            .range((kind, String::new())..)
            .take_while(|((k, _), _)| *k == kind)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Every router object, by kind and name.
    pub fn routers(&self) -> Vec<(Kind, String)> {
        self.objects
            .keys()
            .filter(|(k, _)| matches!(k, Kind::Router(_)))
            .cloned()
            .collect()
    }

    pub fn take_changes(&mut self) -> Vec<(Kind, String, WatchEvent)> {
        std::mem::take(&mut self.changes)
    }

    pub fn create(
        &mut self,
        kind: Kind,
        mut obj: Value,
        now: Timestamp,
    ) -> Result<Value, ApiError> {
        let name = name_of(&obj).to_string();
        if name.is_empty() {
            return Err(ApiError::Invalid("metadata.name is required".into()));
        }
        let key = (kind, name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists);
        }
        self.uid_serial += 1;
        let uid = format!("uid-{}", self.uid_serial);
        let rv = self.next_rv();
        let Some(root) = obj.as_object_mut() else {
            return Err(ApiError::Invalid("not an object".into()));
        };
        // Status is the status endpoint's business: a create starts without one (pods are
        // created as the kubelet would already report them).
        if kind != Kind::Pod && kind.has_status_subresource() {
            root.shift_remove("status");
        }
        let meta = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else {
            return Err(ApiError::Invalid("metadata is not an object".into()));
        };
        meta.insert("uid".into(), Value::String(uid));
        meta.insert("resourceVersion".into(), Value::String(rv));
        meta.insert("generation".into(), Value::from(1));
        meta.insert("creationTimestamp".into(), timestamp(now));
        meta.shift_remove("deletionTimestamp");
        self.objects.insert(key, obj.clone());
        self.changes
            .push((kind, name, WatchEvent::Applied(obj.clone())));
        Ok(obj)
    }

    /// A JSON merge patch. A `metadata.resourceVersion` in the patch is a precondition, as
    /// the API server treats it; it is never stored.
    pub fn patch(
        &mut self,
        kind: Kind,
        name: &str,
        patch: &Value,
        endpoint: Endpoint,
    ) -> Result<Value, ApiError> {
        let key = (kind, name.to_string());
        let Some(old) = self.objects.get(&key) else {
            return Err(ApiError::NotFound);
        };
        let subresource = kind.has_status_subresource();
        if endpoint == Endpoint::Status && !subresource {
            // No such endpoint: the API server answers 404.
            return Err(ApiError::NotFound);
        }
        // A `null` one is no precondition: the merge patch only removes the field.
        if let Some(want) = patch
            .pointer("/metadata/resourceVersion")
            .filter(|v| !v.is_null())
            && want.as_str() != rv_of(old)
        {
            return Err(ApiError::Conflict);
        }
        let mut patch = patch.clone();
        if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.shift_remove("resourceVersion");
        }
        let mut new = old.clone();
        merge_patch(&mut new, &patch);
        let Some(root) = new.as_object_mut() else {
            return Err(ApiError::Invalid(
                "patch made the object a non-object".into(),
            ));
        };
        match endpoint {
            // Without a status subresource, status is a field like any other.
            Endpoint::Main if !subresource => {}
            Endpoint::Main => {
                // The main endpoint ignores status changes.
                match old.get("status") {
                    Some(s) => root.insert("status".into(), s.clone()),
                    None => root.shift_remove("status"),
                };
            }
            Endpoint::Status => {
                // The status endpoint ignores everything but status.
                let status = root.get("status").cloned();
                let mut only_status = old.clone();
                if let Some(o) = only_status.as_object_mut() {
                    match status {
                        Some(s) => o.insert("status".into(), s),
                        None => o.shift_remove("status"),
                    };
                }
                new = only_status;
            }
        }
        // Identity fields are immutable.
        for field in [
            "name",
            "uid",
            "creationTimestamp",
            "generation",
            "resourceVersion",
        ] {
            let ptr = format!("/metadata/{field}");
            if let (Some(v), Some(meta)) = (
                old.pointer(&ptr).cloned(),
                new.get_mut("metadata").and_then(Value::as_object_mut),
            ) {
                meta.insert(field.into(), v);
            }
        }
        if &new == old {
            return Ok(new);
        }
        if frozen_content_changed(old, &new) {
            return Err(ApiError::Invalid(format!(
                "{name}: the content of an immutable object cannot change"
            )));
        }
        let outside_metadata = |v: &Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                o.shift_remove("metadata");
            }
            v
        };
        let bumps = if subresource {
            endpoint == Endpoint::Main && new.get("spec") != old.get("spec")
        } else {
            outside_metadata(&new) != outside_metadata(old)
        };
        if bumps {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("generation".into(), Value::from(g + 1));
            }
        }
        let rv = self.next_rv();
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv));
        }
        self.objects.insert(key, new.clone());
        self.changes
            .push((kind, name.to_string(), WatchEvent::Applied(new.clone())));
        Ok(new)
    }

    /// An update (PUT): the whole object, conditional on the resourceVersion it carries.
    pub fn replace(&mut self, kind: Kind, obj: &Value) -> Result<Value, ApiError> {
        let name = name_of(obj).to_string();
        let Some(old) = self.objects.get(&(kind, name.clone())) else {
            return Err(ApiError::NotFound);
        };
        if rv_of(obj).is_some_and(|rv| Some(rv) != rv_of(old)) {
            return Err(ApiError::Conflict);
        }
        // A PUT replaces everything: keys it leaves out are removed, at any depth. Without a
        // resourceVersion it is unconditional (the identity fields are kept in any case).
        let mut patch = replacing_patch(old, obj);
        if rv_of(obj).is_none()
            && let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.shift_remove("resourceVersion");
        }
        self.patch(kind, &name, &patch, Endpoint::Main)
    }

    /// Replaces the status of an object unconditionally, as the ReplicaSet controller and the
    /// kubelet do through their own status writes.
    pub fn put_status(&mut self, kind: Kind, name: &str, status: Value) -> Option<Value> {
        let key = (kind, name.to_string());
        let old = self.objects.get(&key)?;
        if old.get("status") == Some(&status) {
            return Some(old.clone());
        }
        let mut new = old.clone();
        if let Some(root) = new.as_object_mut() {
            root.insert("status".into(), status);
        }
        let rv = self.next_rv();
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv));
        }
        self.objects.insert(key, new.clone());
        self.changes
            .push((kind, name.to_string(), WatchEvent::Applied(new.clone())));
        Some(new)
    }

    /// Deletes an object, with an optional uid precondition.
    pub fn delete(&mut self, kind: Kind, name: &str, uid: Option<&str>) -> Result<Value, ApiError> {
        let key = (kind, name.to_string());
        let Some(old) = self.objects.get(&key) else {
            return Err(ApiError::NotFound);
        };
        if let Some(uid) = uid
            && old.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
        {
            return Err(ApiError::Conflict);
        }
        let Some(old) = self.objects.remove(&key) else {
            return Err(ApiError::NotFound);
        };
        // A deletion also gets a resourceVersion of its own.
        let rv = self.next_rv();
        let mut last = old.clone();
        if let Some(meta) = last.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv));
        }
        self.changes
            .push((kind, name.to_string(), WatchEvent::Deleted(last)));
        Ok(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn rs(api: &mut ApiServer) -> Value {
        api.create(
            Kind::ReplicaSet,
            json!({"metadata": {"name": "a", "annotations": {"x": "1", "y": "2"}},
                   "spec": {"replicas": 1}}),
            now(),
        )
        .unwrap()
    }

    #[test]
    fn merge_patch_null_deletes_and_objects_merge() {
        let mut t = json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"});
        merge_patch(
            &mut t,
            &json!({"a": {"b": null, "d": 3}, "l": [3], "k": null}),
        );
        assert_eq!(t, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn stale_resource_version_is_a_conflict() {
        let mut api = ApiServer::new();
        let created = rs(&mut api);
        let rv = rv_of(&created).unwrap().to_string();
        let p = json!({"metadata": {"resourceVersion": rv, "annotations": {"x": null}}});
        let after = api
            .patch(Kind::ReplicaSet, "a", &p, Endpoint::Main)
            .unwrap();
        assert_eq!(
            after.pointer("/metadata/annotations"),
            Some(&json!({"y": "2"}))
        );
        assert_eq!(
            api.patch(Kind::ReplicaSet, "a", &p, Endpoint::Main),
            Err(ApiError::Conflict)
        );
    }

    #[test]
    fn generation_moves_with_spec_only_and_noop_writes_nothing() {
        let mut api = ApiServer::new();
        rs(&mut api);
        api.take_changes();
        let a = api
            .patch(
                Kind::ReplicaSet,
                "a",
                &json!({"metadata": {"annotations": {"z": "3"}}}),
                Endpoint::Main,
            )
            .unwrap();
        assert_eq!(a.pointer("/metadata/generation"), Some(&json!(1)));
        let b = api
            .patch(
                Kind::ReplicaSet,
                "a",
                &json!({"spec": {"replicas": 3}}),
                Endpoint::Main,
            )
            .unwrap();
        assert_eq!(b.pointer("/metadata/generation"), Some(&json!(2)));
        let rv = api.resource_version();
        api.patch(
            Kind::ReplicaSet,
            "a",
            &json!({"spec": {"replicas": 3}}),
            Endpoint::Main,
        )
        .unwrap();
        assert_eq!(api.resource_version(), rv);
        assert_eq!(api.take_changes().len(), 2);
    }

    #[test]
    fn endpoints_split_status_from_the_rest() {
        let mut api = ApiServer::new();
        rs(&mut api);
        let a = api
            .patch(
                Kind::ReplicaSet,
                "a",
                &json!({"status": {"replicas": 9}, "spec": {"replicas": 2}}),
                Endpoint::Main,
            )
            .unwrap();
        assert_eq!(a.get("status"), None);
        let b = api
            .patch(
                Kind::ReplicaSet,
                "a",
                &json!({"status": {"replicas": 9}, "spec": {"replicas": 5}}),
                Endpoint::Status,
            )
            .unwrap();
        assert_eq!(b.pointer("/status/replicas"), Some(&json!(9)));
        assert_eq!(b.pointer("/spec/replicas"), Some(&json!(2)));
    }

    #[test]
    fn kinds_without_a_status_subresource_take_status_through_the_main_endpoint() {
        let mut api = ApiServer::new();
        let run = json!({"metadata": {"name": "r"}, "spec": {"metrics": []},
                         "status": {"phase": "Pending"}});
        let created = api.create(Kind::AnalysisRun, run, now()).unwrap();
        assert_eq!(created.pointer("/status/phase"), Some(&json!("Pending")));
        let after = api
            .patch(
                Kind::AnalysisRun,
                "r",
                &json!({"status": {"phase": "Running"}}),
                Endpoint::Main,
            )
            .unwrap();
        assert_eq!(after.pointer("/status/phase"), Some(&json!("Running")));
        assert_eq!(after.pointer("/metadata/generation"), Some(&json!(2)));
        let annotated = api
            .patch(
                Kind::AnalysisRun,
                "r",
                &json!({"metadata": {"annotations": {"a": "b"}}}),
                Endpoint::Main,
            )
            .unwrap();
        assert_eq!(annotated.pointer("/metadata/generation"), Some(&json!(2)));
        assert_eq!(
            api.patch(
                Kind::AnalysisRun,
                "r",
                &json!({"status": {"phase": "Failed"}}),
                Endpoint::Status
            ),
            Err(ApiError::NotFound)
        );
    }

    #[test]
    fn replace_is_a_whole_object_update() {
        let mut api = ApiServer::new();
        let kind = Kind::Router(RouterKind::VirtualService);
        let vs = json!({"metadata": {"name": "vs", "annotations": {"a": "1"}},
                        "spec": {"http": [{"name": "primary"}], "tcp": [{"name": "t"}]},
                        "status": {"observedGeneration": 9}});
        let created = api.create(kind, vs, now()).unwrap();
        assert_eq!(created.get("status"), None, "status is the subresource's");
        let mut next = created.clone();
        next["spec"].as_object_mut().unwrap().shift_remove("tcp");
        next["metadata"]["annotations"] = json!({"b": "2"});
        let after = api.replace(kind, &next).unwrap();
        assert_eq!(after.pointer("/spec/tcp"), None);
        assert_eq!(
            after.pointer("/metadata/annotations"),
            Some(&json!({"b": "2"}))
        );
        assert_eq!(after.pointer("/metadata/generation"), Some(&json!(2)));
        assert_ne!(rv_of(&after), rv_of(&created));
        // Sent again, it names a resourceVersion that is no longer current.
        assert_eq!(api.replace(kind, &next), Err(ApiError::Conflict));
        // Without one it is unconditional.
        next["metadata"]
            .as_object_mut()
            .unwrap()
            .shift_remove("resourceVersion");
        next["spec"]["http"] = json!([]);
        let forced = api.replace(kind, &next).unwrap();
        assert_eq!(forced.pointer("/spec/http"), Some(&json!([])));
    }

    #[test]
    fn an_immutable_objects_content_stays_and_its_metadata_may_change() {
        let mut api = ApiServer::new();
        let cm = json!({"metadata": {"name": "c"}, "data": {"k": "v"}, "immutable": true});
        api.create(Kind::ConfigMap, cm, now()).unwrap();
        let edit = json!({"data": {"k": "w"}});
        assert!(matches!(
            api.patch(Kind::ConfigMap, "c", &edit, Endpoint::Main),
            Err(ApiError::Invalid(_))
        ));
        let owners = json!({"metadata": {"resourceVersion": null,
                                         "ownerReferences": [{"kind": "Rollout"}]}});
        let owned = api
            .patch(Kind::ConfigMap, "c", &owners, Endpoint::Main)
            .unwrap();
        assert_eq!(owned.pointer("/data/k"), Some(&json!("v")));
        assert!(owned.pointer("/metadata/ownerReferences/0").is_some());
    }

    #[test]
    fn delete_checks_uid() {
        let mut api = ApiServer::new();
        rs(&mut api);
        assert_eq!(
            api.delete(Kind::ReplicaSet, "a", Some("other")),
            Err(ApiError::Conflict)
        );
        assert!(api.delete(Kind::ReplicaSet, "a", Some("uid-1")).is_ok());
        assert_eq!(
            api.delete(Kind::ReplicaSet, "a", None),
            Err(ApiError::NotFound)
        );
    }
}
