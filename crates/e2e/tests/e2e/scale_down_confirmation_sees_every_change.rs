//! Before a plan scales a ReplicaSet down, it confirms that the ReplicaSets whose available
//! pods it counted are still the versions it counted (`ConfirmReplicaSet`). The confirmation
//! is a read of the ReplicaSet's metadata from the API server, not a write: this checks on the
//! real API server that it passes on the version counted, and refuses a ReplicaSet changed
//! since (a conflict, so the plan is decided again) or deleted since (not found).

use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use sluice_controller::cluster::{ClusterAccess, KubeCluster, WriteError};
use sluice_e2e::TIMEOUT;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};

const REPLICASET: &str = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: counted
spec:
  replicas: 0
  selector:
    matchLabels: {app: counted}
  template:
    metadata:
      labels: {app: counted}
    spec:
      containers:
      - name: app
        image: nginx:1.25
"#;

#[tokio::test]
async fn scale_down_confirmation_sees_every_change() {
    let env = TestEnv::shared().await.unwrap();
    let ns = TestNamespace::create(&env, "confirm").await.unwrap();
    ns.apply_yaml(REPLICASET).await.unwrap();
    let rss = ns.api::<ReplicaSet>();
    // kube-controller-manager writes the new ReplicaSet's status once: the version counted is
    // the one after that write, or that write is "another writer" to the first confirmation
    // (seen under load in CI).
    let counted = wait_for(
        "the ReplicaSet controller's first status",
        TIMEOUT,
        || async {
            let rs = rss.get("counted").await?;
            let observed = rs.status.as_ref().and_then(|s| s.observed_generation);
            anyhow::ensure!(observed == rs.metadata.generation, "status not written yet");
            Ok(rs.metadata.resource_version)
        },
    )
    .await
    .unwrap();
    let cluster = KubeCluster::new(env.client());

    cluster
        .confirm_replica_set(ns.name(), "counted", counted.as_deref())
        .await
        .expect("the version counted is confirmed");

    // Another writer changes the ReplicaSet: what was counted is no longer what is there.
    rss.patch(
        "counted",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"changed": "by someone else"}}})),
    )
    .await
    .unwrap();
    let refused = cluster
        .confirm_replica_set(ns.name(), "counted", counted.as_deref())
        .await;
    assert!(
        matches!(refused, Err(WriteError::Conflict)),
        "a changed ReplicaSet must be refused as a conflict, got {refused:?}"
    );
    // The confirmation read is immediate: the new version is confirmed right after the change.
    let now = rss.get("counted").await.unwrap().metadata.resource_version;
    cluster
        .confirm_replica_set(ns.name(), "counted", now.as_deref())
        .await
        .expect("the current version is confirmed");

    rss.delete("counted", &DeleteParams::default())
        .await
        .unwrap();
    let gone = cluster
        .confirm_replica_set(ns.name(), "counted", now.as_deref())
        .await;
    assert!(
        matches!(gone, Err(WriteError::NotFound)),
        "a deleted ReplicaSet must be refused as not found, got {gone:?}"
    );
}
