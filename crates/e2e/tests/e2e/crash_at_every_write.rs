//! The controller process killed (SIGKILL) at each of its writes, on the real control plane:
//! for a canary routed by an Istio VirtualService, a blue-green update, and a canary with an
//! experiment step, and from Argo Rollouts 1.9.1's own objects (`testdata/argo-objects`) of a
//! canary paused at its first step (promoted in full) and of a blue-green update paused with
//! its preview up (promoted). Two first runs of each update count the controller's writes
//! (through the fault proxy, Events aside; the smaller count is kept); then for every k, in a
//! namespace of its own, an update is started under a `sluice-controller` process that the
//! proxy kills once the API server has answered its k-th write (and, for every third k, also a
//! run where it is killed as its k-th write arrives, before the write goes on); then a fresh
//! controller is started, and the update must complete. Each run asserts its process was
//! killed at its k (or that its update needed fewer writes), and a recorder watching the
//! namespace holds the [`rules`] at every state the API server went through ([`recorder`]),
//! not at samples of them.

mod recorder;
mod rules;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use recorder::{Found, Log, Obj, Recorder};
use rules::{Expect, KEEP};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::process::ControllerProcess;
use sluice_e2e::routing::install_router_crds;
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_testenv::fault_proxy::{FaultProxy, Faults, KillPoint};

const REPLICAS: i32 = 2;
/// Runs at a time, each in its own namespace with its own controller, across all the tests
/// of this file (the harness runs them in parallel).
const CONCURRENT: usize = 4;
static RUNNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(CONCURRENT);

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

    fn expect(self) -> Expect {
        Expect {
            replicas: self.replicas(),
            active_service: self.active_service(),
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
                    experiment_steps(),
                    json!({}),
                ))
                .await
                .expect("rollout");
            }
        }
    }
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

/// What one run did: the writes the first controller made, whether it was killed at its
/// point, what the recorder found, and what it recorded.
struct Run {
    writes: u64,
    killed: bool,
    found: Found,
    log: Log,
    dump: String,
}

/// A kubeconfig file that reaches the API server through `proxy`.
fn proxy_kubeconfig(proxy: &FaultProxy, name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("{name}-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, proxy.kubeconfig()).expect("writing the proxy's kubeconfig");
    path
}

/// An update from v1 to v2 under a controller process killed at its `kill` point (`None`:
/// never), then finished by a fresh controller.
async fn run(env: &TestEnv, case: Case, kill: Option<(u64, KillPoint)>) -> Run {
    let _turn = RUNNING.acquire().await.expect("semaphore never closed");
    let prefix = format!(
        "crash-{}-{}",
        case.label(),
        match kill {
            None => "all".to_string(),
            Some((k, KillPoint::AfterAnswered)) => k.to_string(),
            Some((k, KillPoint::BeforeSent)) => format!("{k}b"),
        }
    );
    let ns = TestNamespace::create(env, &prefix)
        .await
        .expect("namespace");
    prepare(env, &ns, case).await;
    let recorder = Recorder::start(env.client(), ns.name(), case == Case::Routed);
    recorder.listed().await;

    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .expect("proxy");
    let kubeconfig = proxy_kubeconfig(&proxy, ns.name());
    let mut first = ControllerProcess::start_with(
        env,
        &kubeconfig,
        ns.name(),
        &["--namespaced", "--namespace", ns.name()],
        &[],
    )
    .await
    .expect("the controller process");
    // Set before the process has listed anything, so long before its first write.
    if let Some((k, point)) = kill {
        proxy.kill_at_write(k, first.pid().expect("a running process"), point);
    }
    case.act(&ns).await;
    let ns_ref = &ns;
    let proxy_ref = &proxy;
    let first_ended = wait_for(
        "the kill or the end of the update",
        TIMEOUT,
        || async move {
            if proxy_ref.killed() {
                return Ok(());
            }
            completed(ns_ref, case).await
        },
    )
    .await;
    if let Err(e) = first_ended {
        panic!("{prefix}: {e:#}\n{}\n{}", ns.dump().await, first.log());
    }
    if kill.is_none() {
        // The uncut run counts every write of the update, up to a moment of quiet.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(first.ended_by_signal(), None, "{prefix}: {}", first.log());
    }
    if proxy.killed() {
        // The proxy's SIGKILL, and nothing else, ended the process.
        let signal = wait_for("the killed process to end", Duration::from_secs(10), || {
            let signal = first.ended_by_signal();
            async move { signal.ok_or_else(|| anyhow::anyhow!("still running")) }
        })
        .await
        .expect("the process ended");
        assert_eq!(signal, 9, "{prefix}: ended by signal {signal}");
    }
    // A run whose update completed before its k-th write is ended here; one whose k-th write
    // came meanwhile (a last status write) counts as killed.
    first.kill();
    let killed = proxy.killed();
    let writes = proxy.writes();
    drop(proxy);
    let _ = std::fs::remove_file(&kubeconfig);

    let second = start_controller(env, &ns);
    let done = wait_for("the update to complete", TIMEOUT, || completed(&ns, case)).await;
    let dump = match done {
        Ok(()) => String::new(),
        Err(e) => format!("{prefix}: {e:#}\n{}", ns.dump().await),
    };
    // A last look once everything has settled.
    tokio::time::sleep(Duration::from_millis(500)).await;
    second.stop().await;
    let log = recorder.log();
    drop(recorder);
    Run {
        writes,
        killed,
        found: log.check(&case.expect()),
        log,
        dump,
    }
}

/// The recorder's checks fail on the baseline's own record with a violation planted after its
/// end: a ReplicaSet that lost its revision annotation, a second ReplicaSet for a template,
/// and traffic sent to pods that are not there.
fn planted_violations_are_found(case: Case, log: &Log) {
    let top = log.top();
    let last_rs = log
        .changes
        .iter()
        .rev()
        .find_map(|c| match &c.obj {
            Some(Obj::ReplicaSet(rs)) => Some(rs.clone()),
            _ => None,
        })
        .expect("a ReplicaSet recorded");
    let plant = |revision: u64, name: &str, obj: Obj| {
        let mut planted = log.clone();
        planted.changes.push(recorder::Change {
            revision,
            kind: match &obj {
                Obj::ReplicaSet(_) => recorder::Kind::ReplicaSet,
                Obj::Service(_) => recorder::Kind::Service,
                _ => unreachable!("only these are planted"),
            },
            name: name.to_string(),
            obj: Some(obj),
            initial: false,
        });
        planted.check(&case.expect()).violations
    };
    let mut stripped = last_rs.clone();
    stripped
        .metadata
        .annotations
        .get_or_insert_default()
        .remove("rollout.argoproj.io/revision");
    let found = plant(
        top + 1,
        &kube::ResourceExt::name_any(&last_rs),
        Obj::ReplicaSet(stripped),
    );
    assert!(
        found.iter().any(|v| v.contains("no revision annotation")),
        "{}: a lost annotation not found: {found:?}",
        case.label()
    );
    let mut twin = last_rs.clone();
    twin.metadata.name = Some("twin".into());
    let found = plant(top + 1, "twin", Obj::ReplicaSet(twin));
    assert!(
        found.iter().any(|v| v.contains("ReplicaSets run")),
        "{}: a second ReplicaSet for a template not found: {found:?}",
        case.label()
    );
    // A Service moved to a hash without ready pods: the VirtualService's or the active one.
    let service = match case {
        Case::Routed => Some("canary".to_string()),
        _ => case.active_service(),
    };
    if let Some(service) = service {
        let recorded = log
            .changes
            .iter()
            .rev()
            .find_map(|c| match &c.obj {
                Some(Obj::Service(s)) if c.name == service => Some(s.clone()),
                _ => None,
            })
            .expect("the Service recorded");
        let mut moved = recorded;
        moved
            .spec
            .get_or_insert_default()
            .selector
            .get_or_insert_default()
            .insert(
                sluice_engine::labels::POD_TEMPLATE_HASH.into(),
                "no-pods".into(),
            );
        let mut planted = log.clone();
        planted.changes.push(recorder::Change {
            revision: top + 1,
            kind: recorder::Kind::Service,
            name: service.clone(),
            obj: Some(Obj::Service(moved)),
            initial: false,
        });
        // Routed: the canary also gets weight, so that traffic goes to the missing pods.
        if case == Case::Routed {
            let vs = log
                .changes
                .iter()
                .rev()
                .find_map(|c| match &c.obj {
                    Some(Obj::VirtualService(vs)) => Some(vs.clone()),
                    _ => None,
                })
                .expect("the VirtualService recorded");
            let mut vs = vs;
            vs["spec"]["http"][0]["route"] = json!([
                {"destination": {"host": "stable"}, "weight": 50},
                {"destination": {"host": "canary"}, "weight": 50}
            ]);
            planted.changes.push(recorder::Change {
                revision: top + 2,
                kind: recorder::Kind::VirtualService,
                name: "vs".into(),
                obj: Some(Obj::VirtualService(vs)),
                initial: false,
            });
        }
        let found = planted.check(&case.expect()).violations;
        assert!(
            found
                .iter()
                .any(|v| v.contains("ready pods") || v.contains("no ReplicaSet")),
            "{}: traffic to missing pods not found: {found:?}",
            case.label()
        );
    }
}

/// The kill points of a campaign of `total` writes: after the answer of every write, and
/// before the sending of every third.
fn kill_points(total: u64) -> Vec<(u64, KillPoint)> {
    let mut points: Vec<(u64, KillPoint)> =
        (1..=total).map(|k| (k, KillPoint::AfterAnswered)).collect();
    points.extend(
        (1..=total)
            .filter(|k| k % 3 == 1)
            .map(|k| (k, KillPoint::BeforeSent)),
    );
    points
}

async fn crash_at_every_write(case: Case) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    if case == Case::Routed {
        install_router_crds(&env).await;
    }
    // Two uncut runs side by side: the count of writes varies between runs (a write that meets
    // a 409 is sent again, more often on a busy machine), and kill points past what an update
    // usually writes are never reached. The smaller count keeps the points where kills happen.
    let (baseline, second) = futures::join!(run(&env, case, None), run(&env, case, None));
    for uncut in [&baseline, &second] {
        assert!(uncut.dump.is_empty(), "{}", uncut.dump);
        assert!(
            uncut.found.violations.is_empty() && uncut.found.views > 0,
            "{}: without a crash: {:#?}",
            case.label(),
            uncut.found.violations
        );
    }
    planted_violations_are_found(case, &baseline.log);
    let total = baseline.writes.min(second.writes);
    assert!(total > 2, "{}: only {total} writes", case.label());

    let points = kill_points(total);
    let runs: Vec<((u64, KillPoint), Run)> = futures::stream::iter(points.clone())
        .map(|point| {
            let env = &env;
            async move { (point, run(env, case, Some(point)).await) }
        })
        .buffer_unordered(CONCURRENT)
        .collect()
        .await;
    let mut failures = Vec::new();
    let (mut killed, mut not_reached, mut states) = (0, 0, 0);
    for ((k, point), r) in &runs {
        let at = format!("killed at write {k} ({point:?})");
        killed += u64::from(r.killed);
        states += r.found.views;
        // A run not killed must have finished in fewer than k writes (this run's update took
        // fewer than the baseline's): a run that wrote k times and was not killed means the
        // kill never engaged, and the point proved nothing.
        if !r.killed {
            not_reached += 1;
            if r.writes >= *k {
                failures.push(format!(
                    "{at}: not killed, though it wrote {} times",
                    r.writes
                ));
            }
        }
        if !r.dump.is_empty() {
            failures.push(format!("{at}: did not complete: {}", r.dump));
        }
        if r.found.views == 0 {
            failures.push(format!("{at}: the recorder judged no state"));
        }
        if !r.found.violations.is_empty() {
            failures.push(format!("{at}: {:#?}", r.found.violations));
        }
    }
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "{}: {total} writes in the update (uncut runs: {} and {}), {} kill points, {killed} of them killed before the end, {not_reached} not reached (that run finished in fewer writes), {states} states judged, all passed\n",
            case.label(),
            baseline.writes,
            second.writes,
            runs.len()
        )
        .as_bytes(),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Most points must be real kills: a campaign of runs never killed would check nothing.
    let total_points = points.len() as u64;
    assert!(
        killed * 4 >= total_points * 3,
        "{}: only {killed} of {total_points} kill points killed the process",
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
