//! Ephemeral pod metadata against the real control plane: blue-green preview pods carry
//! `previewMetadata`, and on promotion the very same pods (no restart) are relabelled with
//! `activeMetadata`, as is their ReplicaSet's template, which records what it injects.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestNamespace, wait_for};
use sluice_e2e::*;
use sluice_engine::labels::{EPHEMERAL_METADATA, POD_TEMPLATE_HASH};

/// Names and uids of the live pods of one pod-template hash, with their `role` label.
async fn pods_of(ns: &TestNamespace, hash: &str) -> anyhow::Result<BTreeMap<String, PodRole>> {
    let pods: Api<Pod> = ns.api();
    let list = pods
        .list(&ListParams::default().labels(&format!("{POD_TEMPLATE_HASH}={hash}")))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let role = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("role"))
                .cloned();
            let name = p.metadata.name.unwrap_or_default();
            (
                name,
                PodRole {
                    uid: p.metadata.uid,
                    role,
                },
            )
        })
        .collect())
}

#[derive(Debug, Clone, PartialEq)]
struct PodRole {
    uid: Option<String>,
    role: Option<String>,
}

/// Waits until `replicas` pods of `hash` all carry `role=<role>`; returns them.
async fn wait_pods_with_role(
    ns: &TestNamespace,
    hash: &str,
    replicas: usize,
    role: &str,
) -> BTreeMap<String, PodRole> {
    wait_for(
        &format!("{replicas} pods of {hash} labelled role={role}"),
        Duration::from_secs(30),
        || async {
            let pods = pods_of(ns, hash).await?;
            let labelled = pods.values().all(|p| p.role.as_deref() == Some(role));
            if pods.len() == replicas && labelled {
                Ok(pods)
            } else {
                bail!("{pods:?}")
            }
        },
    )
    .await
    .unwrap()
}

async fn replica_set_of(ns: &TestNamespace, hash: &str) -> ReplicaSet {
    let rss: Api<ReplicaSet> = ns.api();
    let list = rss
        .list(&ListParams::default().labels(&format!("{POD_TEMPLATE_HASH}={hash}")))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1, "one ReplicaSet of {hash}");
    list.items.into_iter().next().unwrap()
}

fn template_role(rs: &ReplicaSet) -> Option<String> {
    rs.spec
        .as_ref()?
        .template
        .as_ref()?
        .metadata
        .as_ref()?
        .labels
        .as_ref()?
        .get("role")
        .cloned()
}

fn record(rs: &ReplicaSet) -> Option<String> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(EPHEMERAL_METADATA)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluegreen_preview_pods_are_relabelled_active_in_place_on_promotion() {
    let (_env, ns, _controller) = setup("ephemeral-md").await;
    let api = rollouts(&ns);
    let name = "md";
    for svc in ["md-active", "md-preview"] {
        ns.apply_yaml(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc},
                    "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}})
            .to_string(),
        )
        .await
        .unwrap();
    }
    let mut manifest: serde_json::Value =
        serde_json::from_str(&canary_rollout(name, 2, "app:v1", json!([]), json!({}))).unwrap();
    manifest["spec"]["strategy"] = json!({"blueGreen": {
        "activeService": "md-active", "previewService": "md-preview",
        "autoPromotionEnabled": false, "scaleDownDelaySeconds": 5,
        "previewMetadata": {"labels": {"role": "preview"}},
        "activeMetadata": {"labels": {"role": "active"}}
    }});
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    let ro = wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let rev1 = ro.status.unwrap().current_pod_hash.unwrap();
    wait_pods_with_role(&ns, &rev1, 2, "active").await;

    set_image(&api, name, "app:v2").await;
    let ro = wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    let rev2 = ro.status.unwrap().current_pod_hash.unwrap();
    let preview = wait_pods_with_role(&ns, &rev2, 2, "preview").await;
    let rs = replica_set_of(&ns, &rev2).await;
    let rs_name = rs.metadata.name.clone();
    assert_eq!(template_role(&rs).as_deref(), Some("preview"));
    assert_eq!(
        record(&rs).as_deref(),
        Some(r#"{"labels":{"role":"preview"}}"#)
    );
    // The old active pods keep theirs meanwhile.
    assert!(
        pods_of(&ns, &rev1)
            .await
            .unwrap()
            .values()
            .all(|p| p.role.as_deref() == Some("active"))
    );

    promote(&api, name).await;
    let ro = wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(
        ro.status.unwrap().current_pod_hash.as_deref(),
        Some(rev2.as_str()),
        "the pod-template hash does not change"
    );
    let active = wait_pods_with_role(&ns, &rev2, 2, "active").await;
    let same_pods = |pods: &BTreeMap<String, PodRole>| {
        pods.iter()
            .map(|(n, p)| (n.clone(), p.uid.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        same_pods(&active),
        same_pods(&preview),
        "the same pods, relabelled without a restart"
    );
    // The template follows its pods (pods are relabelled first, the template after them).
    let rs = wait_for("the template to carry role=active", TIMEOUT, || async {
        let rs = replica_set_of(&ns, &rev2).await;
        anyhow::ensure!(
            template_role(&rs).as_deref() == Some("active"),
            "template role {:?}, record {:?}",
            template_role(&rs),
            record(&rs)
        );
        Ok(rs)
    })
    .await
    .unwrap();
    assert_eq!(rs.metadata.name, rs_name);
    assert_eq!(template_role(&rs).as_deref(), Some("active"));
    assert_eq!(
        record(&rs).as_deref(),
        Some(r#"{"labels":{"role":"active"}}"#)
    );
    let selector = rs.spec.unwrap().selector.match_labels.unwrap();
    assert_eq!(selector.get("role"), None);
    assert_eq!(
        selector.get(POD_TEMPLATE_HASH).map(String::as_str),
        Some(rev2.as_str())
    );
}
