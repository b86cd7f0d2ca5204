//! Blue-green rollouts against the real control plane. A watcher checks, for the whole test,
//! that the active Service never selects a ReplicaSet with fewer available pods than desired.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::TestNamespace;
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_engine::labels::POD_TEMPLATE_HASH;

/// Watches Services and ReplicaSets; records a violation if the active Service ever selects
/// a ReplicaSet with fewer than `replicas` available pods.
struct ActiveServiceGuard {
    violation: Arc<std::sync::Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl ActiveServiceGuard {
    fn start(ns: &TestNamespace, service: &str, replicas: i32) -> Self {
        let services: Api<Service> = ns.api();
        let rss: Api<ReplicaSet> = ns.api();
        let violation = Arc::new(std::sync::Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (v, s, name) = (violation.clone(), stop.clone(), service.to_string());
        let task = tokio::spawn(async move {
            let svc_events = watcher(services.clone(), watcher::Config::default())
                .touched_objects()
                .map(|_| ());
            let rs_events = watcher(rss.clone(), watcher::Config::default())
                .touched_objects()
                .map(|_| ());
            let mut events = futures::stream::select(svc_events, rs_events).boxed();
            while events.next().await.is_some() && !s.load(Ordering::Relaxed) {
                let Ok(Some(svc)) = services.get_opt(&name).await else {
                    continue;
                };
                let hash = svc
                    .spec
                    .and_then(|s| s.selector)
                    .and_then(|s| s.get(POD_TEMPLATE_HASH).cloned());
                let Some(hash) = hash else { continue };
                let list = rss
                    .list(&ListParams::default().labels(&format!("{POD_TEMPLATE_HASH}={hash}")))
                    .await;
                let Ok(list) = list else { continue };
                let available = list.items.first().map_or(0, |rs| rs.available_replicas());
                if available < replicas {
                    *v.lock().unwrap() = Some(format!(
                        "active service {name} selected {hash} with {available} available"
                    ));
                }
            }
        });
        Self {
            violation,
            stop,
            task,
        }
    }

    fn check(&self) {
        if let Some(v) = self.violation.lock().unwrap().clone() {
            panic!("{v}");
        }
    }
}

impl Drop for ActiveServiceGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.abort();
    }
}

async fn selector(ns: &TestNamespace, svc: &str) -> Option<String> {
    let api: Api<Service> = ns.api();
    api.get(svc)
        .await
        .ok()?
        .spec?
        .selector?
        .get(POD_TEMPLATE_HASH)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_bluegreen_example_previews_then_switches_on_promote() {
    let (_env, ns, _controller) = setup("bg-example").await;
    let api = rollouts(&ns);
    let name = "rollout-bluegreen";
    ns.apply_yaml(&corpus_file("examples/rollout-bluegreen.yaml"))
        .await
        .unwrap();
    let guard = ActiveServiceGuard::start(&ns, "rollout-bluegreen-active", 2);
    let ro = wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let rev1 = ro.status.unwrap().current_pod_hash.unwrap();
    assert_eq!(
        selector(&ns, "rollout-bluegreen-active").await.as_deref(),
        Some(rev1.as_str())
    );

    set_image(&api, name, "argoproj/rollouts-demo:green").await;
    let ro = wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.message.as_deref(), Some("BlueGreenPause"));
    let rev2 = status.current_pod_hash.unwrap();
    wait_replicas(
        &ns,
        name,
        &[
            ("argoproj/rollouts-demo:blue", 2),
            ("argoproj/rollouts-demo:green", 2),
        ],
        TIMEOUT,
    )
    .await;
    assert_eq!(
        selector(&ns, "rollout-bluegreen-preview").await.as_deref(),
        Some(rev2.as_str())
    );
    assert_eq!(
        selector(&ns, "rollout-bluegreen-active").await.as_deref(),
        Some(rev1.as_str())
    );

    promote(&api, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(
        selector(&ns, "rollout-bluegreen-active").await.as_deref(),
        Some(rev2.as_str())
    );
    let svc: Api<Service> = ns.api();
    let annotations = svc
        .get("rollout-bluegreen-active")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap();
    assert_eq!(
        annotations
            .get("argo-rollouts.argoproj.io/managed-by-rollouts")
            .map(String::as_str),
        Some(name)
    );
    // The old ReplicaSet goes after the default 30 s scaleDownDelaySeconds.
    wait_replicas(
        &ns,
        name,
        &[("argoproj/rollouts-demo:green", 2)],
        Duration::from_secs(60),
    )
    .await;
    guard.check();
}

/// The seed scenario of Argo's open bug: Rev2 bad -> aborted; Rev3 good -> Healthy; Rev4 bad ->
/// aborted again within the deadline, with the active Service on a fully available
/// ReplicaSet throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bluegreen_progress_deadline_abort_holds_for_a_second_bad_revision() {
    let (_env, ns, _controller) = setup("bg-deadline").await;
    let api = rollouts(&ns);
    let deadline = 10u64;
    ns.apply_yaml(
        &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bg-active"},
                "spec": {"selector": {"app": "bg"}, "ports": [{"port": 80}]}})
        .to_string(),
    )
    .await
    .unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&canary_rollout(
        "bg",
        2,
        "app:rev1",
        json!([]),
        json!({"progressDeadlineSeconds": deadline, "progressDeadlineAbort": true}),
    ))
    .unwrap();
    manifest["spec"]["strategy"] = json!({"blueGreen": {
        "activeService": "bg-active", "scaleDownDelaySeconds": 3, "abortScaleDownDelaySeconds": 2
    }});
    ns.apply_yaml(&manifest.to_string()).await.unwrap();
    let guard = ActiveServiceGuard::start(&ns, "bg-active", 2);
    wait_phase(&api, "bg", RolloutPhase::Healthy, TIMEOUT).await;

    for (image, good) in [
        ("registry.invalid/does-not-exist:rev2", false),
        ("app:rev3", true),
        ("registry.invalid/does-not-exist:rev4", false),
    ] {
        set_image(&api, "bg", image).await;
        let started = Instant::now();
        if good {
            let ro = wait_phase(&api, "bg", RolloutPhase::Healthy, TIMEOUT).await;
            let hash = ro.status.unwrap().current_pod_hash.unwrap();
            assert_eq!(
                selector(&ns, "bg-active").await.as_deref(),
                Some(hash.as_str())
            );
            continue;
        }
        let ro = wait_phase(
            &api,
            "bg",
            RolloutPhase::Degraded,
            Duration::from_secs(deadline + 30),
        )
        .await;
        let took = started.elapsed();
        assert!(
            took <= Duration::from_secs(deadline + 8),
            "{image}: aborted after {took:?}"
        );
        let status = ro.status.unwrap();
        assert_eq!(status.abort, Some(true), "{image}");
        let stable = if image.ends_with("rev2") {
            "app:rev1"
        } else {
            "app:rev3"
        };
        // The bad pods go after abortScaleDownDelaySeconds; traffic never left the stable.
        wait_replicas(&ns, "bg", &[(stable, 2)], TIMEOUT).await;
        let active_hash = selector(&ns, "bg-active").await;
        assert_eq!(
            active_hash, status.stable_rs,
            "{image}: active stays on stable"
        );
    }
    guard.check();
}
