//! The StatefulSet controller and its pods, as a Rollout driving a StatefulSet depends on
//! them (`rollouts.sluice.dev/statefulset`): a ControllerRevision per distinct template (the
//! update revision is the current template's), a partitioned rolling update that replaces one
//! pod at a time, the highest ordinal first, and only ordinals at or above the partition, each
//! once every pod is ready; the status counts the Rollout reads. Like the ReplicaSet
//! controller it writes straight to the API model: it is the world the Rollout controller acts
//! on, not what is under test. Its pods are kept here, by ordinal, not as Pod objects: the
//! Rollout reads only the StatefulSet's status.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api_model::{ApiServer, Kind, WatchEvent, name_of};
use crate::kubelet::{KubeletConfig, image_of_template};
use crate::rng::Rng;

/// One pod of a StatefulSet: the revision (hash) it runs and whether it is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ordinal {
    revision: String,
    ready: bool,
}

/// Work the StatefulSet controller asks to be scheduled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followup {
    OrdinalReady {
        stateful_set: String,
        ordinal: usize,
        revision: String,
        at_ms: u64,
    },
}

#[derive(Debug, Default)]
pub struct StatefulSetController {
    pods: BTreeMap<String, Vec<Ordinal>>,
}

/// The hash the StatefulSet controller names a revision by: of the template, so that an edit
/// back to an earlier template is that revision again.
pub fn revision_hash(template: &Value) -> String {
    sluice_api::pod_template_hash::hash_go_ordered_json(&template.to_string())
}

/// The partition of a StatefulSet's rolling update (unset: 0).
pub fn partition(sts: &Value) -> i64 {
    sts.pointer("/spec/updateStrategy/rollingUpdate/partition")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

pub fn replicas(sts: &Value) -> i64 {
    sts.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// The hash of `status.updateRevision` / `status.currentRevision` (the part after the
/// StatefulSet's name).
pub fn status_revision<'a>(sts: &'a Value, field: &str) -> Option<&'a str> {
    let revision = sts.pointer(&format!("/status/{field}"))?.as_str()?;
    Some(
        revision
            .strip_prefix(name_of(sts))
            .and_then(|r| r.strip_prefix('-'))
            .unwrap_or(revision),
    )
}

impl StatefulSetController {
    /// Which StatefulSet a committed change makes the controller look at: a spec it has not
    /// acted on yet. Its own status writes need no second look.
    pub fn interested_in(kind: Kind, event: &WatchEvent) -> Option<String> {
        let WatchEvent::Applied(sts) = event else {
            return None;
        };
        let generation = sts.pointer("/metadata/generation").and_then(Value::as_i64);
        let observed = sts
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64);
        (kind == Kind::StatefulSet && generation != observed).then(|| name_of(sts).to_string())
    }

    /// One sync of StatefulSet `name`: its revisions, at most one pod replaced, its status.
    pub fn sync(
        &mut self,
        api: &mut ApiServer,
        name: &str,
        now_ms: u64,
        now: jiff::Timestamp,
        kubelet: &KubeletConfig,
        rng: &mut Rng,
    ) -> Vec<Followup> {
        let Some(sts) = api.get(Kind::StatefulSet, name).cloned() else {
            self.pods.remove(name);
            return Vec::new();
        };
        let template = sts.pointer("/spec/template").cloned().unwrap_or_default();
        let update = revision_hash(&template);
        ensure_revision(api, &sts, &update, &template, now);
        let replicas = usize::try_from(replicas(&sts).max(0)).unwrap_or(0);
        let partition = usize::try_from(partition(&sts).max(0)).unwrap_or(0);
        let current = status_revision(&sts, "currentRevision")
            .map(str::to_string)
            .unwrap_or_else(|| update.clone());
        let mut followups = Vec::new();
        let pods = self.pods.entry(name.to_string()).or_default();
        let start = |ordinal: usize, revision: &str, rng: &mut Rng, followups: &mut Vec<_>| {
            if !kubelet.bad_images.contains(image_of_template(&template)) {
                followups.push(Followup::OrdinalReady {
                    stateful_set: name.to_string(),
                    ordinal,
                    revision: revision.to_string(),
                    at_ms: now_ms + rng.range(kubelet.startup_ms),
                });
            }
        };
        // Missing pods are made in order, on the current revision below the partition.
        while pods.len() < replicas {
            let ordinal = pods.len();
            let revision = if ordinal >= partition {
                update.clone()
            } else {
                current.clone()
            };
            start(ordinal, &revision, rng, &mut followups);
            pods.push(Ordinal {
                revision,
                ready: false,
            });
        }
        pods.truncate(replicas);
        // One pod at a time, the highest ordinal first, once every pod is ready.
        if pods.iter().all(|p| p.ready)
            && let Some(ordinal) = (partition..pods.len())
                .rev()
                .find(|&i| pods[i].revision != update)
        {
            pods[ordinal] = Ordinal {
                revision: update.clone(),
                ready: false,
            };
            start(ordinal, &update, rng, &mut followups);
        }
        let updated = pods.iter().filter(|p| p.revision == update).count();
        let ready = pods.iter().filter(|p| p.ready).count();
        let current = if updated == replicas && ready == replicas {
            update.clone()
        } else {
            current
        };
        let on_current = pods.iter().filter(|p| p.revision == current).count();
        let status = json!({
            "observedGeneration": sts.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "replicas": pods.len(),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "updatedReplicas": updated,
            "currentReplicas": on_current,
            "updateRevision": format!("{name}-{update}"),
            "currentRevision": format!("{name}-{current}"),
        });
        api.put_status(Kind::StatefulSet, name, status);
        followups
    }

    /// Ordinal `ordinal` became ready, if it still runs `revision` (it may have been replaced
    /// since it started).
    pub fn ordinal_ready(&mut self, stateful_set: &str, ordinal: usize, revision: &str) -> bool {
        match self
            .pods
            .get_mut(stateful_set)
            .and_then(|pods| pods.get_mut(ordinal))
        {
            Some(pod) if pod.revision == revision && !pod.ready => {
                pod.ready = true;
                true
            }
            _ => false,
        }
    }
}

/// The ControllerRevision of `hash`, made when the template is new: numbered after the
/// StatefulSet's newest, holding the template as the StatefulSet controller stores it.
fn ensure_revision(
    api: &mut ApiServer,
    sts: &Value,
    hash: &str,
    template: &Value,
    now: jiff::Timestamp,
) {
    let name = name_of(sts);
    let revision_name = format!("{name}-{hash}");
    if api.get(Kind::ControllerRevision, &revision_name).is_some() {
        return;
    }
    let newest = api
        .list(Kind::ControllerRevision)
        .iter()
        .filter(|r| owner(r) == Some(name))
        .filter_map(|r| r["revision"].as_i64())
        .max()
        .unwrap_or(0);
    let mut data = json!({"spec": {"template": template}});
    data["spec"]["template"]["$patch"] = json!("replace");
    let revision = json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name,
            "namespace": "default",
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                "uid": sts.pointer("/metadata/uid").cloned().unwrap_or_default(),
                "controller": true
            }]
        },
        "revision": newest + 1,
        "data": data
    });
    let _ = api.create(Kind::ControllerRevision, revision, now);
}

/// The StatefulSet a ControllerRevision belongs to.
pub fn owner(revision: &Value) -> Option<&str> {
    crate::kubelet::owner_name(revision)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(replicas: i64) -> (ApiServer, StatefulSetController, KubeletConfig, Rng) {
        let mut api = ApiServer::new();
        let sts = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "db", "image": "db:1"}]}}}
        });
        api.create(Kind::StatefulSet, sts, jiff::Timestamp::UNIX_EPOCH)
            .unwrap();
        let kubelet = KubeletConfig {
            startup_ms: (10, 10),
            bad_images: Default::default(),
        };
        (api, StatefulSetController::default(), kubelet, Rng::new(1))
    }

    /// Syncs until nothing is left to do, making pods ready as they come.
    fn settle(
        api: &mut ApiServer,
        c: &mut StatefulSetController,
        k: &KubeletConfig,
        rng: &mut Rng,
    ) {
        for _ in 0..50 {
            let followups = c.sync(api, "db", 0, jiff::Timestamp::UNIX_EPOCH, k, rng);
            if followups.is_empty() {
                return;
            }
            for Followup::OrdinalReady {
                ordinal, revision, ..
            } in followups
            {
                c.ordinal_ready("db", ordinal, &revision);
            }
        }
    }

    fn set_image(api: &mut ApiServer, image: &str) {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": image}]}}}});
        api.patch(
            Kind::StatefulSet,
            "db",
            &patch,
            crate::api_model::Endpoint::Main,
        )
        .unwrap();
    }

    fn set_partition(api: &mut ApiServer, p: i64) {
        let patch = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": p}}}});
        api.patch(
            Kind::StatefulSet,
            "db",
            &patch,
            crate::api_model::Endpoint::Main,
        )
        .unwrap();
    }

    fn status(api: &ApiServer, field: &str) -> Value {
        api.get(Kind::StatefulSet, "db").unwrap()["status"][field].clone()
    }

    #[test]
    fn a_partition_updates_only_the_ordinals_at_or_above_it() {
        let (mut api, mut c, k, mut rng) = world(4);
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(status(&api, "readyReplicas"), 4);
        let first = status(&api, "currentRevision");
        set_partition(&mut api, 4);
        set_image(&mut api, "db:2");
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(status(&api, "updatedReplicas"), 0, "partition 4: none");
        set_partition(&mut api, 3);
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(status(&api, "updatedReplicas"), 1);
        assert_eq!(status(&api, "currentRevision"), first);
        set_partition(&mut api, 0);
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(status(&api, "updatedReplicas"), 4);
        assert_eq!(
            status(&api, "currentRevision"),
            status(&api, "updateRevision")
        );
        // Back to the first template: the first revision is the update revision again.
        set_partition(&mut api, 4);
        set_image(&mut api, "db:1");
        settle(&mut api, &mut c, &k, &mut rng);
        assert_eq!(status(&api, "updateRevision"), first);
        assert_eq!(api.list(Kind::ControllerRevision).len(), 2);
    }
}
