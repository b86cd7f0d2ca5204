//! Taking over a Rollout that Argo Rollouts 1.8 or earlier has been managing: its ReplicaSet,
//! named with the pod-template hash of the encoders before Argo 1.9, is adopted as is, no new
//! ReplicaSet appears and no pod restarts. (`takeover_from_argo_objects_moves_nothing.rs`
//! starts from objects Argo 1.9.1 wrote.)

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for, wait_for_object};
use sluice_e2e::*;

/// Argo's own published check value: Argo 1.8 and earlier hash this template to
/// `7bb4fbc896` (Argo 1.9.0 and later to `5f78d78c4d`).
const ARGO_HASH: &str = "7bb4fbc896";

fn template() -> serde_json::Value {
    json!({
        "metadata": {"labels": {"name": "red"}},
        "spec": {
            "containers": [{
                "name": "red",
                "image": "red",
                "imagePullPolicy": "Always",
                "terminationMessagePath": "/dev/termination-log"
            }],
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "securityContext": {}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_managed_rollout_is_adopted_without_new_replica_set_or_pod_restart() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "takeover").await.unwrap();
    let rollouts = ns.api::<Rollout>();
    let rss = ns.api::<ReplicaSet>();
    let pods = ns.api::<Pod>();

    // What Argo Rollouts leaves behind after deploying revision 1.
    let ro: Rollout = serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "red", "annotations": {"rollout.argoproj.io/revision": "1"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"name": "red"}},
            "template": template(),
            "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}
        }
    }))
    .unwrap();
    let ro = rollouts.create(&PostParams::default(), &ro).await.unwrap();
    rollouts
        .patch_status(
            "red",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "currentPodHash": ARGO_HASH,
                "stableRS": ARGO_HASH,
                "currentStepIndex": 2,
                "observedGeneration": "1",
                "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2,
                "HPAReplicas": 2, "selector": "name=red", "phase": "Healthy"
            }})),
        )
        .await
        .unwrap();
    let mut rs_template = template();
    rs_template["metadata"]["labels"]["rollouts-pod-template-hash"] = json!(ARGO_HASH);
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": format!("red-{ARGO_HASH}"),
            "labels": {"name": "red", "rollouts-pod-template-hash": ARGO_HASH},
            "annotations": {
                "rollout.argoproj.io/revision": "1",
                "rollout.argoproj.io/desired-replicas": "2"
            },
            "ownerReferences": [{
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "red",
                "uid": ro.metadata.uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"name": "red", "rollouts-pod-template-hash": ARGO_HASH}},
            "template": rs_template
        }
    }))
    .unwrap();
    rss.create(&PostParams::default(), &rs).await.unwrap();
    wait_for_object(
        &rss,
        &format!("red-{ARGO_HASH}"),
        TIMEOUT,
        "2 available",
        |rs| rs.status.as_ref().and_then(|s| s.available_replicas) == Some(2),
    )
    .await
    .unwrap();
    let pod_uids = || async {
        pods.list(&ListParams::default().labels("name=red"))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect::<BTreeSet<_>>()
    };
    let before = pod_uids().await;
    assert_eq!(before.len(), 2);

    // Sluice takes over.
    let _controller = start_controller(&env, &ns);
    wait_for("Sluice to observe the rollout", TIMEOUT, || async {
        let ro = rollouts.get("red").await?;
        let conds = ro
            .status
            .clone()
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        if observed_phase(&ro) == Some(RolloutPhase::Healthy) && !conds.is_empty() {
            Ok(ro)
        } else {
            anyhow::bail!("{:?}", ro.status)
        }
    })
    .await
    .unwrap();
    let names: Vec<String> = rss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    assert_eq!(names, vec![format!("red-{ARGO_HASH}")], "no new ReplicaSet");
    assert_eq!(pod_uids().await, before, "no pod restarted");

    // And it is really managed: an update rolls as a canary.
    set_image(&rollouts, "red", "blue").await;
    wait_phase(&rollouts, "red", RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(&ns, "red", &[("red", 1), ("blue", 1)], TIMEOUT).await;
}
