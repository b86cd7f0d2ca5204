//! The local control plane runs real controllers: a ReplicaSet gets its pods from the ReplicaSet
//! controller, the fake kubelet binds them and makes them Ready, and the ReplicaSet counts them.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for_object};

const REPLICASET: &str = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
"#;

#[tokio::test]
async fn replicaset_pods_become_ready() {
    let env = TestEnv::shared().await.unwrap();
    let ns = TestNamespace::create(&env, "rs-ready").await.unwrap();
    ns.apply_yaml(REPLICASET).await.unwrap();

    let rs = wait_for_object(
        &ns.api::<ReplicaSet>(),
        "web",
        Duration::from_secs(60),
        "3 ready and available replicas",
        |rs| {
            let status = rs.status.clone().unwrap_or_default();
            status.ready_replicas == Some(3) && status.available_replicas == Some(3)
        },
    )
    .await
    .unwrap();
    assert_eq!(rs.status.unwrap().replicas, 3);

    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 3);
    for pod in &pods {
        let name = pod.metadata.name.as_deref().unwrap();
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("ReplicaSet", "web"),
            "{name}"
        );
        let node = pod.spec.as_ref().unwrap().node_name.as_deref();
        assert_eq!(node, Some("fake-node-1"), "{name}");
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"), "{name}");
        assert!(status.pod_ip.is_some(), "{name} has no pod IP");
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "True", "{name}");
        assert!(ready.last_transition_time.is_some(), "{name}");
    }
}
