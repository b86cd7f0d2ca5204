//! The controller killed in the middle of a canary (its task aborted at an arbitrary point, as
//! `kill -9` would) and started again: the rollout finishes with no extra ReplicaSet and no
//! scaling beyond what the plan allows.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace};
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_canary_controller_resumes_without_extra_replica_sets() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "kill-restart").await.unwrap();
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "kr",
        4,
        "app:v1",
        json!([{"setWeight": 25}, {"pause": {"duration": "1s"}}, {"setWeight": 50},
               {"pause": {"duration": "1s"}}, {"setWeight": 75}]),
        json!({}),
    ))
    .await
    .unwrap();
    let controller = start_controller(&env, &ns);
    wait_phase(&api, "kr", RolloutPhase::Healthy, TIMEOUT).await;

    // Watch every ReplicaSet for the whole test: the total spec never exceeds
    // replicas + maxSurge (4 + 25% rounded up = 5).
    let most = Arc::new(AtomicI32::new(0));
    let rss: Api<ReplicaSet> = ns.api();
    let watcher_task = {
        let (most, rss) = (most.clone(), rss.clone());
        tokio::spawn(async move {
            let mut stream = watcher(rss.clone(), watcher::Config::default())
                .touched_objects()
                .boxed();
            while stream.next().await.is_some() {
                if let Ok(list) = rss.list(&Default::default()).await {
                    let total: i32 = list.items.iter().map(|r| r.spec_replicas()).sum();
                    most.fetch_max(total, Ordering::Relaxed);
                }
            }
        })
    };

    set_image(&api, "kr", "app:v2").await;
    // Kill it as soon as the update is under way.
    harness::wait_for("the canary to start", TIMEOUT, || async {
        let n = replicas_by_image(&ns, "kr").await;
        if n.get("app:v2").is_some_and(|(spec, _)| *spec > 0) {
            Ok(())
        } else {
            anyhow::bail!("{n:?}")
        }
    })
    .await
    .unwrap();
    drop(controller);

    let _restarted = start_controller(&env, &ns);
    wait_phase(&api, "kr", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "kr", &[("app:v2", 4)], TIMEOUT).await;
    let names: Vec<String> = rss
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    assert_eq!(names.len(), 2, "exactly the two revisions: {names:?}");
    watcher_task.abort();
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= 5,
        "total replicas reached {most}, above replicas + maxSurge"
    );
}
