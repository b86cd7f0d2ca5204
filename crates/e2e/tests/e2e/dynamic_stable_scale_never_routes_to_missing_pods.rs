//! The safety rule, watched: during a dynamicStableScale update through an Istio
//! VirtualService, and its abort, no ReplicaSet is ever routed a weight its available pods
//! cannot carry. Every watch event of the ReplicaSets, the Services and the VirtualService is
//! a sample: the weight each Service gets from the VirtualService goes to the ReplicaSet its
//! `rollouts-pod-template-hash` selects, which must have ceil(weight × replicas / 100)
//! available pods.

use std::sync::{Arc, Mutex};

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

const REPLICAS: i64 = 4;

/// Everything wrong in one sample.
fn violations(
    rss: &Store<ReplicaSet>,
    services: &Store<Service>,
    vss: &Store<DynamicObject>,
) -> Vec<String> {
    let Some(vs) = vss.state().first().map(|o| json_of(o)) else {
        return Vec::new();
    };
    let Some((canary, stable)) = vs_weights(&vs, "dss-canary", "dss-stable") else {
        return vec!["VirtualService without both destinations".into()];
    };
    let selected = |svc: &str| {
        services
            .state()
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(svc))
            .and_then(|s| {
                s.spec
                    .as_ref()?
                    .selector
                    .as_ref()?
                    .get("rollouts-pod-template-hash")
                    .cloned()
            })
    };
    let mut per_hash: std::collections::BTreeMap<String, i64> = Default::default();
    for (svc, weight) in [("dss-canary", canary), ("dss-stable", stable)] {
        if let Some(hash) = selected(svc) {
            *per_hash.entry(hash).or_default() += weight;
        }
    }
    let mut wrong = Vec::new();
    for (hash, weight) in per_hash {
        let need = (weight * REPLICAS + 99) / 100;
        let available = rss
            .state()
            .iter()
            .find(|rs| rs.pod_hash() == Some(hash.as_str()))
            .map_or(0, |rs| i64::from(rs.available_replicas()));
        if available < need {
            wrong.push(format!(
                "{hash} routed {weight}% with {available} available pods"
            ));
        }
    }
    wrong
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_stable_scale_update_and_abort_never_route_to_pods_that_are_not_up() {
    let (env, ns, _controller) = setup("dss").await;
    install_router_crds(&env).await;
    let manifest = corpus_file("test/e2e/istio/istio-host-split.yaml")
        .replace("istio-host-split", "dss")
        .replace(
            "      steps:\n      - setWeight: 10\n      - pause: {}\n",
            "      dynamicStableScale: true\n      steps:\n      - setWeight: 25\n      - pause: {}\n      - setWeight: 75\n      - pause: {}\n",
        )
        .replace("spec:\n  strategy:", "spec:\n  replicas: 4\n  strategy:");
    assert!(manifest.contains("dynamicStableScale"), "{manifest}");
    ns.apply_yaml(&manifest).await.unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "dss", RolloutPhase::Healthy, TIMEOUT).await;

    // Watch all three kinds; check the rule on every event.
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
    let vs_events = watcher(virtual_services(&ns), watcher::Config::default())
        .reflect(vs_writer)
        .map(|_| ());
    let samples = Arc::new(Mutex::new((0usize, Vec::<String>::new())));
    let sink = samples.clone();
    let (rs_s, svc_s, vs_s) = (rs_store.clone(), svc_store.clone(), vs_store.clone());
    let sampler = tokio::spawn(async move {
        let mut all =
            futures::stream::select(futures::stream::select(rs_events, svc_events), vs_events)
                .boxed();
        while all.next().await.is_some() {
            // Until each watch has listed its objects, a sample would see a partial world.
            if rs_s.state().is_empty() || svc_s.state().len() < 2 || vs_s.state().is_empty() {
                continue;
            }
            let wrong = violations(&rs_s, &svc_s, &vs_s);
            let mut s = sink.lock().unwrap();
            s.0 += 1;
            s.1.extend(wrong);
        }
    });

    set_image(&api, "dss", "nginx:1.20-alpine").await;
    wait_phase(&api, "dss", RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(
        &ns,
        "dss",
        &[("nginx:1.19-alpine", 3), ("nginx:1.20-alpine", 1)],
        TIMEOUT,
    )
    .await;
    promote(&api, "dss").await;
    wait_vs_weights(&ns, "dss-vsvc", ("dss-canary", "dss-stable"), (75, 25)).await;
    wait_replicas(
        &ns,
        "dss",
        &[("nginx:1.19-alpine", 1), ("nginx:1.20-alpine", 3)],
        TIMEOUT,
    )
    .await;

    abort(&api, "dss").await;
    wait_vs_weights(&ns, "dss-vsvc", ("dss-canary", "dss-stable"), (0, 100)).await;
    wait_replicas(
        &ns,
        "dss",
        &[("nginx:1.19-alpine", 4), ("nginx:1.20-alpine", 0)],
        TIMEOUT,
    )
    .await;
    sampler.abort();
    let (count, wrong) = samples.lock().unwrap().clone();
    assert!(count > 20, "only {count} samples");
    assert!(
        wrong.is_empty(),
        "{} of {count} samples broke the rule: {wrong:#?}",
        wrong.len()
    );
}
