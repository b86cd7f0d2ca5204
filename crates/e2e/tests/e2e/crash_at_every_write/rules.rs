//! The rules the crash campaign holds at every state of the namespace, the same as the
//! simulation's: what a controller killed at any write must never leave behind, nor do on its
//! way back.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::ResourceExt;
use serde_json::Value;
use sluice_e2e::image_of;
use sluice_e2e::routing::vs_weights;
use sluice_engine::ReplicaSetExt;
use sluice_engine::labels::POD_TEMPLATE_HASH;

/// A user's annotation on the Rollout, which no write may lose.
pub const KEEP: &str = "e2e.sluice.dev/keep";
const REVISION: &str = "rollout.argoproj.io/revision";

/// What a case's rules need to know of it.
#[derive(Clone, Debug)]
pub struct Expect {
    pub replicas: i32,
    /// The blue-green active Service, if any.
    pub active_service: Option<String>,
}

/// The namespace at one moment.
#[derive(Clone, Debug, Default)]
pub struct View {
    pub services: Vec<Service>,
    /// The Istio VirtualService `vs`, when the case is routed.
    pub virtual_service: Option<Value>,
    pub replica_sets: Vec<ReplicaSet>,
    pub pods: Vec<Pod>,
    pub rollout: Option<sluice_api::Rollout>,
}

/// Every rule `view` breaks, each a sentence:
///
/// - one ReplicaSet per pod template (per owner), each with its revision annotation;
/// - no annotation lost (one a user put on the Rollout, and the Rollout's revision);
/// - no Service selecting, and no router sending traffic to, a pod-template hash that has no
///   ReplicaSet;
/// - no weight ahead of the ready pods: a Service the VirtualService gives weight w selects at
///   least ceil(w × replicas / 100) ready pods, and a blue-green active Service all of them.
pub fn broken(view: &View, expect: &Expect) -> Vec<String> {
    let mut broken = Vec::new();
    let mut templates: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for rs in &view.replica_sets {
        let owner = rs
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
            .unwrap_or_default();
        templates
            .entry((owner, image_of(rs)))
            .or_default()
            .push(rs.name_any());
        if !rs.annotations().contains_key(REVISION)
            && rs.owner_references().iter().any(|o| o.kind == "Rollout")
        {
            broken.push(format!("rs/{} has no revision annotation", rs.name_any()));
        }
    }
    for ((_, image), names) in &templates {
        if names.len() > 1 {
            broken.push(format!(
                "{} ReplicaSets run {image}: {names:?}",
                names.len()
            ));
        }
    }
    if let Some(ro) = &view.rollout {
        if !ro.annotations().contains_key(KEEP) {
            broken.push(format!("the Rollout lost {KEEP}"));
        }
        if !ro.annotations().contains_key(REVISION) {
            broken.push("the Rollout lost its revision annotation".into());
        }
    }
    let hashes: BTreeSet<&str> = view
        .replica_sets
        .iter()
        .filter_map(|rs| rs.pod_hash())
        .collect();
    let selected = |name: &str| -> Option<String> {
        view.services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))?
            .spec
            .as_ref()?
            .selector
            .as_ref()?
            .get(POD_TEMPLATE_HASH)
            .cloned()
    };
    for svc in &view.services {
        let name = svc.name_any();
        if let Some(hash) = selected(&name)
            && !hashes.contains(hash.as_str())
        {
            broken.push(format!(
                "Service {name} selects {hash}, which has no ReplicaSet"
            ));
        }
    }
    let ready = |hash: &str| ready_pods(&view.pods, hash);
    if let Some(vs) = &view.virtual_service
        && let Some((canary, stable)) = vs_weights(vs, "canary", "stable")
    {
        for (svc, weight) in [("canary", canary), ("stable", stable)] {
            if weight <= 0 {
                continue;
            }
            let need = (weight * i64::from(expect.replicas) + 99) / 100;
            match selected(svc) {
                None => broken.push(format!(
                    "the VirtualService sends {weight} to Service {svc}, which selects no hash"
                )),
                Some(hash) => {
                    let up = ready(&hash);
                    if up < need {
                        broken.push(format!(
                            "the VirtualService sends {weight} to Service {svc} ({hash}) with {up} ready pods (needs {need})"
                        ));
                    }
                }
            }
        }
    }
    if let Some(active) = &expect.active_service
        && let Some(hash) = selected(active)
    {
        let up = ready(&hash);
        if up < i64::from(expect.replicas) {
            broken.push(format!(
                "the active Service selects {hash} with {up} ready pods"
            ));
        }
    }
    broken
}

/// Pods of `hash` that are Ready and not being deleted.
fn ready_pods(pods: &[Pod], hash: &str) -> i64 {
    pods.iter()
        .filter(|p| p.labels().get(POD_TEMPLATE_HASH).map(String::as_str) == Some(hash))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count() as i64
}
