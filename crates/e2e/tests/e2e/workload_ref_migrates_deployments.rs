//! A Deployment migrated to a Rollout with `workloadRef`, under each `scaleDown` mode: the
//! Rollout takes the Deployment's template and selector, and the Deployment's pods go only
//! as Argo lets them (`never`: they stay; `onsuccess`: all at once, once the Rollout is
//! Healthy; `progressively`: one for each pod of the Rollout that is ready), so the app never
//! has fewer pods than it asks for. The counts of both are sampled at every step and printed.
//! The generation of the Deployment the Rollout has seen is where Argo CD's health check
//! reads it, and a change of the Deployment's template is an update of the Rollout.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::TestNamespace;
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_engine::labels::POD_TEMPLATE_HASH;

const REPLICAS: i32 = 3;
const WORKLOAD_GENERATION: &str = "rollout.argoproj.io/workload-generation";

fn deployment(name: &str, image: &str) -> String {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]}
            }
        }
    })
    .to_string()
}

fn rollout(name: &str, scale_down: &str) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name},
        "spec": {
            "replicas": REPLICAS,
            "workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                            "scaleDown": scale_down},
            "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}}
        }
    })
    .to_string()
}

/// One sample: the Deployment's desired and ready pods, the Rollout's ReplicaSets' desired
/// and ready pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    deployment: (i32, i32),
    rollout: (i32, i32),
    healthy: bool,
}

async fn counts(ns: &TestNamespace, name: &str) -> Counts {
    let d: Deployment = ns.api().get(name).await.unwrap();
    let d_spec = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let d_ready = d
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    // The Rollout's ReplicaSets carry its hash label; the Deployment's carry its own.
    let rss: Api<ReplicaSet> = ns.api();
    let owned = rss
        .list(&ListParams::default().labels(POD_TEMPLATE_HASH))
        .await
        .unwrap();
    let rollout = owned
        .items
        .iter()
        .map(|rs| (rs.spec_replicas(), rs.available_replicas()))
        .fold((0, 0), |(s, a), (spec, avail)| (s + spec, a + avail));
    let ro = rollouts(ns).get_opt(name).await.unwrap();
    Counts {
        deployment: (d_spec, d_ready),
        rollout,
        healthy: ro.is_some_and(|ro| observed_phase(&ro) == Some(RolloutPhase::Healthy)),
    }
}

/// Samples the counts until `done` holds, keeping each distinct one.
async fn sample_until(
    ns: &TestNamespace,
    name: &str,
    done: impl Fn(&Counts) -> bool,
) -> Vec<Counts> {
    let mut seen: Vec<Counts> = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let c = counts(ns, name).await;
        if seen.last() != Some(&c) {
            eprintln!(
                "{name}: deployment {:?} rollout {:?} healthy {}",
                c.deployment, c.rollout, c.healthy
            );
            seen.push(c);
        }
        if done(&c) {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: not done; seen {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Argo CD's health rule for a Rollout, as far as the status decides it: the spec and the
/// referenced workload's generation both observed, then the phase.
fn argo_cd_healthy(ro: &Rollout) -> bool {
    let status = ro.status.clone().unwrap_or_default();
    let generation = ro.metadata.generation.map(|g| g.to_string());
    let annotation = ro
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(WORKLOAD_GENERATION));
    status.observed_generation == generation
        && annotation.is_some()
        && annotation == status.workload_observed_generation.as_ref()
        && status.phase == Some(RolloutPhase::Healthy)
}

/// Creates the Deployment, waits for its pods, then the Rollout that takes it over.
async fn migrate(ns: &TestNamespace, name: &str, scale_down: &str) {
    ns.apply_yaml(&deployment(name, "app:v1")).await.unwrap();
    sample_until(ns, name, |c| c.deployment == (REPLICAS, REPLICAS)).await;
    ns.apply_yaml(&rollout(name, scale_down)).await.unwrap();
}

async fn deployment_generation(ns: &TestNamespace, name: &str) -> String {
    let d: Deployment = ns.api().get(name).await.unwrap();
    d.metadata.generation.unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_never_leaves_the_deployment_running() {
    let (_env, ns, _controller) = setup("wl-never").await;
    migrate(&ns, "web", "never").await;
    let seen = sample_until(&ns, "web", |c| {
        c.healthy && c.rollout == (REPLICAS, REPLICAS)
    })
    .await;
    assert!(seen.iter().all(|c| c.deployment.0 == REPLICAS), "{seen:?}");
    let ro = rollouts(&ns).get("web").await.unwrap();
    assert!(argo_cd_healthy(&ro), "{:?}", ro.status);
    assert_eq!(
        ro.status.unwrap().workload_observed_generation,
        Some(deployment_generation(&ns, "web").await)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_on_success_waits_for_a_healthy_rollout() {
    let (_env, ns, _controller) = setup("wl-onsuccess").await;
    migrate(&ns, "web", "onsuccess").await;
    let seen = sample_until(&ns, "web", |c| c.deployment == (0, 0)).await;
    // The Deployment keeps every pod until the Rollout has all of its own ready.
    for c in &seen {
        if c.deployment.0 < REPLICAS {
            assert_eq!(c.rollout, (REPLICAS, REPLICAS), "{seen:?}");
        }
    }
    let api = rollouts(&ns);
    let ro = wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    assert!(argo_cd_healthy(&ro), "{:?}", ro.status);

    // A new template in the Deployment is an update of the Rollout (revision 2, which
    // leaves the Deployment alone); Argo CD sees it observed.
    let deployments: Api<Deployment> = ns.api();
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:v2"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(image))
        .await
        .unwrap();
    let generation = deployment_generation(&ns, "web").await;
    wait_replicas(&ns, "web", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
    let ro = wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    let status = ro.status.clone().unwrap();
    assert_eq!(
        status.workload_observed_generation,
        Some(generation.clone())
    );
    assert_eq!(
        ro.metadata.annotations.unwrap()[WORKLOAD_GENERATION],
        generation
    );
    assert_eq!(counts(&ns, "web").await.deployment, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_progressively_hands_pods_over_one_by_one() {
    let (_env, ns, _controller) = setup("wl-progressive").await;
    migrate(&ns, "web", "progressively").await;
    let seen = sample_until(&ns, "web", |c| c.deployment == (0, 0) && c.healthy).await;
    // The Deployment never asks for fewer pods than the Rollout lacks.
    for c in &seen {
        assert!(c.deployment.0 + c.rollout.1 >= REPLICAS, "{seen:?}");
    }
    let ro = rollouts(&ns).get("web").await.unwrap();
    assert!(argo_cd_healthy(&ro), "{:?}", ro.status);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_workload_is_invalid_until_it_appears() {
    let (_env, ns, _controller) = setup("wl-missing").await;
    ns.apply_yaml(&rollout("late", "never")).await.unwrap();
    let api = rollouts(&ns);
    let ro = wait_phase(&api, "late", RolloutPhase::Degraded, TIMEOUT).await;
    assert_eq!(
        ro.status.unwrap().message.as_deref(),
        Some("InvalidSpec: The Rollout \"late\" is invalid: deployments.apps \"late\" not found")
    );
    // The Deployment's creation is seen at once (no recheck interval to wait for).
    ns.apply_yaml(&deployment("late", "app:v1")).await.unwrap();
    wait_phase(&api, "late", RolloutPhase::Healthy, Duration::from_secs(15)).await;
}

/// Argo's two examples with a workloadRef: Healthy, then through their steps to a new
/// template of their Deployment. Each in a namespace of its own: they name the same objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_workload_ref_rollouts_run_their_steps() {
    tokio::join!(
        run_corpus_file("wl-corpus-a", "examples/workload-ref/workload-ref.yaml"),
        run_corpus_file("wl-corpus-b", "examples/rollout-template-ref.yaml"),
    );
}

async fn run_corpus_file(prefix: &str, file: &str) {
    let (_env, ns, _controller) = setup(prefix).await;
    let api = rollouts(&ns);
    let name = "rollout-ref-deployment";
    ns.apply_yaml(&corpus_file(file)).await.unwrap();
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, name, &[("argoproj/rollouts-demo:blue", 5)], TIMEOUT).await;
    let image = "argoproj/rollouts-demo:green";
    let deployments: Api<Deployment> = ns.api();
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "rollouts-demo", "image": image}
    ]}}}});
    deployments
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    // setWeight 20 of 5: one canary pod during a 10 s pause, then the promotion.
    wait_replicas(
        &ns,
        name,
        &[("argoproj/rollouts-demo:blue", 4), (image, 1)],
        TIMEOUT,
    )
    .await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(&ns, name, &[(image, 5)], TIMEOUT).await;
    let ro = wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    assert!(argo_cd_healthy(&ro), "{file}: {:?}", ro.status);
}
