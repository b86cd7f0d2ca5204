//! Gradual abort (`rollouts.sluice.dev/gradual-abort`, a Sluice extension): an update aborted at
//! 50% hands its traffic back to stable through the weights it took, 50 → 25 → 10 → 0, each
//! held for the annotation's duration, instead of all at once; every watch event of the
//! ReplicaSets, Services and VirtualService is a sample in which the canary pods must carry the
//! weight routed to them (never fewer available canary pods than the weight needs), and the
//! canary scales down only after its weight is 0. The same update without the annotation
//! goes to 0 in one write, as in Argo.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_testenv::harness::TestNamespace;

const REPLICAS: i64 = 10;
const HOLD_SECONDS: u64 = 3;
const NEW_IMAGE: &str = "nginx:1.20-alpine";

/// Argo's Istio host-split fixture, named `ga`, with three weights and ten replicas.
fn manifest(annotation: Option<&str>) -> String {
    let annotations = annotation
        .map(|a| format!("  annotations:\n    rollouts.sluice.dev/gradual-abort: \"{a}\"\n"))
        .unwrap_or_default();
    corpus_file("test/e2e/istio/istio-host-split.yaml")
        .replace("istio-host-split", "ga")
        .replace(
            "      steps:\n      - setWeight: 10\n      - pause: {}\n",
            "      abortScaleDownDelaySeconds: 2\n      steps:\n      - setWeight: 10\n      - pause: {}\n      - setWeight: 25\n      - pause: {}\n      - setWeight: 50\n      - pause: {}\n",
        )
        .replace("spec:\n  strategy:", "spec:\n  replicas: 10\n  strategy:")
        .replace(
            "kind: Rollout\nmetadata:\n  name: ga\n",
            &format!("kind: Rollout\nmetadata:\n  name: ga\n{annotations}"),
        )
}

/// The canary weight the VirtualService routes to pods the canary Service does not have.
fn violations(
    rss: &Store<ReplicaSet>,
    services: &Store<Service>,
    vss: &Store<DynamicObject>,
) -> Vec<String> {
    let Some(vs) = vss.state().first().map(|o| json_of(o)) else {
        return Vec::new();
    };
    let Some((canary, _)) = vs_weights(&vs, "ga-canary", "ga-stable") else {
        return vec!["VirtualService without both destinations".into()];
    };
    let hash = services
        .state()
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("ga-canary"))
        .and_then(|s| {
            s.spec
                .as_ref()?
                .selector
                .as_ref()?
                .get("rollouts-pod-template-hash")
                .cloned()
        });
    let Some(hash) = hash else {
        return Vec::new();
    };
    let need = (canary * REPLICAS + 99) / 100;
    let available = rss
        .state()
        .iter()
        .find(|rs| rs.pod_hash() == Some(hash.as_str()))
        .map_or(0, |rs| i64::from(rs.available_replicas()));
    if available < need {
        vec![format!(
            "canary {hash} routed {canary}% with {available} available pods"
        )]
    } else {
        Vec::new()
    }
}

/// Samples the rule on every watch event until dropped; the count and what was wrong.
struct Sampler {
    samples: Arc<Mutex<(usize, Vec<String>)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(ns: &TestNamespace) -> Self {
        let (rs_store, rs_writer) = reflector::store();
        let (svc_store, svc_writer) = reflector::store();
        let vs_writer = reflector::store::Writer::<DynamicObject>::new(virtual_services_resource());
        let vs_store = vs_writer.as_reader();
        let rs_events = watcher(ns.api::<ReplicaSet>(), watcher::Config::default())
            .reflect(rs_writer)
            .map(|_| ());
        let svc_events = watcher(ns.api::<Service>(), watcher::Config::default())
            .reflect(svc_writer)
            .map(|_| ());
        let vs_events = watcher(virtual_services(ns), watcher::Config::default())
            .reflect(vs_writer)
            .map(|_| ());
        let samples = Arc::new(Mutex::new((0usize, Vec::<String>::new())));
        let sink = samples.clone();
        let task = tokio::spawn(async move {
            let mut all =
                futures::stream::select(futures::stream::select(rs_events, svc_events), vs_events)
                    .boxed();
            while all.next().await.is_some() {
                // Until each watch has listed its objects, a sample would see a partial world.
                if rs_store.state().is_empty()
                    || svc_store.state().len() < 2
                    || vs_store.state().is_empty()
                {
                    continue;
                }
                let wrong = violations(&rs_store, &svc_store, &vs_store);
                let mut s = sink.lock().unwrap();
                s.0 += 1;
                s.1.extend(wrong);
            }
        });
        Self { samples, task }
    }

    fn finish(self) -> (usize, Vec<String>) {
        self.task.abort();
        self.samples.lock().unwrap().clone()
    }
}

/// Takes an update of `ga` to its 50% pause.
async fn update_to_half(ns: &TestNamespace) {
    let api = rollouts(ns);
    wait_phase(&api, "ga", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "ga", NEW_IMAGE).await;
    for weight in [10, 25] {
        wait_vs_weights(
            ns,
            "ga-vsvc",
            ("ga-canary", "ga-stable"),
            (weight, 100 - weight),
        )
        .await;
        wait_phase(&api, "ga", RolloutPhase::Paused, TIMEOUT).await;
        promote(&api, "ga").await;
    }
    wait_vs_weights(ns, "ga-vsvc", ("ga-canary", "ga-stable"), (50, 50)).await;
    wait_replicas(
        ns,
        "ga",
        &[("nginx:1.19-alpine", 10), (NEW_IMAGE, 5)],
        TIMEOUT,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_hands_traffic_back_through_the_weights_taken_and_the_canary_waits_for_zero() {
    let (env, ns, _controller) = setup("gradual-abort").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&manifest(Some(&format!("{HOLD_SECONDS}s"))))
        .await
        .unwrap();
    let recorder = Recorder::start(virtual_services(&ns), "ga-vsvc", |vs| {
        vs_weights(vs, "ga-canary", "ga-stable")
    });
    let sampler = Sampler::start(&ns);
    update_to_half(&ns).await;

    let api = rollouts(&ns);
    let aborted = Instant::now();
    abort(&api, "ga").await;
    wait_vs_weights(&ns, "ga-vsvc", ("ga-canary", "ga-stable"), (25, 75)).await;
    // While traffic steps down, the canary keeps all five pods.
    let mid = replicas_by_image(&ns, "ga").await;
    assert_eq!(mid.get(NEW_IMAGE).map(|c| c.0), Some(5), "{mid:?}");
    wait_vs_weights(&ns, "ga-vsvc", ("ga-canary", "ga-stable"), (0, 100)).await;
    let took = aborted.elapsed();
    // Three weights (50, 25, 10) held for the duration each before 0.
    assert!(
        took >= Duration::from_secs(3 * HOLD_SECONDS - 1),
        "back at 0 after {took:?}"
    );
    wait_replicas(
        &ns,
        "ga",
        &[("nginx:1.19-alpine", 10), (NEW_IMAGE, 0)],
        TIMEOUT,
    )
    .await;
    wait_phase(&api, "ga", RolloutPhase::Degraded, TIMEOUT).await;

    assert_eq!(
        recorder.values().await,
        vec![
            (0, 100),
            (10, 90),
            (25, 75),
            (50, 50),
            (25, 75),
            (10, 90),
            (0, 100)
        ]
    );
    let (count, wrong) = sampler.finish();
    assert!(count > 20, "only {count} samples");
    assert!(
        wrong.is_empty(),
        "{} of {count} samples broke the rule: {wrong:#?}",
        wrong.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_annotation_an_abort_moves_all_traffic_at_once_as_in_argo() {
    let (env, ns, _controller) = setup("plain-abort").await;
    install_router_crds(&env).await;
    ns.apply_yaml(&manifest(None)).await.unwrap();
    let recorder = Recorder::start(virtual_services(&ns), "ga-vsvc", |vs| {
        vs_weights(vs, "ga-canary", "ga-stable")
    });
    update_to_half(&ns).await;
    abort(&rollouts(&ns), "ga").await;
    wait_vs_weights(&ns, "ga-vsvc", ("ga-canary", "ga-stable"), (0, 100)).await;
    wait_replicas(
        &ns,
        "ga",
        &[("nginx:1.19-alpine", 10), (NEW_IMAGE, 0)],
        TIMEOUT,
    )
    .await;
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (10, 90), (25, 75), (50, 50), (0, 100)]
    );
}
