//! Rollouts complete while the API server misbehaves: with a fault-injecting proxy between the
//! controller and the API server (conflicts, throttling, server errors, lost responses, slow
//! responses on 10% of requests, and every watch connection cut within seconds), 20 canary
//! Rollouts go through every step of an update and all end Healthy, and blue-green Rollouts
//! promote and scale their old ReplicaSets down through `scale-down-deadline`, which a watcher
//! checks is never written empty or unreadable.
//!
//! The faults come from a seeded generator; the seed is printed, and `SLUICE_FAULT_SEED=<n>`
//! repeats a run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace};
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_engine::labels::SCALE_DOWN_DEADLINE;
use sluice_testenv::fault_proxy::{FaultProxy, Faults};

const ROLLOUTS: usize = 20;
const BLUE_GREEN: usize = 4;

/// Records every `scale-down-deadline` value seen on any ReplicaSet of the namespace.
struct DeadlineWatch {
    seen: Arc<AtomicU64>,
    bad: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl DeadlineWatch {
    fn start(ns: &TestNamespace) -> Self {
        let rss: Api<ReplicaSet> = ns.api();
        let seen = Arc::new(AtomicU64::new(0));
        let bad = Arc::new(Mutex::new(Vec::new()));
        let (s, b) = (seen.clone(), bad.clone());
        let task = tokio::spawn(async move {
            let mut events = watcher(rss, watcher::Config::default())
                .default_backoff()
                .touched_objects()
                .boxed();
            while let Some(event) = events.next().await {
                let Ok(rs) = event else { continue };
                if let Some(value) = rs.annotation(SCALE_DOWN_DEADLINE) {
                    s.fetch_add(1, Ordering::Relaxed);
                    if value.parse::<jiff::Timestamp>().is_err() {
                        b.lock().unwrap().push(format!("{}: {value:?}", rs.name()));
                    }
                }
            }
        });
        Self { seen, bad, task }
    }

    fn finish(self) -> (u64, Vec<String>) {
        self.task.abort();
        let bad = self.bad.lock().unwrap().clone();
        (self.seen.load(Ordering::Relaxed), bad)
    }
}
const FAULT_RATE: f64 = 0.10;
/// Everything runs at once on a shared control plane, slowed down by the faults.
const LONG_TIMEOUT: Duration = Duration::from_secs(300);

fn seed() -> u64 {
    std::env::var("SLUICE_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_rollouts_reach_healthy_through_api_faults() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "api-faults").await.unwrap();
    let seed = seed();
    eprintln!("fault seed: {seed} (SLUICE_FAULT_SEED={seed} repeats this run)");
    // Watches are few: every one is cut within seconds, so the controller keeps re-watching.
    let faults = Faults {
        watch_drop_rate: 1.0,
        ..Faults::at_rate(FAULT_RATE, seed)
    };
    let proxy = FaultProxy::start(env.config().clone(), faults)
        .await
        .unwrap();

    sluice_controller::install_crypto_provider();
    let mut args = controller_args(ns.name());
    args.leader_elect = true;
    args.leader_election_namespace = Some(ns.name().to_string());
    args.healthz_port = 0;
    args.metrics_port = 0;
    sluice_controller::init_logging(&args);
    let controller = sluice_controller::start(proxy.client_config(), &args, Default::default())
        .await
        .unwrap();

    // Every ReplicaSet change is checked: a scale-down-deadline must always be a real time.
    let deadline_watch = DeadlineWatch::start(&ns);
    let bg_names: Vec<String> = (0..BLUE_GREEN).map(|i| format!("bg-{i:02}")).collect();
    for name in &bg_names {
        ns.apply_yaml(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                    "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}})
            .to_string(),
        )
        .await
        .unwrap();
        let mut manifest: serde_json::Value =
            serde_json::from_str(&canary_rollout(name, 2, "nginx:1.0", json!([]), json!({})))
                .unwrap();
        manifest["spec"]["strategy"] =
            json!({"blueGreen": {"activeService": name, "scaleDownDelaySeconds": 2}});
        ns.apply_yaml(&manifest.to_string()).await.unwrap();
    }

    let names: Vec<String> = (0..ROLLOUTS).map(|i| format!("web-{i:02}")).collect();
    let steps = json!([
        {"setWeight": 25}, {"pause": {"duration": 1}},
        {"setWeight": 75}, {"pause": {"duration": 1}}
    ]);
    for name in &names {
        ns.apply_yaml(&canary_rollout(
            name,
            2,
            "nginx:1.0",
            steps.clone(),
            json!({}),
        ))
        .await
        .unwrap();
    }
    let api = rollouts(&ns);
    join_all(
        names
            .iter()
            .map(|n| wait_phase(&api, n, RolloutPhase::Healthy, LONG_TIMEOUT)),
    )
    .await;

    for name in &names {
        set_image(&api, name, "nginx:2.0").await;
    }
    for name in &bg_names {
        wait_phase(&api, name, RolloutPhase::Healthy, LONG_TIMEOUT).await;
        set_image(&api, name, "nginx:2.0").await;
    }
    let done = join_all(
        names
            .iter()
            .map(|n| wait_phase(&api, n, RolloutPhase::Healthy, LONG_TIMEOUT)),
    )
    .await;
    for ro in &done {
        let status = ro.status.as_ref().unwrap();
        assert_eq!(status.current_step_index, Some(4), "every step was taken");
        assert_eq!(status.stable_rs, status.current_pod_hash);
    }
    for name in names.iter().chain(&bg_names) {
        wait_replicas(&ns, name, &[("nginx:2.0", 2)], LONG_TIMEOUT).await;
    }
    let (seen, bad) = deadline_watch.finish();
    assert!(
        bad.is_empty(),
        "unreadable scale-down-deadline values: {bad:?}"
    );
    assert!(
        seen > 0,
        "no scale-down-deadline was ever written: the check checked nothing"
    );
    eprintln!("{seen} ReplicaSet states with a scale-down-deadline, all valid");

    let injected = proxy.injected();
    let total: u64 = injected.values().sum();
    eprintln!(
        "{} requests through the proxy, {total} faults injected: {injected:?}",
        proxy.requests()
    );
    assert!(total >= 20, "too few faults to mean anything: {injected:?}");
    assert!(
        injected.keys().any(|k| k.starts_with("refused-"))
            && injected.keys().any(|k| k.starts_with("response-lost-"))
            && injected.contains_key("slow")
            && injected.contains_key("watch-dropped"),
        "{injected:?}"
    );
    controller.shutdown().await.unwrap();
}
