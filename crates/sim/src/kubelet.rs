//! The cluster side that the Rollout controller depends on but does not own: the ReplicaSet
//! controller (pods to match `spec.replicas`, status counts, garbage collection of a deleted
//! ReplicaSet's pods) and the kubelet (a pod becomes ready some time after it starts, never if
//! its image is one the scenario marked bad). They write straight to the API model: they are
//! not what is under test, only the world it acts on.

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::api_model::{ApiServer, Kind, WatchEvent, name_of};
use crate::rng::Rng;

#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// How long a good pod takes to become ready.
    pub startup_ms: (u64, u64),
    /// Images whose pods never become ready.
    pub bad_images: BTreeSet<String>,
}

/// Work the cluster side asks to be scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followup {
    PodReady { pod: String, at_ms: u64 },
    SyncReplicaSet { name: String, at_ms: u64 },
}

#[derive(Debug, Default)]
pub struct Cluster {
    pod_serial: u64,
}

pub fn owner_name(v: &Value) -> Option<&str> {
    v.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("controller") == Some(&Value::Bool(true)))?
        .get("name")?
        .as_str()
}

/// The controller owner reference of `obj` if it is of `kind`.
pub fn controller_of_kind<'v>(obj: &'v Value, kind: &str) -> Option<&'v Value> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o["controller"] == Value::Bool(true) && o["kind"] == kind)
}

/// The ReplicaSet controlling a pod: the only pods the ReplicaSet controller looks after (a
/// DaemonSet's are its own controller's, and may share a name with nothing here).
fn replica_set_of(pod: &Value) -> Option<&str> {
    controller_of_kind(pod, "ReplicaSet")?.get("name")?.as_str()
}

fn owner_uid(v: &Value) -> Option<&str> {
    v.pointer("/metadata/ownerReferences/0/uid")?.as_str()
}

pub fn image_of_template(spec: &Value) -> &str {
    spec.pointer("/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// When a pod became ready, if it is.
pub fn ready_since(pod: &Value) -> Option<Timestamp> {
    pod.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")?
        .get("lastTransitionTime")?
        .as_str()?
        .parse()
        .ok()
}

/// Ready for at least `min_ready_seconds`: what `availableReplicas` counts.
pub fn is_available(pod: &Value, min_ready_seconds: i64, now: Timestamp) -> bool {
    ready_since(pod).is_some_and(|t| t + SignedDuration::from_secs(min_ready_seconds) <= now)
}

pub fn min_ready_seconds(rs: &Value) -> i64 {
    rs.pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

impl Cluster {
    /// Which ReplicaSet a committed change makes the ReplicaSet controller look at, if any.
    /// Its own pod creations and status writes need no second look.
    pub fn interested_in(kind: Kind, event: &WatchEvent) -> Option<String> {
        let obj = event.object();
        match (kind, event) {
            (Kind::ReplicaSet, WatchEvent::Deleted(_)) => Some(name_of(obj).to_string()),
            (Kind::ReplicaSet, WatchEvent::Applied(_)) => {
                let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
                let observed = obj
                    .pointer("/status/observedGeneration")
                    .and_then(Value::as_i64);
                (generation != observed).then(|| name_of(obj).to_string())
            }
            (Kind::Pod, WatchEvent::Deleted(_)) => replica_set_of(obj).map(str::to_string),
            (Kind::Pod, WatchEvent::Applied(_)) if ready_since(obj).is_some() => {
                replica_set_of(obj).map(str::to_string)
            }
            _ => None,
        }
    }

    /// One pass of the ReplicaSet controller over `name`.
    pub fn sync_replica_set(
        &mut self,
        api: &mut ApiServer,
        name: &str,
        now_ms: u64,
        now: Timestamp,
        cfg: &KubeletConfig,
        rng: &mut Rng,
    ) -> Vec<Followup> {
        let mut followups = Vec::new();
        let Some(rs) = api.get(Kind::ReplicaSet, name).cloned() else {
            // Garbage collection: the owner is gone, so are its pods.
            for pod in api.list(Kind::Pod) {
                if replica_set_of(&pod) == Some(name) {
                    let _ = api.delete(Kind::Pod, name_of(&pod), None);
                }
            }
            return followups;
        };
        let uid = rs
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let all_pods = api.list(Kind::Pod);
        // Pods of an earlier ReplicaSet of the same name are orphans.
        for pod in &all_pods {
            if replica_set_of(pod) == Some(name) && owner_uid(pod) != Some(uid.as_str()) {
                let _ = api.delete(Kind::Pod, name_of(pod), None);
            }
        }
        let mut pods: Vec<Value> = all_pods
            .into_iter()
            .filter(|p| owner_uid(p) == Some(uid.as_str()))
            .collect();
        let desired = rs
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(0) as usize;
        let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
        while pods.len() < desired {
            self.pod_serial += 1;
            let pod = json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": format!("{name}-{}", self.pod_serial),
                    "namespace": rs.pointer("/metadata/namespace").cloned().unwrap_or(json!("default")),
                    "labels": template.pointer("/metadata/labels").cloned().unwrap_or(json!({})),
                    "ownerReferences": [{
                        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                        "uid": uid, "controller": true, "blockOwnerDeletion": true
                    }]
                },
                "spec": template.get("spec").cloned().unwrap_or(json!({})),
                "status": {"phase": "Running"}
            });
            let Ok(created) = api.create(Kind::Pod, pod, now) else {
                break;
            };
            if !cfg.bad_images.contains(image_of_template(&template)) {
                followups.push(Followup::PodReady {
                    pod: name_of(&created).to_string(),
                    at_ms: now_ms + rng.range(cfg.startup_ms),
                });
            }
            pods.push(created);
        }
        if pods.len() > desired {
            // Like the real controller: not-ready pods go first, then the most recently ready,
            // then the newest.
            pods.sort_by_key(|p| {
                let ready = ready_since(p);
                (
                    ready.is_some(),
                    std::cmp::Reverse(ready),
                    std::cmp::Reverse(pod_serial(p)),
                )
            });
            for pod in pods.drain(..pods.len() - desired) {
                let _ = api.delete(Kind::Pod, name_of(&pod), None);
            }
        }
        let min_ready = min_ready_seconds(&rs);
        let ready = pods.iter().filter(|p| ready_since(p).is_some()).count();
        let available = pods
            .iter()
            .filter(|p| is_available(p, min_ready, now))
            .count();
        if available < ready {
            // Look again when the next ready pod has been ready for minReadySeconds.
            followups.push(Followup::SyncReplicaSet {
                name: name.to_string(),
                at_ms: now_ms + 1000,
            });
        }
        let mut status = json!({
            "replicas": pods.len(),
            "fullyLabeledReplicas": pods.len(),
            "readyReplicas": ready,
            "availableReplicas": available,
        });
        if let Some(g) = rs.pointer("/metadata/generation") {
            status["observedGeneration"] = g.clone();
        }
        api.put_status(Kind::ReplicaSet, name, status);
        followups
    }

    /// The kubelet reports a pod ready.
    pub fn pod_ready(&mut self, api: &mut ApiServer, pod: &str, now: Timestamp) {
        let Some(p) = api.get(Kind::Pod, pod) else {
            return;
        };
        if ready_since(p).is_some() {
            return;
        }
        let t = sluice_api::time::whole_seconds(now);
        api.put_status(
            Kind::Pod,
            pod,
            json!({
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t.to_string()}]
            }),
        );
    }
}

fn pod_serial(p: &Value) -> u64 {
    name_of(p)
        .rsplit('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_follow_spec_and_bad_images_never_become_ready() {
        let mut api = ApiServer::new();
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let rs = |name: &str, image: &str, n: i64| {
            json!({"metadata": {"name": name}, "spec": {"replicas": n, "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "app", "image": image}]}}}})
        };
        api.create(Kind::ReplicaSet, rs("good", "ok", 2), now)
            .unwrap();
        api.create(Kind::ReplicaSet, rs("bad", "broken", 1), now)
            .unwrap();
        let cfg = KubeletConfig {
            startup_ms: (100, 100),
            bad_images: ["broken".to_string()].into(),
        };
        let mut c = Cluster::default();
        let mut rng = Rng::new(1);
        let f = c.sync_replica_set(&mut api, "good", 0, now, &cfg, &mut rng);
        assert_eq!(f.len(), 2);
        assert!(
            c.sync_replica_set(&mut api, "bad", 0, now, &cfg, &mut rng)
                .is_empty()
        );
        for pod in f {
            if let Followup::PodReady { pod, .. } = pod {
                c.pod_ready(&mut api, &pod, now);
            }
        }
        c.sync_replica_set(&mut api, "good", 100, now, &cfg, &mut rng);
        let good = api.get(Kind::ReplicaSet, "good").unwrap();
        assert_eq!(good.pointer("/status/availableReplicas"), Some(&json!(2)));
        let bad = api.get(Kind::ReplicaSet, "bad").unwrap();
        assert_eq!(bad.pointer("/status/availableReplicas"), Some(&json!(0)));
        // Scaling down removes the not-ready pods of a ReplicaSet first.
        api.delete(Kind::ReplicaSet, "bad", None).unwrap();
        c.sync_replica_set(&mut api, "bad", 200, now, &cfg, &mut rng);
        assert_eq!(api.list(Kind::Pod).len(), 2);
    }
}
