//! Objects exactly as Argo Rollouts 1.9.1 wrote them (`testdata/argo-objects/v1.9.1`), put
//! back on the local control plane: the Rollout with its status, its ReplicaSets (owned by
//! the new Rollout's uid, their pods made by kube-controller-manager) and its Services.
//!
//! Times in the captured status and annotations are moved to the moment of loading, keeping
//! their distance from each other, so that a pause or a scale-down delay that was running
//! when the objects were captured is still running when a controller takes over.

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::Value;
use sluice_api::Rollout;
use sluice_testenv::harness::{TestNamespace, wait_for_object};

use crate::TIMEOUT;

/// The captured moments (file stems), as listed in the directory's README.
pub const MOMENTS: &[&str] = &[
    "canary-healthy",
    "canary-paused-step-1",
    "canary-paused-timed-step-3",
    "canary-aborted",
    "bluegreen-healthy",
    "bluegreen-preview-paused",
    "bluegreen-promoted-old-within-scale-down-delay",
];

/// One captured moment, as parsed documents.
#[derive(Clone)]
pub struct Captured {
    pub name: String,
    pub rollout: Value,
    pub replica_sets: Vec<Value>,
    pub services: Vec<Value>,
}

/// Reads a captured moment.
pub fn read(moment: &str) -> anyhow::Result<Captured> {
    let path = sluice_testenv::harness::repo_root()
        .join("testdata/argo-objects/v1.9.1")
        .join(format!("{moment}.yaml"));
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    parse(moment, &text)
}

/// Parses a captured moment from its YAML text.
pub fn parse(moment: &str, text: &str) -> anyhow::Result<Captured> {
    let mut rollout = None;
    let mut replica_sets = Vec::new();
    let mut services = Vec::new();
    for doc in sluice_api::yaml::from_multi_doc_str(text)? {
        match doc["kind"].as_str() {
            Some("Rollout") => rollout = Some(doc),
            Some("ReplicaSet") => replica_sets.push(doc),
            Some("Service") => services.push(doc),
            other => bail!("{moment}: unexpected kind {other:?}"),
        }
    }
    Ok(Captured {
        name: moment.to_owned(),
        rollout: rollout.with_context(|| format!("{moment}: no Rollout"))?,
        replica_sets,
        services,
    })
}

impl Captured {
    pub fn rollout_name(&self) -> &str {
        self.rollout["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
    }

    /// Replaces every occurrence of the pod-template hash `from` by `to`: ReplicaSet names,
    /// labels and selectors, Service selectors and the Rollout's status. How the same moment
    /// looks when an earlier release named the ReplicaSets.
    pub fn rehash(&mut self, from: &str, to: &str) {
        for doc in std::iter::once(&mut self.rollout)
            .chain(self.replica_sets.iter_mut())
            .chain(self.services.iter_mut())
        {
            replace_strings(doc, from, to);
        }
    }

    /// Creates the objects in `ns` as Argo left them and waits until each ReplicaSet has the
    /// available pods the capture shows.
    pub async fn load(&self, ns: &TestNamespace) -> anyhow::Result<()> {
        let now = Timestamp::now();
        let shift = self.capture_time().map(|latest| now.duration_since(latest));
        let post = PostParams::default();
        for svc in &self.services {
            let mut svc = svc.clone();
            clean_metadata(&mut svc, ns.name());
            if let Some(spec) = svc["spec"].as_object_mut() {
                // Addresses are the capturing cluster's.
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
            svc.as_object_mut().map(|o| o.remove("status"));
            let svc: Service = serde_json::from_value(svc).context("decoding a Service")?;
            ns.api::<Service>()
                .create(&post, &svc)
                .await
                .context("creating a Service")?;
        }
        let mut ro = self.rollout.clone();
        clean_metadata(&mut ro, ns.name());
        let mut status = ro
            .as_object_mut()
            .and_then(|o| o.remove("status"))
            .unwrap_or(Value::Null);
        let ro: Rollout = serde_json::from_value(ro).context("decoding the Rollout")?;
        let created = ns
            .api::<Rollout>()
            .create(&post, &ro)
            .await
            .context("creating the Rollout")?;
        let uid = created.metadata.uid.clone().unwrap_or_default();
        for rs in &self.replica_sets {
            let mut rs = rs.clone();
            clean_metadata(&mut rs, ns.name());
            rs.as_object_mut().map(|o| o.remove("status"));
            if let Some(owners) = rs["metadata"]["ownerReferences"].as_array_mut() {
                for owner in owners {
                    owner["uid"] = Value::String(uid.clone());
                }
            }
            if let Some(shift) = shift {
                shift_times(&mut rs["metadata"]["annotations"], shift);
            }
            let rs: ReplicaSet =
                serde_json::from_value(rs.clone()).with_context(|| format!("decoding {rs}"))?;
            ns.api::<ReplicaSet>()
                .create(&post, &rs)
                .await
                .context("creating a ReplicaSet")?;
        }
        if let Some(shift) = shift {
            shift_times(&mut status, shift);
        }
        // The capture was settled: Argo had observed the spec it shows.
        status["observedGeneration"] =
            Value::String(created.metadata.generation.unwrap_or(1).to_string());
        ns.api::<Rollout>()
            .patch_status(
                self.rollout_name(),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": status })),
            )
            .await
            .context("writing the Rollout's status")?;
        for rs in &self.replica_sets {
            let name = rs["metadata"]["name"].as_str().unwrap_or_default();
            let want = rs["status"]["availableReplicas"].as_i64().unwrap_or(0) as i32;
            wait_for_object(
                &ns.api::<ReplicaSet>(),
                name,
                TIMEOUT,
                &format!("{want} available"),
                |rs| {
                    rs.status
                        .as_ref()
                        .and_then(|s| s.available_replicas)
                        .unwrap_or(0)
                        == want
                },
            )
            .await?;
        }
        Ok(())
    }

    /// The latest time written in the Rollout's status: the moment of the capture, as near
    /// as the objects tell (a scale-down deadline lies after it).
    pub fn capture_time(&self) -> Option<Timestamp> {
        let mut times = Vec::new();
        collect_times(&self.rollout["status"], &mut times);
        times.into_iter().max()
    }
}

fn clean_metadata(doc: &mut Value, namespace: &str) {
    if let Some(meta) = doc["metadata"].as_object_mut() {
        meta.insert("namespace".into(), Value::String(namespace.to_owned()));
        meta.remove("resourceVersion");
        meta.remove("uid");
        meta.remove("creationTimestamp");
    }
}

fn replace_strings(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(s) if s.contains(from) => *s = s.replace(from, to),
        Value::Array(items) => items.iter_mut().for_each(|v| replace_strings(v, from, to)),
        Value::Object(entries) => {
            let renamed: BTreeMap<String, Value> = std::mem::take(entries)
                .into_iter()
                .map(|(k, mut v)| {
                    replace_strings(&mut v, from, to);
                    (k.replace(from, to), v)
                })
                .collect();
            entries.extend(renamed);
        }
        _ => {}
    }
}

fn parse_time(s: &str) -> Option<Timestamp> {
    (s.len() >= 20 && s.as_bytes()[4] == b'-' && s.as_bytes()[10] == b'T')
        .then(|| s.parse().ok())
        .flatten()
}

fn collect_times(value: &Value, out: &mut Vec<Timestamp>) {
    match value {
        Value::String(s) => out.extend(parse_time(s)),
        Value::Array(items) => items.iter().for_each(|v| collect_times(v, out)),
        Value::Object(entries) => entries.values().for_each(|v| collect_times(v, out)),
        _ => {}
    }
}

fn shift_times(value: &mut Value, by: SignedDuration) {
    match value {
        Value::String(s) => {
            if let Some(t) = parse_time(s).and_then(|t| t.checked_add(by).ok()) {
                *s = t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| shift_times(v, by)),
        Value::Object(entries) => entries.values_mut().for_each(|v| shift_times(v, by)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_moment_decodes_into_the_typed_objects() {
        for moment in MOMENTS {
            let captured = read(moment).unwrap();
            let mut docs = vec![captured.rollout.clone()];
            docs.extend(captured.replica_sets.iter().cloned());
            for mut doc in docs {
                clean_metadata(&mut doc, "ns");
                if let Some(at) = captured.capture_time() {
                    shift_times(&mut doc, Timestamp::now().duration_since(at));
                }
                let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
                let result = if kind == "Rollout" {
                    serde_json::from_value::<Rollout>(doc).map(drop)
                } else {
                    serde_json::from_value::<ReplicaSet>(doc).map(drop)
                };
                result.unwrap_or_else(|e| panic!("{moment} {kind}: {e}"));
            }
            assert!(captured.capture_time().is_some(), "{moment}");
        }
    }
}
