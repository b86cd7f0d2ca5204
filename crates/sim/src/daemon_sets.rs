//! The DaemonSet controller with the `OnDelete` update strategy, as a Rollout driving a
//! DaemonSet depends on it (`rollouts.sluice.dev/daemonset`): one pod per Node, a
//! ControllerRevision per distinct template (the current template's renumbered the newest, as
//! kube-controller-manager does when a template comes back), a node whose pod is gone given a
//! new pod from the current template, and the status counts the Rollout reads. A pod is never
//! replaced while it lives: with `OnDelete`, which nodes run which revision is decided by
//! whoever deletes pods. The pods are real Pod objects (bound to their node, labelled with
//! their revision, controlled by the DaemonSet's uid), because the Rollout controller reads
//! and evicts them; the kubelet makes them ready as it does a ReplicaSet's. Like the other
//! cluster controllers it writes straight to the API model: it is the world the Rollout
//! controller acts on, not what is under test.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api_model::{ApiServer, Kind, WatchEvent, name_of};
use crate::kubelet::{Followup, KubeletConfig, controller_of_kind, image_of_template, ready_since};
use crate::rng::Rng;
use crate::stateful_sets::revision_hash;

/// The label of a pod's revision, as the engine reads it.
pub use sluice_engine::REVISION_LABEL;

#[derive(Debug, Default)]
pub struct DaemonSetController {
    pod_serial: u64,
}

/// The DaemonSet controlling `obj` (a pod, a ControllerRevision), by name and uid.
pub fn owner(obj: &Value) -> Option<(&str, &str)> {
    let o = controller_of_kind(obj, "DaemonSet")?;
    Some((o.get("name")?.as_str()?, o.get("uid")?.as_str()?))
}

fn uid(v: &Value) -> &str {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The pods `daemon_set` controls (by its uid, as the Rollout controller counts them).
pub fn pods_of(api: &ApiServer, daemon_set: &Value) -> Vec<Value> {
    let ds_uid = uid(daemon_set);
    api.list(Kind::Pod)
        .into_iter()
        .filter(|p| owner(p).is_some_and(|(_, u)| u == ds_uid))
        .collect()
}

/// The ControllerRevisions `daemon_set` controls, by its uid.
pub fn revisions_of(api: &ApiServer, daemon_set: &Value) -> Vec<Value> {
    let ds_uid = uid(daemon_set);
    api.list(Kind::ControllerRevision)
        .into_iter()
        .filter(|r| owner(r).is_some_and(|(_, u)| u == ds_uid))
        .collect()
}

/// The hash of the update revision: the highest-numbered ControllerRevision.
pub fn update_revision(api: &ApiServer, daemon_set: &Value) -> Option<String> {
    let prefix = format!("{}-", name_of(daemon_set));
    revisions_of(api, daemon_set)
        .iter()
        .max_by_key(|r| r["revision"].as_i64().unwrap_or(0))
        .and_then(|r| name_of(r).strip_prefix(&prefix).map(str::to_string))
}

/// The revision hash a pod runs.
pub fn revision_of(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/labels")?
        .get(REVISION_LABEL)?
        .as_str()
}

/// The node a pod is bound to.
pub fn node_of(pod: &Value) -> Option<&str> {
    pod.pointer("/spec/nodeName")?.as_str()
}

impl DaemonSetController {
    /// Which DaemonSet a committed change makes the controller look at: a spec it has not
    /// acted on yet, one of its pods gone (its node needs another) or ready (the status
    /// counts), or a node come or gone (every DaemonSet).
    pub fn interested_in(api: &ApiServer, kind: Kind, event: &WatchEvent) -> Vec<String> {
        let obj = event.object();
        match (kind, event) {
            (Kind::DaemonSet, WatchEvent::Applied(ds)) => {
                let generation = ds.pointer("/metadata/generation").and_then(Value::as_i64);
                let observed = ds
                    .pointer("/status/observedGeneration")
                    .and_then(Value::as_i64);
                (generation != observed)
                    .then(|| name_of(ds).to_string())
                    .into_iter()
                    .collect()
            }
            (Kind::Pod, WatchEvent::Deleted(_)) => {
                owner(obj).map(|(n, _)| n.to_string()).into_iter().collect()
            }
            (Kind::Pod, WatchEvent::Applied(_)) if ready_since(obj).is_some() => {
                owner(obj).map(|(n, _)| n.to_string()).into_iter().collect()
            }
            // Nodes are not written once made: any change is one joining or leaving.
            (Kind::Node, _) => names(api),
            _ => Vec::new(),
        }
    }

    /// One sync of DaemonSet `name`: its revisions, a pod from the current template on each
    /// node without one, pods on nodes that left removed, its status. Returns when the pods
    /// it made become ready.
    pub fn sync(
        &mut self,
        api: &mut ApiServer,
        name: &str,
        now_ms: u64,
        now: jiff::Timestamp,
        kubelet: &KubeletConfig,
        rng: &mut Rng,
    ) -> Vec<Followup> {
        let Some(ds) = api.get(Kind::DaemonSet, name).cloned() else {
            return Vec::new();
        };
        let template = ds.pointer("/spec/template").cloned().unwrap_or_default();
        let hash = revision_hash(&template);
        ensure_newest_revision(api, &ds, &hash, &template, now);
        let nodes: Vec<String> = api
            .list(Kind::Node)
            .iter()
            .map(|n| name_of(n).to_string())
            .collect();
        let mut by_node: BTreeMap<String, Value> = BTreeMap::new();
        for pod in pods_of(api, &ds) {
            match node_of(&pod) {
                Some(node) if nodes.iter().any(|n| n == node) => {
                    by_node.insert(node.to_string(), pod);
                }
                // Its node left: the pod goes with it.
                _ => {
                    let _ = api.delete(Kind::Pod, name_of(&pod), None);
                }
            }
        }
        let mut followups = Vec::new();
        for node in &nodes {
            if by_node.contains_key(node) {
                continue;
            }
            self.pod_serial += 1;
            let pod = self.pod(&ds, &template, &hash, node);
            let Ok(created) = api.create(Kind::Pod, pod, now) else {
                continue;
            };
            if !kubelet.bad_images.contains(image_of_template(&template)) {
                followups.push(Followup::PodReady {
                    pod: name_of(&created).to_string(),
                    at_ms: now_ms + rng.range(kubelet.startup_ms),
                });
            }
            by_node.insert(node.clone(), created);
        }
        let ready = by_node
            .values()
            .filter(|p| ready_since(p).is_some())
            .count();
        let updated = by_node
            .values()
            .filter(|p| revision_of(p) == Some(hash.as_str()))
            .count();
        let status = json!({
            "observedGeneration": ds.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "desiredNumberScheduled": nodes.len(),
            "currentNumberScheduled": by_node.len(),
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": ready,
            "numberUnavailable": nodes.len() - ready,
            "updatedNumberScheduled": updated,
        });
        api.put_status(Kind::DaemonSet, name, status);
        followups
    }

    /// The node's pod, made from the current template as the DaemonSet controller makes it.
    fn pod(&self, ds: &Value, template: &Value, hash: &str, node: &str) -> Value {
        let name = name_of(ds);
        let mut labels = template
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        labels[REVISION_LABEL] = json!(hash);
        let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
        spec["nodeName"] = json!(node);
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": format!("{name}-{}", self.pod_serial),
                "namespace": ds.pointer("/metadata/namespace").cloned().unwrap_or(json!("default")),
                "labels": labels,
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                    "uid": uid(ds), "controller": true, "blockOwnerDeletion": true
                }]
            },
            "spec": spec,
            "status": {"phase": "Running"}
        })
    }
}

/// The names of every DaemonSet.
fn names(api: &ApiServer) -> Vec<String> {
    api.list(Kind::DaemonSet)
        .iter()
        .map(|d| name_of(d).to_string())
        .collect()
}

/// The ControllerRevision of `hash` made the newest: created after the DaemonSet's newest, or
/// renumbered past it when the template goes back to an earlier revision's (the Rollout reads
/// the highest number as the template new pods are made from).
fn ensure_newest_revision(
    api: &mut ApiServer,
    ds: &Value,
    hash: &str,
    template: &Value,
    now: jiff::Timestamp,
) {
    let name = name_of(ds);
    let revision_name = format!("{name}-{hash}");
    let revisions = revisions_of(api, ds);
    let number = |r: &Value| r["revision"].as_i64().unwrap_or(0);
    let newest = revisions.iter().map(number).max().unwrap_or(0);
    if let Some(existing) = revisions.iter().find(|r| name_of(r) == revision_name) {
        if number(existing) < newest {
            let patch = json!({"revision": newest + 1});
            let _ = api.patch(
                Kind::ControllerRevision,
                &revision_name,
                &patch,
                crate::api_model::Endpoint::Main,
            );
        }
        return;
    }
    let mut data = json!({"spec": {"template": template}});
    data["spec"]["template"]["$patch"] = json!("replace");
    let revision = json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name,
            "namespace": "default",
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                "uid": uid(ds), "controller": true
            }]
        },
        "revision": newest + 1,
        "data": data
    });
    let _ = api.create(Kind::ControllerRevision, revision, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_model::Endpoint;

    const T0: jiff::Timestamp = jiff::Timestamp::UNIX_EPOCH;

    fn world(nodes: usize) -> (ApiServer, DaemonSetController, KubeletConfig, Rng) {
        let mut api = ApiServer::new();
        for i in 0..nodes {
            let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{i}")}});
            api.create(Kind::Node, node, T0).unwrap();
        }
        let ds = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"updateStrategy": {"type": "OnDelete"}, "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "app", "image": "agent:1"}]}}}
        });
        api.create(Kind::DaemonSet, ds, T0).unwrap();
        let kubelet = KubeletConfig {
            startup_ms: (10, 10),
            bad_images: ["agent:bad".to_string()].into(),
        };
        (api, DaemonSetController::default(), kubelet, Rng::new(1))
    }

    /// Syncs, then makes the pods it started ready, then syncs again for the status.
    fn settle(api: &mut ApiServer, c: &mut DaemonSetController, k: &KubeletConfig, rng: &mut Rng) {
        let mut cluster = crate::kubelet::Cluster::default();
        for f in c.sync(api, "agent", 0, T0, k, rng) {
            if let Followup::PodReady { pod, .. } = f {
                cluster.pod_ready(api, &pod, T0);
            }
        }
        c.sync(api, "agent", 0, T0, k, rng);
    }

    fn set_image(api: &mut ApiServer, image: &str) {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
        api.patch(Kind::DaemonSet, "agent", &patch, Endpoint::Main)
            .unwrap();
    }

    fn ds(api: &ApiServer) -> Value {
        api.get(Kind::DaemonSet, "agent").unwrap().clone()
    }

    fn revisions_by_node(api: &ApiServer) -> Vec<String> {
        let mut pods = pods_of(api, &ds(api));
        pods.sort_by_key(|p| node_of(p).unwrap_or_default().to_string());
        pods.iter()
            .map(|p| revision_of(p).unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn a_pod_per_node_replaced_only_when_deleted_from_the_current_template() {
        let (mut api, mut c, k, mut rng) = world(3);
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(ds(&api)["status"]["numberReady"], 3);
        assert_eq!(ds(&api)["status"]["desiredNumberScheduled"], 3);
        let first = update_revision(&api, &ds(&api)).unwrap();
        set_image(&mut api, "agent:2");
        settle(&mut api, &mut c, &k, &mut rng);
        let second = update_revision(&api, &ds(&api)).unwrap();
        assert_ne!(first, second);
        // OnDelete: nothing moves until a pod is deleted.
        assert_eq!(revisions_by_node(&api), vec![first.clone(); 3]);
        assert_eq!(ds(&api)["status"]["updatedNumberScheduled"], 0);
        let on_node_1 = pods_of(&api, &ds(&api))
            .into_iter()
            .find(|p| node_of(p) == Some("node-1"))
            .unwrap();
        api.delete(Kind::Pod, name_of(&on_node_1), None).unwrap();
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(
            revisions_by_node(&api),
            vec![first.clone(), second.clone(), first.clone()]
        );
        assert_eq!(ds(&api)["status"]["updatedNumberScheduled"], 1);
        // Back to the first template: its revision is renumbered the newest.
        set_image(&mut api, "agent:1");
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(update_revision(&api, &ds(&api)), Some(first));
        assert_eq!(revisions_of(&api, &ds(&api)).len(), 2);
    }

    #[test]
    fn a_bad_image_never_gets_ready() {
        let (mut api, mut c, k, mut rng) = world(2);
        set_image(&mut api, "agent:bad");
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(ds(&api)["status"]["currentNumberScheduled"], 2);
        assert_eq!(ds(&api)["status"]["numberReady"], 0);
    }
}
