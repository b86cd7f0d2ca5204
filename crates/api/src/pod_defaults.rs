//! The defaults the API server gives a pod template (Kubernetes' core/v1
//! `SetObjectDefaults_PodTemplate`, the same pass a ReplicaSet's template goes through).
//!
//! A Rollout is a custom resource, so its `spec.template` is stored as written, while the
//! ReplicaSet made from it comes back with these defaults filled in. Telling whether a
//! ReplicaSet still runs a Rollout's template, whatever hash its name carries, means
//! comparing the ReplicaSet's template with the Rollout's template after this pass.
//!
//! Only pod-template defaults are here, not the ones the API server gives a Pod alone
//! (requests copied from limits, `enableServiceLinks`, host-network ports): a ReplicaSet's
//! template never gets those. The pass works on the template as JSON, so fields this
//! crate's types do not know survive it, and applying it twice changes nothing.

use serde_json::{Map, Value, json};

use crate::pod_template_hash::round_up_to_milli;

/// `defaultMode` of secret, configMap, downwardAPI and projected volumes (0644).
const VOLUME_DEFAULT_MODE: i64 = 0o644;

/// Applies the pod-template defaults to `template` (a `PodTemplateSpec` as JSON) in place.
pub fn apply(template: &mut Value) {
    let Some(spec) = object(template, "spec") else {
        return;
    };
    pod_spec(spec);
    for_each(spec, "volumes", volume);
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for_each(spec, key, container);
    }
    round_resource_list(spec, "overhead");
    if let Some(resources) = object_in(spec, "resources") {
        resource_requirements(resources);
    }
}

fn pod_spec(spec: &mut Map<String, Value>) {
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default_ptr(spec, "securityContext", json!({}));
    default_ptr(spec, "terminationGracePeriodSeconds", json!(30));
    default_str(spec, "schedulerName", "default-scheduler");
}

fn container(c: &mut Map<String, Value>) {
    if is_unset(c.get("imagePullPolicy")) {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        let policy = if image_tag(image) == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    default_str(c, "terminationMessagePath", "/dev/termination-log");
    default_str(c, "terminationMessagePolicy", "File");
    for_each(c, "ports", |port| default_str(port, "protocol", "TCP"));
    for_each(c, "env", |env| {
        let Some(from) = object_in(env, "valueFrom") else {
            return;
        };
        if let Some(field_ref) = object_in(from, "fieldRef") {
            default_str(field_ref, "apiVersion", "v1");
        }
        if let Some(file_key) = object_in(from, "fileKeyRef") {
            default_ptr(file_key, "optional", json!(false));
        }
    });
    if let Some(resources) = object_in(c, "resources") {
        resource_requirements(resources);
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = object_in(c, key) {
            self::probe(probe);
        }
    }
    if let Some(lifecycle) = object_in(c, "lifecycle") {
        for key in ["postStart", "preStop"] {
            if let Some(http) = object_in(lifecycle, key).and_then(|h| object_in(h, "httpGet")) {
                http_get(http);
            }
        }
    }
}

fn probe(probe: &mut Map<String, Value>) {
    default_int(probe, "timeoutSeconds", 1);
    default_int(probe, "periodSeconds", 10);
    default_int(probe, "successThreshold", 1);
    default_int(probe, "failureThreshold", 3);
    if let Some(http) = object_in(probe, "httpGet") {
        http_get(http);
    }
    if let Some(grpc) = object_in(probe, "grpc") {
        default_ptr(grpc, "service", json!(""));
    }
}

fn http_get(http: &mut Map<String, Value>) {
    default_str(http, "path", "/");
    default_str(http, "scheme", "HTTP");
}

fn resource_requirements(resources: &mut Map<String, Value>) {
    round_resource_list(resources, "limits");
    round_resource_list(resources, "requests");
}

/// Resource quantities are rounded up to milli precision (`0.0001` becomes `1m`).
fn round_resource_list(parent: &mut Map<String, Value>, key: &str) {
    let Some(list) = object_in(parent, key) else {
        return;
    };
    for quantity in list.values_mut() {
        let text = match quantity {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        // An unreadable quantity is left as it is: the API server would have refused it.
        if let Ok(rounded) = round_up_to_milli(&text) {
            *quantity = Value::String(rounded);
        }
    }
}

/// The volume source keys of `corev1.VolumeSource`; a volume with none of them set is an
/// emptyDir.
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

fn volume(v: &mut Map<String, Value>) {
    if VOLUME_SOURCES.iter().all(|key| is_null(v.get(*key))) {
        v.insert("emptyDir".into(), json!({}));
    }
    if let Some(host_path) = object_in(v, "hostPath") {
        default_ptr(host_path, "type", json!(""));
    }
    for key in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = object_in(v, key) {
            default_ptr(source, "defaultMode", json!(VOLUME_DEFAULT_MODE));
        }
    }
    if let Some(iscsi) = object_in(v, "iscsi") {
        default_str(iscsi, "iscsiInterface", "default");
    }
    if let Some(rbd) = object_in(v, "rbd") {
        default_str(rbd, "pool", "rbd");
        default_str(rbd, "user", "admin");
        default_str(rbd, "keyring", "/etc/ceph/keyring");
    }
    if let Some(downward) = object_in(v, "downwardAPI") {
        for_each(downward, "items", downward_api_file);
    }
    if let Some(disk) = object_in(v, "azureDisk") {
        default_ptr(disk, "cachingMode", json!("ReadWrite"));
        default_ptr(disk, "fsType", json!("ext4"));
        default_ptr(disk, "readOnly", json!(false));
        default_ptr(disk, "kind", json!("Shared"));
    }
    if let Some(projected) = object_in(v, "projected") {
        for_each(projected, "sources", |source| {
            if let Some(downward) = object_in(source, "downwardAPI") {
                for_each(downward, "items", downward_api_file);
            }
            if let Some(token) = object_in(source, "serviceAccountToken") {
                default_ptr(token, "expirationSeconds", json!(3600));
            }
        });
    }
    if let Some(scale_io) = object_in(v, "scaleIO") {
        default_str(scale_io, "storageMode", "ThinProvisioned");
        default_str(scale_io, "fsType", "xfs");
    }
    if let Some(claim_spec) = object_in(v, "ephemeral")
        .and_then(|e| object_in(e, "volumeClaimTemplate"))
        .and_then(|t| object_in(t, "spec"))
    {
        default_ptr(claim_spec, "volumeMode", json!("Filesystem"));
        if let Some(resources) = object_in(claim_spec, "resources") {
            resource_requirements(resources);
        }
    }
    if let Some(image) = object_in(v, "image")
        && is_unset(image.get("pullPolicy"))
    {
        let reference = image.get("reference").and_then(Value::as_str);
        let policy = if image_tag(reference.unwrap_or_default()) == Some("latest") {
            "Always"
        } else {
            "IfNotPresent"
        };
        image.insert("pullPolicy".into(), json!(policy));
    }
}

fn downward_api_file(file: &mut Map<String, Value>) {
    if let Some(field_ref) = object_in(file, "fieldRef") {
        default_str(field_ref, "apiVersion", "v1");
    }
}

/// The tag of an image reference as the kubelet reads it: the one written after the last
/// path segment's `:`, `latest` when neither a tag nor a digest is given, `None` for a
/// reference pinned by digest alone. A registry port (`host:5000/app`) is not a tag.
pub fn image_tag(image: &str) -> Option<&str> {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    match last_segment.split_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_some() => None,
        None => Some("latest"),
    }
}

/// The object at `key` of `value`, when `value` is an object holding one there.
fn object<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    value.as_object_mut().and_then(|o| object_in(o, key))
}

fn object_in<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// Calls `f` on every object of the array at `key`.
fn for_each(map: &mut Map<String, Value>, key: &str, mut f: impl FnMut(&mut Map<String, Value>)) {
    if let Some(items) = map.get_mut(key).and_then(Value::as_array_mut) {
        items
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .for_each(&mut f);
    }
}

fn is_null(value: Option<&Value>) -> bool {
    matches!(value, None | Some(Value::Null))
}

/// Go's zero string: absent, `null` or empty.
fn is_unset(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

/// A string field whose Go zero value (`""`) is replaced.
fn default_str(map: &mut Map<String, Value>, key: &str, default: &str) {
    if is_unset(map.get(key)) {
        map.insert(key.into(), json!(default));
    }
}

/// An integer field whose Go zero value (`0`) is replaced.
fn default_int(map: &mut Map<String, Value>, key: &str, default: i64) {
    let zero = match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        Some(_) => false,
    };
    if zero {
        map.insert(key.into(), json!(default));
    }
}

/// A pointer field: only a nil pointer (absent or `null`) is replaced.
fn default_ptr(map: &mut Map<String, Value>, key: &str, default: Value) {
    if is_null(map.get(key)) {
        map.insert(key.into(), default);
    }
}

#[cfg(test)]
mod tests;
