//! The controller killed right after each of its writes, on the real control plane: for a
//! canary routed by an Istio VirtualService, a blue-green update, and a canary with an
//! experiment step, and from Argo Rollouts 1.9.1's own objects (`testdata/argo-objects`) of a
//! canary paused at its first step (promoted in full) and of a blue-green update paused with
//! its preview up (promoted). A first run of each update counts the controller's writes (through the
//! fault proxy, Events aside); then for every k, in a namespace of its own, an update is
//! started under a controller whose k-th write is its last (the proxy holds every later one,
//! so what reaches the API server is what a process killed right after that write had
//! written), the controller is stopped, a fresh one is started, and the update must complete.
//! All along, a checker reads the namespace and holds the same rules as the simulation:
//!
//! - one ReplicaSet per pod template (per owner), each with its revision annotation;
//! - no annotation lost (one a user put on the Rollout, and the Rollout's revision);
//! - no Service selecting, and no router sending traffic to, a pod-template hash that has no
//!   ReplicaSet;
//! - no weight ahead of the ready pods: a Service the VirtualService gives weight w selects
//!   at least ceil(w × replicas / 100) ready pods, and a blue-green active Service all of them.
//!
//! Reads are taken as one view only when the VirtualService and the Services did not change
//! between a read before and a read after the ReplicaSets and pods.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::routing::{install_router_crds, json_of, vs_weights};
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_engine::labels::POD_TEMPLATE_HASH;
use sluice_testenv::fault_proxy::{FaultProxy, Faults};

const REPLICAS: i32 = 2;
/// Runs at a time, each in its own namespace with its own controller, across all the tests
/// of this file (the harness runs them in parallel).
const CONCURRENT: usize = 4;
static RUNNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(CONCURRENT);
/// A user's annotation on the Rollout, which no write may lose.
const KEEP: &str = "e2e.sluice.dev/keep";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// Canary, Istio host split: setWeight 50, a 1 s pause.
    Routed,
    /// Blue-green with automatic promotion.
    BlueGreen,
    /// Canary with an experiment step (the canary template, 2 s), then setWeight 50.
    Experiment,
    /// Argo Rollouts 1.9.1's objects of a canary paused at its first step
    /// (`testdata/argo-objects`), promoted in full.
    ArgoCanaryPaused,
    /// Argo Rollouts 1.9.1's objects of a blue-green update paused with its preview up,
    /// promoted.
    ArgoBlueGreenPaused,
}

impl Case {
    fn label(self) -> &'static str {
        match self {
            Case::Routed => "routed",
            Case::BlueGreen => "bluegreen",
            Case::Experiment => "experiment",
            Case::ArgoCanaryPaused => "argo-canary",
            Case::ArgoBlueGreenPaused => "argo-bluegreen",
        }
    }

    /// The captured moment a case starts from, if it is one of Argo's.
    fn moment(self) -> Option<&'static str> {
        match self {
            Case::ArgoCanaryPaused => Some("canary-paused-step-1"),
            Case::ArgoBlueGreenPaused => Some("bluegreen-preview-paused"),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Case::ArgoCanaryPaused => "cn",
            Case::ArgoBlueGreenPaused => "bg",
            _ => "app",
        }
    }

    fn replicas(self) -> i32 {
        match self {
            Case::ArgoCanaryPaused => 4,
            Case::ArgoBlueGreenPaused => 3,
            _ => REPLICAS,
        }
    }

    /// The image the update goes to.
    fn new_image(self) -> &'static str {
        match self {
            Case::ArgoCanaryPaused | Case::ArgoBlueGreenPaused => "nginx:1.20-alpine",
            _ => "app:v2",
        }
    }

    /// The blue-green active Service, if any.
    fn active_service(self) -> Option<String> {
        match self {
            Case::BlueGreen | Case::ArgoBlueGreenPaused => Some(format!("{}-active", self.name())),
            _ => None,
        }
    }

    /// What a user does to start (or, from Argo's objects, to finish) the update.
    async fn act(self, ns: &TestNamespace) {
        let api = rollouts(ns);
        match self {
            Case::ArgoCanaryPaused => promote_full(&api, self.name()).await,
            Case::ArgoBlueGreenPaused => promote(&api, self.name()).await,
            _ => set_image(&api, self.name(), self.new_image()).await,
        }
    }

    /// The Rollout and what it needs, at image v1.
    async fn create(self, ns: &TestNamespace) {
        const NAME: &str = "app";
        let service = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                   "spec": {"selector": {"app": NAME}, "ports": [{"port": 80}]}})
            .to_string()
        };
        match self {
            Case::ArgoCanaryPaused | Case::ArgoBlueGreenPaused => {
                let moment = self.moment().unwrap_or_default();
                argo_objects::read(moment)
                    .expect("captured objects")
                    .load(ns)
                    .await
                    .expect("loading the captured objects");
            }
            Case::Routed => {
                for svc in ["canary", "stable"] {
                    ns.apply_yaml(&service(svc)).await.expect("service");
                }
                ns.apply_yaml(
                    &json!({
                        "apiVersion": "networking.istio.io/v1alpha3",
                        "kind": "VirtualService",
                        "metadata": {"name": "vs"},
                        "spec": {"hosts": ["app"], "http": [{"name": "primary", "route": [
                            {"destination": {"host": "stable"}, "weight": 100},
                            {"destination": {"host": "canary"}, "weight": 0}
                        ]}]}
                    })
                    .to_string(),
                )
                .await
                .expect("virtual service");
                ns.apply_yaml(&canary_rollout(
                    NAME,
                    REPLICAS,
                    "app:v1",
                    json!([{"setWeight": 50}, {"pause": {"duration": "1s"}}]),
                    json!({}),
                ))
                .await
                .expect("rollout");
                let canary = json!({
                    "canaryService": "canary",
                    "stableService": "stable",
                    "trafficRouting": {"istio": {"virtualService": {"name": "vs", "routes": ["primary"]}}},
                    "steps": [{"setWeight": 50}, {"pause": {"duration": "1s"}}]
                });
                rollouts(ns)
                    .patch(
                        NAME,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"strategy": {"canary": canary}}})),
                    )
                    .await
                    .expect("traffic routing");
            }
            Case::BlueGreen => {
                apply_blue_green(ns, NAME, REPLICAS, "app:v1", json!({})).await;
            }
            Case::Experiment => {
                ns.apply_yaml(&canary_rollout(
                    NAME,
                    REPLICAS,
                    "app:v1",
                    json!([
                        {"experiment": {"duration": "2s", "templates": [
                            {"name": "canary", "specRef": "canary", "replicas": 1}
                        ]}},
                        {"setWeight": 50},
                        {"pause": {"duration": "1s"}}
                    ]),
                    json!({}),
                ))
                .await
                .expect("rollout");
            }
        }
    }
}

/// What the checker found wrong, in order, with the moment's description.
#[derive(Default)]
struct Found {
    violations: Vec<String>,
    views: u64,
}

/// Reads the namespace again and again until stopped, recording every rule broken.
struct Checker {
    found: Arc<Mutex<Found>>,
    task: tokio::task::JoinHandle<()>,
}

impl Checker {
    fn start(client: Client, ns: String, case: Case) -> Checker {
        let found = Arc::new(Mutex::new(Found::default()));
        let sink = found.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(Some(v)) = check_once(&client, &ns, case).await {
                    let mut f = sink.lock().unwrap();
                    f.views += 1;
                    for line in v {
                        if !f.violations.contains(&line) {
                            f.violations.push(line);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Checker { found, task }
    }

    fn stop(self) -> Found {
        self.task.abort();
        std::mem::take(&mut *self.found.lock().unwrap())
    }
}

/// One consistent view's broken rules (`None`: the view changed while it was read).
async fn check_once(client: &Client, ns: &str, case: Case) -> anyhow::Result<Option<Vec<String>>> {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let vss: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &sluice_e2e::routing::virtual_services_resource(),
    );
    let versions = || async {
        let svcs = services.list(&ListParams::default()).await?.items;
        let vs = if case == Case::Routed {
            Some(json_of(&vss.get("vs").await?))
        } else {
            None
        };
        anyhow::Ok((svcs, vs))
    };
    let (svcs, vs) = versions().await?;
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    let ro = Api::<sluice_api::Rollout>::namespaced(client.clone(), ns)
        .get(case.name())
        .await?;
    let (svcs_after, vs_after) = versions().await?;
    let rv = |s: &[Service]| -> Vec<Option<String>> {
        s.iter()
            .map(|s| s.metadata.resource_version.clone())
            .collect()
    };
    let vs_rv = |v: &Option<Value>| v.as_ref().map(|v| v["metadata"]["resourceVersion"].clone());
    if rv(&svcs) != rv(&svcs_after) || vs_rv(&vs) != vs_rv(&vs_after) {
        return Ok(None);
    }

    let mut broken = Vec::new();
    // One ReplicaSet per pod template of each owner, each with its revision.
    let mut templates: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for rs in &rss {
        let owner = rs
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
            .unwrap_or_default();
        let image = image_of(rs);
        templates
            .entry((owner, image))
            .or_default()
            .push(rs.name_any());
        if rs
            .annotations()
            .get("rollout.argoproj.io/revision")
            .is_none()
            && rs.owner_references().iter().any(|o| o.kind == "Rollout")
        {
            broken.push(format!("rs/{} has no revision annotation", rs.name_any()));
        }
    }
    for ((_, image), names) in &templates {
        if names.len() > 1 {
            broken.push(format!(
                "{} ReplicaSets run {image}: {names:?}",
                names.len()
            ));
        }
    }
    // The user's annotation and the Rollout's revision.
    if ro.annotations().get(KEEP).is_none() {
        broken.push(format!("the Rollout lost {KEEP}"));
    }
    if ro
        .annotations()
        .get("rollout.argoproj.io/revision")
        .is_none()
    {
        broken.push("the Rollout lost its revision annotation".into());
    }
    // Services and the router on existing hashes, weights behind ready pods.
    let hashes: BTreeSet<&str> = rss.iter().filter_map(|rs| rs.pod_hash()).collect();
    let selected = |name: &str| -> Option<String> {
        svcs.iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))?
            .spec
            .as_ref()?
            .selector
            .as_ref()?
            .get(POD_TEMPLATE_HASH)
            .cloned()
    };
    for svc in &svcs {
        let name = svc.name_any();
        if let Some(hash) = selected(&name)
            && !hashes.contains(hash.as_str())
        {
            broken.push(format!(
                "Service {name} selects {hash}, which has no ReplicaSet"
            ));
        }
    }
    let ready = |hash: &str| {
        pods.iter()
            .filter(|p| p.labels().get(POD_TEMPLATE_HASH).map(String::as_str) == Some(hash))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count() as i64
    };
    if let Some(vs) = &vs
        && let Some((canary, stable)) = vs_weights(vs, "canary", "stable")
    {
        for (svc, weight) in [("canary", canary), ("stable", stable)] {
            if weight <= 0 {
                continue;
            }
            let need = (weight * i64::from(case.replicas()) + 99) / 100;
            match selected(svc) {
                None => broken.push(format!(
                    "the VirtualService sends {weight} to Service {svc}, which selects no hash"
                )),
                Some(hash) => {
                    let up = ready(&hash);
                    if up < need {
                        broken.push(format!(
                            "the VirtualService sends {weight} to Service {svc} ({hash}) with {up} ready pods (needs {need})"
                        ));
                    }
                }
            }
        }
    }
    if let Some(active) = case.active_service()
        && let Some(hash) = selected(&active)
    {
        let up = ready(&hash);
        if up < i64::from(case.replicas()) {
            broken.push(format!(
                "the active Service selects {hash} with {up} ready pods"
            ));
        }
    }
    Ok(Some(broken))
}

/// The image of a ReplicaSet's first container.
fn image_of(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Whether the update to v2 is complete: Healthy, the new ReplicaSet stable, all its pods up.
async fn completed(ns: &TestNamespace, case: Case) -> anyhow::Result<()> {
    let ro = rollouts(ns).get(case.name()).await?;
    let status = ro.status.clone().unwrap_or_default();
    anyhow::ensure!(
        observed_phase(&ro) == Some(RolloutPhase::Healthy),
        "{:?}",
        observed_phase(&ro)
    );
    anyhow::ensure!(
        status.stable_rs.is_some() && status.stable_rs == status.current_pod_hash,
        "stable {:?}, current {:?}",
        status.stable_rs,
        status.current_pod_hash
    );
    let rss: Api<ReplicaSet> = ns.api();
    let new = rss
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|rs| rs.pod_hash().is_some() && rs.pod_hash() == status.current_pod_hash.as_deref());
    let up = new.as_ref().map(|rs| rs.available_replicas());
    anyhow::ensure!(
        up == Some(case.replicas()),
        "new ReplicaSet available: {up:?}"
    );
    anyhow::ensure!(
        new.is_some_and(|rs| image_of(&rs) == case.new_image()),
        "the new ReplicaSet is not v2's"
    );
    Ok(())
}

/// Puts v1 out and waits for it, with a controller that is gone again afterwards (or loads
/// Argo's objects), then adds a user's annotation to the Rollout.
async fn prepare(env: &TestEnv, ns: &TestNamespace, case: Case) {
    case.create(ns).await;
    if case.moment().is_none() {
        let controller = start_controller(env, ns);
        wait_phase(&rollouts(ns), case.name(), RolloutPhase::Healthy, TIMEOUT).await;
        controller.stop().await;
    }
    rollouts(ns)
        .patch(
            case.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {KEEP: "yes"}}})),
        )
        .await
        .expect("user annotation");
}

/// What one run did: the writes the first controller made, whether it was cut off, and what
/// the checker found.
struct Run {
    writes: u64,
    cut: bool,
    found: Found,
    dump: String,
}

/// An update from v1 to v2 whose controller's last write is its `cut`-th (`None`: never cut),
/// then finished by a fresh controller.
async fn run(env: &TestEnv, case: Case, cut: Option<u64>) -> Run {
    let _turn = RUNNING.acquire().await.expect("semaphore never closed");
    let prefix = format!(
        "crash-{}-{}",
        case.label(),
        cut.map_or("all".to_string(), |k| k.to_string())
    );
    let ns = TestNamespace::create(env, &prefix)
        .await
        .expect("namespace");
    prepare(env, &ns, case).await;
    let checker = Checker::start(env.client(), ns.name().to_string(), case);

    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .expect("proxy");
    if let Some(k) = cut {
        proxy.cut_after_writes(k);
    }
    let client = Client::try_from(proxy.client_config()).expect("proxy client");
    let first = start_controller_with(client, ns.name());
    case.act(&ns).await;
    let ns_ref = &ns;
    let proxy_ref = &proxy;
    let first_ended = wait_for("the cut or the end of the update", TIMEOUT, || async move {
        if cut.is_some_and(|k| proxy_ref.writes() >= k) {
            return Ok(());
        }
        completed(ns_ref, case).await
    })
    .await;
    if let Err(e) = first_ended {
        panic!("{prefix}: {e:#}\n{}", ns.dump().await);
    }
    let was_cut = proxy.injected().contains_key("cut") || cut.is_some_and(|k| proxy.writes() >= k);
    if cut.is_none() {
        // The uncut run counts every write of the update, up to a moment of quiet.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    first.stop().await;
    let writes = proxy.writes();
    drop(proxy);

    let second = start_controller(env, &ns);
    let done = wait_for("the update to complete", TIMEOUT, || completed(&ns, case)).await;
    let dump = match done {
        Ok(()) => String::new(),
        Err(e) => format!("{prefix}: {e:#}\n{}", ns.dump().await),
    };
    // A last look once everything has settled.
    tokio::time::sleep(Duration::from_millis(500)).await;
    second.stop().await;
    let found = checker.stop();
    Run {
        writes,
        cut: was_cut,
        found,
        dump,
    }
}

async fn crash_at_every_write(case: Case) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    if case == Case::Routed {
        install_router_crds(&env).await;
    }
    let baseline = run(&env, case, None).await;
    assert!(baseline.dump.is_empty(), "{}", baseline.dump);
    assert!(
        baseline.found.violations.is_empty() && baseline.found.views > 0,
        "{}: without a crash: {:#?}",
        case.label(),
        baseline.found.violations
    );
    let total = baseline.writes;
    assert!(total > 2, "{}: only {total} writes", case.label());

    let runs: Vec<(u64, Run)> = futures::stream::iter(1..=total)
        .map(|k| {
            let env = &env;
            async move { (k, run(env, case, Some(k)).await) }
        })
        .buffer_unordered(CONCURRENT)
        .collect()
        .await;
    let mut failures = Vec::new();
    let mut cut = 0;
    let mut not_reached = 0;
    for (k, r) in &runs {
        cut += u64::from(r.cut);
        // A run not cut must have finished in fewer than k writes (this run's update took
        // fewer than the baseline's): a run that wrote k times and was not cut means the cut
        // never engaged, and the point proved nothing.
        if !r.cut {
            not_reached += 1;
            if r.writes >= *k {
                failures.push(format!(
                    "killed after write {k}: not cut, though it wrote {} times",
                    r.writes
                ));
            }
        }
        if !r.dump.is_empty() {
            failures.push(format!(
                "killed after write {k}: did not complete: {}",
                r.dump
            ));
        }
        if r.found.views == 0 {
            failures.push(format!(
                "killed after write {k}: the checker never had a view"
            ));
        }
        if !r.found.violations.is_empty() {
            failures.push(format!("killed after write {k}: {:#?}", r.found.violations));
        }
    }
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "{}: {total} writes in the update, {} crash points, {cut} of them cut before the end, {not_reached} not reached (that run finished in fewer writes), all checked\n",
            case.label(),
            runs.len()
        )
        .as_bytes(),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Most points must be real crashes: a campaign of uncut runs would check nothing.
    assert!(
        cut * 4 >= total * 3,
        "{}: only {cut} of {total} crash points cut",
        case.label()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_canary_survives_a_crash_at_every_write() {
    crash_at_every_write(Case::Routed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blue_green_survives_a_crash_at_every_write() {
    crash_at_every_write(Case::BlueGreen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn experiment_step_survives_a_crash_at_every_write() {
    crash_at_every_write(Case::Experiment).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argos_paused_canary_survives_a_crash_at_every_write() {
    crash_at_every_write(Case::ArgoCanaryPaused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argos_paused_blue_green_survives_a_crash_at_every_write() {
    crash_at_every_write(Case::ArgoBlueGreenPaused).await;
}
