//! Updates go through while the control plane itself misbehaves. On a control plane of the
//! test's own (it kills and stops components), a routed canary (NGINX, with steps), a
//! blue-green with a pre-promotion analysis run by a Job and a canary with an experiment step
//! are updated once per fault, the fault injected once the routed canary gets traffic:
//!
//! - etcd stopped (SIGSTOP) for 20 s, then continued;
//! - every watch of the controller cut at once (it talks to the API server through a
//!   [`FaultProxy`] from then on);
//! - every request of the controller answered 429 for 30 s;
//! - kube-apiserver killed (SIGKILL) and started again 10 s later on the same etcd: a test of
//!   its own (docs/testing.md).
//!
//! After each: the three updates are complete (Healthy, the new template's ReplicaSet stable and
//! the old ones scaled down; the experiment step passed, or the update would have aborted), the controller process is still the one started, its `/metrics` and
//! log show the fault, and the recorded ReplicaSets, Services and Ingresses pass the checks of
//! [`trace`]: no second ReplicaSet for a hash, no annotation lost, nothing scaled below the
//! traffic it gets. The checks are shown to fail on the run's own trace with violations
//! planted in it, and on small traces in `control_plane_faults/trace/tests.rs`.
//!
//! The first three take about 3.5 minutes on 2 cores, 40 s of it starting the control plane.

mod controller;
mod trace;

use std::time::{Duration, Instant};

use controller::{Controller, Requests};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::Api;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{OwnControlPlane, TestEnv, TestNamespace, wait_for};
use sluice_e2e::routing::{ingresses, json_of};
use sluice_e2e::*;
use sluice_engine::ReplicaSetExt;
use sluice_testenv::fault_proxy::{Action, FaultProxy, Faults, Requests as Matching, Rule};
use trace::{Kind, Observation, Recorder, RsState, Seen, Trace, Traffic};

const CANARY: &str = "shop";
const CANARY_REPLICAS: i32 = 4;
const CANARY_INGRESS: &str = "shop-shop-ingress-canary";
const BLUE_GREEN: &str = "bg";
const BLUE_GREEN_REPLICAS: i32 = 2;
const EXPERIMENT: &str = "exp";
const EXPERIMENT_REPLICAS: i32 = 2;
/// The Rollouts updated in every scenario.
const ROLLOUTS: [&str; 3] = [CANARY, BLUE_GREEN, EXPERIMENT];
/// From the fault's end to both updates complete, old ReplicaSets scaled down.
const RECOVERY: Duration = Duration::from_secs(150);

fn traffic() -> Vec<Traffic> {
    vec![
        Traffic::Canary {
            rollout: CANARY.into(),
            replicas: CANARY_REPLICAS,
            stable_service: format!("{CANARY}-stable"),
            canary_service: format!("{CANARY}-canary"),
            canary_ingress: CANARY_INGRESS.into(),
        },
        Traffic::BlueGreen {
            rollout: BLUE_GREEN.into(),
            replicas: BLUE_GREEN_REPLICAS,
            active_service: format!("{BLUE_GREEN}-active"),
        },
    ]
}

/// The canary: its two Services, the stable Ingress NGINX routes by, and the Rollout with two
/// weighted steps.
async fn apply_canary(ns: &TestNamespace) {
    for svc in ["stable", "canary"] {
        ns.apply_yaml(
            &json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("{CANARY}-{svc}")},
                    "spec": {"selector": {"app": CANARY}, "ports": [{"port": 80}]}})
            .to_string(),
        )
        .await
        .unwrap();
    }
    ns.apply_yaml(
        &json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": format!("{CANARY}-ingress"),
                             "annotations": {"kubernetes.io/ingress.class": "nginx"}},
                "spec": {"rules": [{"http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": format!("{CANARY}-stable"),
                                            "port": {"number": 80}}}}]}}]}})
        .to_string(),
    )
    .await
    .unwrap();
    let steps = json!([
        {"setWeight": 25}, {"pause": {"duration": 4}},
        {"setWeight": 50}, {"pause": {"duration": 4}}
    ]);
    let mut rollout: Value = serde_json::from_str(&canary_rollout(
        CANARY,
        CANARY_REPLICAS,
        "app:v1",
        steps,
        json!({}),
    ))
    .unwrap();
    let canary = &mut rollout["spec"]["strategy"]["canary"];
    canary["canaryService"] = json!(format!("{CANARY}-canary"));
    canary["stableService"] = json!(format!("{CANARY}-stable"));
    canary["scaleDownDelaySeconds"] = json!(3);
    canary["trafficRouting"] = json!({"nginx": {"stableIngress": format!("{CANARY}-ingress")}});
    ns.apply_yaml(&rollout.to_string()).await.unwrap();
}

/// The blue-green, promoted on its own once a Job of the pre-promotion analysis succeeds.
async fn apply_blue_green_with_analysis(ns: &TestNamespace) {
    ns.apply_yaml(
        &json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
        "metadata": {"name": "job-check"},
        "spec": {"metrics": [{"name": "job", "provider": {"job": {"spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "check", "image": "busybox", "command": ["sh", "-c", "sleep 2"]}
            ]}}}}}}]}})
        .to_string(),
    )
    .await
    .unwrap();
    apply_blue_green(
        ns,
        BLUE_GREEN,
        BLUE_GREEN_REPLICAS,
        "app:v1",
        json!({
            "scaleDownDelaySeconds": 3,
            "prePromotionAnalysis": {"templates": [{"templateName": "job-check"}]}
        }),
    )
    .await;
}

/// A canary whose first step runs an Experiment of the canary template for 2 s.
async fn apply_experiment(ns: &TestNamespace) {
    ns.apply_yaml(&canary_rollout(
        EXPERIMENT,
        EXPERIMENT_REPLICAS,
        "app:v1",
        experiment_steps(),
        json!({}),
    ))
    .await
    .unwrap();
}

fn stable_of(ro: &Rollout) -> Option<String> {
    ro.status.as_ref().and_then(|s| s.stable_rs.clone())
}

/// Waits until the canary sends traffic to its canary pods: the update is under way.
async fn wait_canary_routed(ns: &TestNamespace) {
    wait_for("the canary to get traffic", RECOVERY, || async {
        let ingress = json_of(&ingresses(ns).get(CANARY_INGRESS).await?);
        let weight = ingress["metadata"]["annotations"][trace::CANARY_WEIGHT]
            .as_str()
            .and_then(|w| w.parse::<i64>().ok());
        anyhow::ensure!(weight.is_some_and(|w| w > 0), "weight {weight:?}");
        Ok(())
    })
    .await
    .unwrap();
}

/// Waits until the three updates are complete: Healthy on a new stable ReplicaSet running
/// `image`, every other ReplicaSet at zero.
async fn wait_updated(ns: &TestNamespace, before: &[(String, String)], image: &str) {
    let api = rollouts(ns);
    let replica_sets: Api<ReplicaSet> = ns.api();
    for (name, old) in before {
        // Healthy on a new stable within the shared wait (150 s, as RECOVERY).
        let stable = wait_promoted(&api, name, old).await;
        let rs = replica_sets.get(&format!("{name}-{stable}")).await.unwrap();
        let template_image = rs
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone());
        assert_eq!(template_image.as_deref(), Some(image), "{name}'s stable");
        assert!(rs.spec_replicas() > 0);
    }
    wait_replicas(ns, CANARY, &[(image, CANARY_REPLICAS)], RECOVERY).await;
    wait_replicas(ns, BLUE_GREEN, &[(image, BLUE_GREEN_REPLICAS)], RECOVERY).await;
    wait_replicas(ns, EXPERIMENT, &[(image, EXPERIMENT_REPLICAS)], RECOVERY).await;
}

/// What the controller did during one scenario, and what the fault returned.
struct Outcome<T> {
    before: Requests,
    after: Requests,
    /// What the controller logged meanwhile.
    logged: String,
    fault: T,
}

/// One update of both Rollouts with `fault` injected once the canary gets traffic; then the
/// checks every scenario shares.
async fn update_through<T, Fut>(
    ns: &TestNamespace,
    controller: &mut Controller,
    recorder: &Recorder,
    (label, image): (&str, &str),
    fault: impl FnOnce() -> Fut,
) -> Outcome<T>
where
    Fut: Future<Output = T>,
{
    let started = Instant::now();
    let api = rollouts(ns);
    let mut before = Vec::new();
    for name in ROLLOUTS {
        before.push((
            name.to_string(),
            stable_of(&api.get(name).await.unwrap()).unwrap(),
        ));
    }
    let requests_before = controller.requests().await.unwrap();
    let logged_before = controller.log().len();
    for name in ROLLOUTS {
        set_image(&api, name, image).await;
    }
    wait_canary_routed(ns).await;
    let injected = Instant::now();
    let fault = fault().await;
    let recovered = Instant::now();
    wait_updated(ns, &before, image).await;
    assert!(
        controller.running(),
        "{label}: the controller exited:\n{}",
        controller.log()
    );
    let requests_after = controller.requests().await.unwrap();
    let log = controller.log();
    let logged = log.get(logged_before..).unwrap_or_default().to_string();

    let findings = trace::check(&recorder.trace(), &traffic());
    assert!(
        findings.violations.is_empty(),
        "{label}: {} violations, the first ones: {:#?}",
        findings.violations.len(),
        &findings.violations[..findings.violations.len().min(20)]
    );
    eprintln!(
        "{label}: fault from {:.0?} to {:.0?}, updates complete at {:.0?}; requests other than \
         200/201: {:?}; traffic checked at {} revisions ({} with the canary routed), {} blind",
        injected - started,
        recovered - started,
        started.elapsed(),
        requests_after.changes(&requests_before),
        findings.checked,
        findings.routed,
        findings.blind
    );
    Outcome {
        before: requests_before,
        after: requests_after,
        logged,
        fault,
    }
}

impl<T> Outcome<T> {
    /// What changed in the controller's metrics, and its warnings and errors (the ones about
    /// the local API server's self-signed certificate aside).
    fn show(&self, label: &str) -> Vec<&str> {
        let lines: Vec<&str> = self
            .logged
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .filter(|l| !l.contains("Server cert bypassed"))
            .collect();
        eprintln!(
            "{label}: requests {:?}; {} warnings and errors logged, the first ones:\n{}",
            self.after.changes(&self.before),
            lines.len(),
            lines[..lines.len().min(5)].join("\n")
        );
        lines
    }
}

/// A kubeconfig for a client of the fault proxy: plain HTTP, no credentials (the proxy holds
/// them).
/// The control plane, the namespace, both Rollouts Healthy on `app:v1` under a controller, and
/// the recorder. Fields drop in their order: the namespace (printed if the test failed) before
/// the control plane.
struct Fixture {
    recorder: Recorder,
    controller: Controller,
    ns: TestNamespace,
    env: TestEnv,
    plane: OwnControlPlane,
    started: Instant,
}

async fn fixture(name: &str) -> Fixture {
    let started = Instant::now();
    sluice_controller::install_crypto_provider();
    let plane = OwnControlPlane::start(name)
        .await
        .expect("a control plane of the test's own");
    let env = plane.env().await.expect("the test's control plane");
    let ns = TestNamespace::create(&env, name).await.unwrap();
    eprintln!("control plane up in {:.0?}", started.elapsed());
    apply_canary(&ns).await;
    apply_blue_green_with_analysis(&ns).await;
    apply_experiment(&ns).await;
    let controller = Controller::start(
        env.kubeconfig_path(),
        ns.name(),
        &plane.logs_dir(),
        "sluice-direct",
    )
    .await
    .unwrap();
    let api = rollouts(&ns);
    for name in ROLLOUTS {
        wait_phase(&api, name, RolloutPhase::Healthy, RECOVERY).await;
    }
    let recorder = Recorder::start(env.client(), ns.name());
    recorder.listed().await;
    Fixture {
        recorder,
        controller,
        ns,
        env,
        plane,
        started,
    }
}

impl Fixture {
    /// Stops the controller and shows that the checks would have caught a violation.
    fn finish(mut self) {
        assert!(self.controller.running(), "{}", self.controller.log());
        self.controller.stop();
        planted_violations_are_found(&self.recorder.trace());
        eprintln!("done in {:.0?}", self.started.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_completes_after_the_api_server_is_killed() {
    let mut f = fixture("apiserver-killed").await;
    let plane = &f.plane;
    let a = update_through(
        &f.ns,
        &mut f.controller,
        &f.recorder,
        ("a. kube-apiserver killed", "app:v2"),
        || async move {
            plane.signal("kube-apiserver", "KILL").unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            plane.restart_apiserver().await.unwrap();
        },
    )
    .await;
    a.show("a");
    // Refused connections count as requests without a status.
    let refused = a.after.since(&a.before, |_, status| status == "error");
    assert!(refused > 0, "no failed request counted");
    assert!(
        a.logged.contains("client error (Connect)"),
        "the log does not say the API server was unreachable:\n{}",
        a.logged
    );
    f.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_complete_through_a_stopped_etcd_cut_watches_and_throttling() {
    let mut f = fixture("etcd-watches-429").await;
    let plane = &f.plane;

    // b. etcd stopped for 20 s: the API server stays up, and every request that reaches etcd
    // waits.
    let b = update_through(
        &f.ns,
        &mut f.controller,
        &f.recorder,
        ("b. etcd stopped", "app:v2"),
        || async move {
            let frozen = plane.freeze("etcd").unwrap();
            tokio::time::sleep(Duration::from_secs(20)).await;
            frozen.thaw();
        },
    )
    .await;
    let warned = b.show("b");
    assert!(
        b.after.slow_since(&b.before) > 0,
        "no request took over 5 s"
    );
    assert!(
        warned
            .iter()
            .any(|l| l.contains("slow Kubernetes API request")),
        "the log does not say requests stalled:\n{}",
        b.logged
    );

    // From here on the controller talks to the API server through a proxy that can cut its
    // watches and answer for the API server.
    f.controller.stop();
    let proxy = FaultProxy::start(f.env.config().clone(), Faults::none())
        .await
        .unwrap();
    let proxied = plane.dir().join("kubeconfig-proxy");
    std::fs::write(&proxied, proxy.kubeconfig()).unwrap();
    f.controller = Controller::start(&proxied, f.ns.name(), &plane.logs_dir(), "sluice-proxied")
        .await
        .unwrap();
    let proxy = &proxy;

    // c. Every watch the controller has open cut at once.
    let c = update_through(
        &f.ns,
        &mut f.controller,
        &f.recorder,
        ("c. every watch cut", "app:v3"),
        || async move { proxy.cut_watches() },
    )
    .await;
    let warned = c.show("c");
    // One for each kind the loops watch.
    assert!(c.fault >= 10, "only {} watches were open", c.fault);
    let rewatched = c.after.since(&c.before, |verb, _| verb == "Watch");
    assert!(
        rewatched >= c.fault,
        "{} watches cut, {rewatched} started again",
        c.fault
    );
    let ended = warned.iter().filter(|l| l.contains("eof in poll")).count() as u64;
    assert!(
        ended >= c.fault,
        "{} watches cut, {ended} logged as ended:\n{}",
        c.fault,
        c.logged
    );

    // d. Throttled: every request answered 429 (with Retry-After) for 30 s.
    let d = update_through(
        &f.ns,
        &mut f.controller,
        &f.recorder,
        ("d. 429 for 30 s", "app:v4"),
        || async move {
            proxy.set_rules(vec![Rule {
                path_prefix: "/".into(),
                requests: Matching::All,
                action: Action::Status(429),
            }]);
            tokio::time::sleep(Duration::from_secs(30)).await;
            proxy.set_rules(Vec::new());
            proxy
                .injected()
                .get("rule-status-429")
                .copied()
                .unwrap_or(0)
        },
    )
    .await;
    let warned = d.show("d");
    assert!(d.fault > 0, "no request met the 429s");
    // kube's client retries a 429 itself, after its Retry-After: what the controller sees is
    // a request that took long.
    assert!(
        d.after.slow_since(&d.before) > 0,
        "{} answers 429, and no request took over 5 s",
        d.fault
    );
    assert!(
        warned
            .iter()
            .any(|l| l.contains("slow Kubernetes API request")),
        "the log does not say requests were held up:\n{}",
        d.logged
    );
    f.finish();
}

/// The checks run on this run's own trace, with one violation planted at a time, find it: the
/// shapes they match (owners, hashes, Service and Ingress names) are the real objects'.
fn planted_violations_are_found(trace: &Trace) {
    let rs_states: Vec<(&Observation, &RsState)> = trace
        .observations
        .iter()
        .filter_map(|o| match &o.seen {
            Some(Seen::ReplicaSet(rs)) if rs.owner == format!("Rollout/{CANARY}") => Some((o, rs)),
            _ => None,
        })
        .collect();
    let (first, state) = rs_states
        .first()
        .copied()
        .expect("canary ReplicaSets recorded");

    // A second ReplicaSet for the hash of one the canary had.
    let mut planted = trace.clone();
    planted.observations.push(Observation {
        name: format!("{}-again", first.name),
        seen: Some(Seen::ReplicaSet(RsState {
            uid: "planted".into(),
            ..state.clone()
        })),
        ..first.clone()
    });
    let found = trace::check(&planted, &traffic()).violations;
    assert!(
        found.iter().any(|v| v.contains("2 ReplicaSets for hash")),
        "{found:?}"
    );

    // The last state of a ReplicaSet without its annotations.
    let (last, state) = rs_states
        .last()
        .copied()
        .expect("canary ReplicaSets recorded");
    assert!(!state.annotations.is_empty(), "{state:?}");
    let mut planted = trace.clone();
    planted.observations.push(Observation {
        revision: last.revision + 1,
        seen: Some(Seen::ReplicaSet(RsState {
            annotations: Default::default(),
            ..state.clone()
        })),
        ..last.clone()
    });
    let found = trace::check(&planted, &traffic()).violations;
    assert!(
        found.iter().any(|v| v.contains("lost its annotations")),
        "{found:?}"
    );

    // Every ReplicaSet of the canary at zero at a revision where the Ingress routed some of
    // the traffic to the canary: whichever was stable then is below its share.
    let blind = |r: u64| trace.blind.iter().any(|(a, b)| *a < r && r <= *b);
    let routed = trace
        .observations
        .iter()
        .find(|o| {
            o.kind == Kind::Ingress
                && matches!(o.seen, Some(Seen::Ingress(Some(w))) if w > 0)
                && !blind(o.revision)
        })
        .expect("a canary weight above zero recorded");
    let mut planted = trace.clone();
    for (o, rs) in &rs_states {
        planted.observations.push(Observation {
            revision: routed.revision,
            seen: Some(Seen::ReplicaSet(RsState {
                replicas: 0,
                ..(*rs).clone()
            })),
            ..(*o).clone()
        });
    }
    let findings = trace::check(&planted, &traffic());
    assert!(
        findings
            .violations
            .iter()
            .any(|v| v.contains(&format!("revision {}: {CANARY}'s stable", routed.revision))),
        "{:?}",
        findings.violations
    );
}
