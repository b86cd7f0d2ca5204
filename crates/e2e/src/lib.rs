//! Support for the end-to-end scenarios in `tests/`: a Sluice controller running in-process
//! against the real local control plane, scoped to one test namespace, and the user actions
//! the `kubectl argo rollouts` / `kubectl sluice` commands perform, as the same API writes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_engine::ReplicaSetExt;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};
use tokio::task::JoinHandle;

pub use sluice_testenv::harness;

pub mod analysis;
pub mod argo_objects;
pub mod aws;
pub mod live;
pub mod notify;
pub mod plugins;
pub mod process;
pub mod routing;

/// Generous bound for anything that should happen within a few reconciles.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// A controller task watching one namespace; stopped when dropped.
pub struct RunningController {
    task: JoinHandle<()>,
}

impl RunningController {
    /// Stops the controller and returns once its task is gone (no reconcile or write of it is
    /// still under way), as a process stopped by SIGKILL would be.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for RunningController {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Controller flags for a test: one namespace, quick resync, no leader election (each test
/// runs its own controller), health and metrics on free ports.
pub fn controller_args(namespace: &str) -> sluice_controller::Args {
    use clap::Parser as _;
    sluice_controller::Args::parse_from([
        "sluice-controller",
        "--namespaced",
        "--namespace",
        namespace,
        "--rollout-resync",
        "30",
        "--rollout-threads",
        "4",
        // Warnings and errors only: a run's output stays readable; SLUICE_LOG overrides.
        "--loglevel",
        "warn",
        "--leader-elect=false",
        "--healthzPort",
        "0",
        "--metricsPort",
        "0",
    ])
}

/// Logs of in-process controllers go to the test's output.
fn init_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| sluice_controller::init_logging(&controller_args("-")));
}

/// Starts a Sluice controller for `ns` with the admin client.
pub fn start_controller(env: &TestEnv, ns: &TestNamespace) -> RunningController {
    start_controller_with(env.client(), ns.name())
}

/// Starts a Sluice controller for `namespace` with the given client.
pub fn start_controller_with(client: Client, namespace: &str) -> RunningController {
    start_controller_with_args(client, controller_args(namespace))
}

/// Starts a Sluice controller with the given client and flags (see [`controller_args`]).
pub fn start_controller_with_args(
    client: Client,
    args: sluice_controller::Args,
) -> RunningController {
    sluice_controller::install_crypto_provider();
    init_logging();
    let task = tokio::spawn(async move {
        if let Err(e) = sluice_controller::loops::run(client, &args).await {
            eprintln!("controller stopped with error: {e:#}");
        }
    });
    RunningController { task }
}

/// A test namespace with CRDs installed and a controller running for it.
pub async fn setup(prefix: &str) -> (TestEnv, TestNamespace, RunningController) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, prefix)
        .await
        .expect("test namespace");
    let controller = start_controller(&env, &ns);
    (env, ns, controller)
}

/// Reads a manifest from Argo's v1.9.1 corpus (test data shared beside the repository).
pub fn corpus_file(relative: &str) -> String {
    let path = sluice_api::corpus::require_argo_corpus_dir()
        .unwrap_or_else(|e| panic!("{e}"))
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

pub fn rollouts(ns: &TestNamespace) -> Api<Rollout> {
    ns.api::<Rollout>()
}

fn status_of(ro: &Rollout) -> (Option<RolloutPhase>, String, Option<i32>) {
    let s = ro.status.clone().unwrap_or_default();
    (s.phase, s.message.unwrap_or_default(), s.current_step_index)
}

/// The phase as clients compute it: a spec change not yet observed is still Progressing.
pub fn observed_phase(ro: &Rollout) -> Option<RolloutPhase> {
    let s = ro.status.as_ref()?;
    let generation = ro.metadata.generation.map(|g| g.to_string());
    if s.observed_generation != generation {
        return Some(RolloutPhase::Progressing);
    }
    s.phase.clone()
}

/// Waits until the Rollout reports `phase` for its current generation.
pub async fn wait_phase(
    api: &Api<Rollout>,
    name: &str,
    phase: RolloutPhase,
    timeout: Duration,
) -> Rollout {
    wait_for(
        &format!("rollout {name} to be {phase}"),
        timeout,
        || async {
            let ro = api.get(name).await?;
            if observed_phase(&ro) == Some(phase.clone()) {
                Ok(ro)
            } else {
                bail!("{:?}", status_of(&ro))
            }
        },
    )
    .await
    .unwrap()
}

/// Spec replicas of each of the Rollout's ReplicaSets, keyed by the first container's image.
pub async fn replicas_by_image(ns: &TestNamespace, rollout: &str) -> BTreeMap<String, (i32, i32)> {
    let rss: Api<ReplicaSet> = ns.api();
    let list = rss
        .list(&ListParams::default())
        .await
        .expect("list ReplicaSets");
    list.items
        .iter()
        .filter(|rs| rs.name().starts_with(&format!("{rollout}-")))
        // An Experiment's ReplicaSets share the name prefix and the image, and are not the
        // Rollout's.
        .filter(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .all(|o| o.controller != Some(true) || o.kind == "Rollout")
        })
        .map(|rs| (image_of(rs), (rs.spec_replicas(), rs.available_replicas())))
        .collect()
}

/// Spec replicas of `image`'s ReplicaSet in a sample of [`replicas_by_image`] (0 without one).
pub fn spec_of(got: &BTreeMap<String, (i32, i32)>, image: &str) -> i32 {
    got.get(image).map_or(0, |c| c.0)
}

/// Samples [`replicas_by_image`] of `rollout` every 50 ms until `done`, checking `each` on
/// every distinct sample (and printing it); fails after `within`.
pub async fn follow_replicas(
    ns: &TestNamespace,
    rollout: &str,
    within: Duration,
    each: impl Fn(&BTreeMap<String, (i32, i32)>),
    done: impl Fn(&BTreeMap<String, (i32, i32)>) -> bool,
) {
    let deadline = tokio::time::Instant::now() + within;
    let mut last = None;
    loop {
        let got = replicas_by_image(ns, rollout).await;
        if last.as_ref() != Some(&got) {
            eprintln!("{rollout}: {got:?}");
            each(&got);
            last = Some(got.clone());
        }
        if done(&got) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{rollout}: stuck at {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The image of a ReplicaSet's first container ("" without one).
pub fn image_of(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Waits until the Rollout's ReplicaSets have exactly these `(spec, available)` counts per
/// image (images not listed must be at 0/0).
pub async fn wait_replicas(
    ns: &TestNamespace,
    rollout: &str,
    expected: &[(&str, i32)],
    timeout: Duration,
) {
    wait_for(
        &format!("{rollout} replicas {expected:?}"),
        timeout,
        || async {
            let got = replicas_by_image(ns, rollout).await;
            let ok = got.iter().all(|(image, (spec, avail))| {
                let want = expected
                    .iter()
                    .find(|(i, _)| i == image)
                    .map_or(0, |(_, n)| *n);
                *spec == want && *avail == want
            }) && expected.iter().all(|(i, _)| got.contains_key(*i));
            if ok { Ok(()) } else { bail!("{got:?}") }
        },
    )
    .await
    .unwrap();
}

/// `kubectl argo rollouts set image`: the first container's image.
pub async fn set_image(api: &Api<Rollout>, name: &str, image: &str) {
    let patch: Value = json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}
    ]);
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("json patch");
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("set image");
}

async fn patch_status(api: &Api<Rollout>, name: &str, status: Value) -> anyhow::Result<()> {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .context("status patch")?;
    Ok(())
}

async fn patch_spec(api: &Api<Rollout>, name: &str, spec: Value) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": spec })),
    )
    .await
    .expect("spec patch");
}

/// `promote`: unpause and clear the pause conditions.
pub async fn promote(api: &Api<Rollout>, name: &str) {
    let ro = api.get(name).await.expect("get rollout");
    if ro.spec.paused == Some(true) {
        patch_spec(api, name, json!({"paused": false})).await;
    }
    patch_status(api, name, json!({"pauseConditions": null}))
        .await
        .expect("promote");
}

/// `promote --full`.
pub async fn promote_full(api: &Api<Rollout>, name: &str) {
    patch_status(api, name, json!({"promoteFull": true}))
        .await
        .expect("promote full");
}

pub async fn abort(api: &Api<Rollout>, name: &str) {
    patch_status(api, name, json!({"abort": true}))
        .await
        .expect("abort");
}

pub async fn retry(api: &Api<Rollout>, name: &str) {
    patch_status(api, name, json!({"abort": false}))
        .await
        .expect("retry");
}

pub async fn pause(api: &Api<Rollout>, name: &str) {
    patch_spec(api, name, json!({"paused": true})).await;
}

pub async fn resume(api: &Api<Rollout>, name: &str) {
    patch_spec(api, name, json!({"paused": false})).await;
}

/// Canary steps whose first runs an Experiment of the canary template for 2 s, then
/// setWeight 50 and a 1 s pause.
pub fn experiment_steps() -> Value {
    json!([
        {"experiment": {"duration": "2s", "templates": [
            {"name": "canary", "specRef": "canary", "replicas": 1}
        ]}},
        {"setWeight": 50},
        {"pause": {"duration": "1s"}}
    ])
}

/// A canary Rollout manifest with the given steps (YAML flow syntax is JSON).
pub fn canary_rollout(
    name: &str,
    replicas: i32,
    image: &str,
    steps: Value,
    extra_spec: Value,
) -> String {
    let mut spec = json!({
        "replicas": replicas,
        "revisionHistoryLimit": 3,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": image}]}
        },
        "strategy": {"canary": {"steps": steps}}
    });
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name},
        "spec": spec
    })
    .to_string()
}

/// The pod-template hash a Service selects.
pub async fn service_hash(ns: &TestNamespace, service: &str) -> Option<String> {
    let api: Api<k8s_openapi::api::core::v1::Service> = ns.api();
    api.get(service)
        .await
        .ok()?
        .spec?
        .selector?
        .get(sluice_engine::labels::POD_TEMPLATE_HASH)
        .cloned()
}

/// A blue-green Rollout `name` (pods labelled `app: name`) with its Services: `{name}-active`
/// and `{name}-preview`, named in `strategy` as `activeService` / `previewService`.
pub async fn apply_blue_green(
    ns: &TestNamespace,
    name: &str,
    replicas: i32,
    image: &str,
    strategy: Value,
) {
    apply_blue_green_services(ns, name).await;
    let manifest = blue_green_rollout(name, replicas, image, strategy);
    ns.apply_yaml(&manifest.to_string()).await.expect("rollout");
}

/// The Services `{name}-active` and `{name}-preview` of [`blue_green_rollout`].
pub async fn apply_blue_green_services(ns: &TestNamespace, name: &str) {
    for svc in [format!("{name}-active"), format!("{name}-preview")] {
        ns.apply_yaml(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc},
                    "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}})
            .to_string(),
        )
        .await
        .expect("service");
    }
}

/// The blue-green Rollout [`apply_blue_green`] applies, for a test to change before applying.
pub fn blue_green_rollout(name: &str, replicas: i32, image: &str, strategy: Value) -> Value {
    let mut manifest: Value =
        serde_json::from_str(&canary_rollout(name, replicas, image, json!([]), json!({})))
            .expect("manifest");
    let mut bg = json!({
        "activeService": format!("{name}-active"),
        "previewService": format!("{name}-preview"),
    });
    if let (Some(bg), Some(extra)) = (bg.as_object_mut(), strategy.as_object()) {
        for (k, v) in extra {
            bg.insert(k.clone(), v.clone());
        }
    }
    manifest["spec"]["strategy"] = json!({ "blueGreen": bg });
    manifest
}

/// The events recorded for a Rollout, oldest first, as (reason, message). A repeat of an
/// identical event is a series on the first one (as client-go records it); it is listed again
/// at its last time, as a watch of events would see it.
pub async fn rollout_events(ns: &TestNamespace, rollout: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::events::v1::Event;
    let api: Api<Event> = ns.api();
    let events = api
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Rollout") && r.name.as_deref() == Some(rollout)
            })
        });
    let mut occurrences = Vec::new();
    for e in events {
        let what = (
            e.reason.clone().unwrap_or_default(),
            e.note.clone().unwrap_or_default(),
        );
        occurrences.push((e.event_time.as_ref().map(|t| t.0), what.clone()));
        if let Some(series) = &e.series {
            occurrences.push((Some(series.last_observed_time.0), what));
        }
    }
    occurrences.sort_by_key(|(at, _)| *at);
    occurrences.into_iter().map(|(_, what)| what).collect()
}

/// Waits until the update away from stable hash `before` is complete: Healthy on a new stable.
/// Returns the new stable hash.
pub async fn wait_promoted(api: &Api<Rollout>, name: &str, before: &str) -> String {
    wait_for(
        "the update to complete",
        Duration::from_secs(150),
        || async {
            let ro = api.get(name).await?;
            let status = ro.status.clone().unwrap_or_default();
            anyhow::ensure!(
                observed_phase(&ro) == Some(RolloutPhase::Healthy)
                    && status.stable_rs == status.current_pod_hash
                    && status.stable_rs.as_deref() != Some(before),
                "{:?} {:?}",
                status.phase,
                status.stable_rs
            );
            Ok(status.stable_rs.unwrap_or_default())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}
