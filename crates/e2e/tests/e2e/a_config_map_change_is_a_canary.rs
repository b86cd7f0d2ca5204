//! Config rollouts (`rollouts.sluice.dev/config-rollout: "true"`, `--config-rollouts`): the
//! pods of a Rollout read immutable copies of the ConfigMap and Secret its template
//! references, named by their content's hash. A change of the ConfigMap is a new revision
//! that walks the steps (its pods read the new copy while the stable pods keep reading the
//! old one); an abort goes back to the stable pods, and the ConfigMap set back to its old
//! content is the stable revision again. Each copy passes to the ReplicaSets that read it,
//! and goes with the last of them (Kubernetes' garbage collector, `revisionHistoryLimit: 0`).

use std::collections::BTreeMap;

use anyhow::{bail, ensure};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::*;

const NAME: &str = "web";

fn rollout() -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": NAME, "annotations": {"rollouts.sluice.dev/config-rollout": "true"}},
        "spec": {
            "replicas": 2,
            "revisionHistoryLimit": 0,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "volumes": [{"name": "conf", "configMap": {"name": "app-config"}}],
                    "containers": [{
                        "name": NAME,
                        "image": "nginx:1.19-alpine",
                        "env": [{"name": "TOKEN", "valueFrom":
                                 {"secretKeyRef": {"name": "creds", "key": "token"}}}]
                    }]
                }
            },
            "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}
        }
    })
    .to_string()
}

async fn set_config(ns: &TestNamespace, mode: &str) {
    let patch = json!({"data": {"mode": mode}});
    ns.api::<ConfigMap>()
        .patch("app-config", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Each ReplicaSet of the Rollout (by pod-template hash) with its spec's replicas and the
/// ConfigMap and Secret its pods read.
async fn revisions(ns: &TestNamespace) -> BTreeMap<String, (i32, String, String)> {
    let list = ns
        .api::<ReplicaSet>()
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .map(|rs| {
            let hash = rs.metadata.labels.clone().unwrap_or_default()["rollouts-pod-template-hash"]
                .clone();
            let spec = rs.spec.unwrap();
            let pod = spec.template.unwrap().spec.unwrap();
            let config = pod.volumes.unwrap()[0].config_map.clone().unwrap().name;
            let secret = pod.containers[0].env.clone().unwrap()[0]
                .value_from
                .clone()
                .unwrap()
                .secret_key_ref
                .unwrap()
                .name;
            (hash, (spec.replicas.unwrap_or(1), config, secret))
        })
        .collect()
}

/// The copies of the ConfigMap: name → (its `mode`, the kinds and names of its owners).
async fn config_copies(ns: &TestNamespace) -> BTreeMap<String, (String, Vec<String>)> {
    ns.api::<ConfigMap>()
        .list(&ListParams::default().labels("rollouts.sluice.dev/config-copy-of"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|cm| cm.metadata.deletion_timestamp.is_none())
        .map(|cm| {
            assert_eq!(cm.immutable, Some(true), "a copy is immutable");
            let owners = cm
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|o| format!("{}/{}", o.kind, o.name))
                .collect();
            let mode = cm
                .data
                .unwrap_or_default()
                .get("mode")
                .cloned()
                .unwrap_or_default();
            (cm.metadata.name.unwrap(), (mode, owners))
        })
        .collect()
}

async fn setup_config_rollouts(env: &TestEnv, ns: &TestNamespace) -> RunningController {
    let mut args = controller_args(ns.name());
    args.config_rollouts = true;
    let controller = start_controller_with_args(env.client(), args);
    ns.apply_yaml(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-config"},
                "data": {"mode": "one"}})
        .to_string(),
    )
    .await
    .unwrap();
    ns.apply_yaml(
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                "stringData": {"token": "s3cret"}})
        .to_string(),
    )
    .await
    .unwrap();
    controller
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_map_change_is_a_canary() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, "config-rollout").await.unwrap();
    let _controller = setup_config_rollouts(&env, &ns).await;
    let api = rollouts(&ns);
    ns.apply_yaml(&rollout()).await.unwrap();
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;

    // The pods read copies, each owned by the ReplicaSet that reads it.
    let first = revisions(&ns).await;
    let (stable_hash, (_, one, creds)) = first
        .iter()
        .next()
        .map(|(h, r)| (h.clone(), r.clone()))
        .unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(
        one.starts_with("app-config-") && one.len() == "app-config-".len() + 10,
        "{one}"
    );
    assert!(creds.starts_with("creds-"), "{creds}");
    let secret: Secret = ns.api().get(&creds).await.unwrap();
    assert_eq!(secret.immutable, Some(true));
    assert_eq!(secret.data.unwrap()["token"].0, b"s3cret");
    let stable_rs = format!("ReplicaSet/{NAME}-{stable_hash}");
    wait_for("the copy owned by its ReplicaSet", TIMEOUT, || async {
        let copies = config_copies(&ns).await;
        ensure!(
            copies.get(&one) == Some(&("one".to_string(), vec![stable_rs.clone()])),
            "{copies:?}"
        );
        Ok(())
    })
    .await
    .unwrap();

    // A new content: a new revision at the first step; the stable pods keep the old copy.
    set_config(&ns, "two").await;
    wait_phase(&api, NAME, RolloutPhase::Paused, TIMEOUT).await;
    let during = revisions(&ns).await;
    assert_eq!(during.len(), 2, "{during:?}");
    assert_eq!(
        during[&stable_hash],
        (1, one.clone(), creds.clone()),
        "the stable revision on its old copy, scaled to its share"
    );
    let (canary_hash, (canary_replicas, two, canary_creds)) = during
        .iter()
        .find(|(h, _)| **h != stable_hash)
        .map(|(h, r)| (h.clone(), r.clone()))
        .unwrap();
    assert_eq!(canary_replicas, 1, "setWeight 50 of 2");
    assert_ne!(two, one);
    assert_eq!(canary_creds, creds, "the unchanged Secret's copy is shared");
    assert_eq!(config_copies(&ns).await[&two].0, "two");
    let st = status(&api).await;
    assert_eq!(st.current_pod_hash.as_deref(), Some(canary_hash.as_str()));
    assert_eq!(st.stable_rs.as_deref(), Some(stable_hash.as_str()));

    // Aborted: the stable pods, on the old copy, take it all back.
    abort(&api, NAME).await;
    wait_phase(&api, NAME, RolloutPhase::Degraded, TIMEOUT).await;
    wait_for("the canary scaled down", TIMEOUT, || async {
        let now = revisions(&ns).await;
        ensure!(now.get(&canary_hash).is_none_or(|r| r.0 == 0), "{now:?}");
        ensure!(now[&stable_hash].0 == 2, "{now:?}");
        Ok(())
    })
    .await
    .unwrap();

    // The old content again is the stable revision again, and the canary's copy goes with
    // its ReplicaSet (revisionHistoryLimit 0).
    set_config(&ns, "one").await;
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(
        status(&api).await.stable_rs.as_deref(),
        Some(stable_hash.as_str())
    );
    wait_for("the canary's copy collected", TIMEOUT, || async {
        let copies = config_copies(&ns).await;
        if copies.contains_key(&two) {
            bail!("still there: {copies:?}");
        }
        ensure!(copies.contains_key(&one), "{copies:?}");
        Ok(())
    })
    .await
    .unwrap();
}

async fn status(api: &kube::Api<sluice_api::Rollout>) -> sluice_api::rollout::RolloutStatus {
    api.get(NAME).await.unwrap().status.unwrap_or_default()
}
