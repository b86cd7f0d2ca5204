//! Traefik traffic routing on the real control plane, with a TraefikService shaped like the
//! one of Argo's Traefik guide (a `weighted` service listing the stable and canary Services):
//! the two entries carry Argo's weights at every step (0/100 once deployed, the step's weight,
//! 100 at the end of the steps, back to 0 once promoted), an abort sends everything back to
//! stable at once, and `--traefik-api-group traefik.containo.us` makes the controller route
//! through Traefik 2's group, leaving the `traefik.io` object of the same name alone.

use clap::Parser as _;
use serde_json::Value;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for};

const CANARY: &str = "rollouts-demo-canary";
const STABLE: &str = "rollouts-demo-stable";
const TS: &str = "traefik-service";

/// The Services, the TraefikService (in `group`) and the Rollout of Argo's Traefik guide.
fn manifest(group: &str, steps: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Service
metadata:
  name: {STABLE}
spec:
  ports:
  - port: 80
    targetPort: http
    protocol: TCP
    name: http
  selector:
    app: rollouts-demo
---
apiVersion: v1
kind: Service
metadata:
  name: {CANARY}
spec:
  ports:
  - port: 80
    targetPort: http
    protocol: TCP
    name: http
  selector:
    app: rollouts-demo
---
{ts}
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: rollouts-demo
spec:
  replicas: 2
  revisionHistoryLimit: 2
  selector:
    matchLabels:
      app: rollouts-demo
  template:
    metadata:
      labels:
        app: rollouts-demo
    spec:
      containers:
      - name: rollouts-demo
        image: argoproj/rollouts-demo:blue
        ports:
        - name: http
          containerPort: 8080
          protocol: TCP
  strategy:
    canary:
      canaryService: {CANARY}
      stableService: {STABLE}
      trafficRouting:
        traefik:
          weightedTraefikServiceName: {TS}
      steps:
{steps}
"#,
        ts = traefik_service(group)
    )
}

/// The weighted TraefikService, without weights (the controller writes them).
fn traefik_service(group: &str) -> String {
    format!(
        r#"
apiVersion: {group}/v1alpha1
kind: TraefikService
metadata:
  name: {TS}
spec:
  weighted:
    services:
    - name: {STABLE}
      port: 80
    - name: {CANARY}
      port: 80
"#
    )
}

fn traefik_services(ns: &TestNamespace, group: &str) -> kube::Api<kube::api::DynamicObject> {
    router_api(ns, group, "v1alpha1", "TraefikService", "traefikservices")
}

/// `(canary, stable)` weights of the weighted services, once both have one.
fn weights(ts: &Value) -> Option<(i64, i64)> {
    let services = ts.pointer("/spec/weighted/services")?.as_array()?;
    let weight = |name: &str| {
        services
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["weight"].as_i64())
    };
    Some((weight(CANARY)?, weight(STABLE)?))
}

/// A namespace with a controller for it, started with the given `--traefik-api-group` (the
/// flag parsed as the controller parses it), or the default one.
async fn setup_with(
    prefix: &str,
    traefik_api_group: Option<&str>,
) -> (TestEnv, TestNamespace, RunningController) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    install_router_crds(&env).await;
    let ns = TestNamespace::create(&env, prefix)
        .await
        .expect("namespace");
    let mut args = controller_args(ns.name());
    if let Some(group) = traefik_api_group {
        let flags = sluice_controller::Args::parse_from([
            "sluice-controller",
            "--traefik-api-group",
            group,
        ]);
        args.traefik_api_group = flags.traefik_api_group;
    }
    let controller = start_controller_with_args(env.client(), args);
    (env, ns, controller)
}

async fn wait_weights(ns: &TestNamespace, group: &str, expected: (i64, i64)) {
    wait_for(
        &format!("TraefikService at {expected:?}"),
        TIMEOUT,
        || async {
            let w = weights(&json_of(&traefik_services(ns, group).get(TS).await?));
            anyhow::ensure!(w == Some(expected), "{w:?}");
            Ok(())
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traefik_weighted_services_follow_the_steps_the_abort_and_the_promotion() {
    let (_env, ns, _controller) = setup_with("traefik", None).await;
    let group = "traefik.io";
    // Recording from before the TraefikService exists: every weight it is ever given.
    let recorder = Recorder::start(traefik_services(&ns, group), TS, weights);
    ns.apply_yaml(&manifest(
        group,
        "      - setWeight: 30\n      - pause: {}\n      - setWeight: 60\n      - pause: {duration: 5}",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "rollouts-demo";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    // Once deployed, all traffic to stable.
    wait_weights(&ns, group, (0, 100)).await;

    set_image(&api, name, "argoproj/rollouts-demo:yellow").await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    wait_weights(&ns, group, (30, 70)).await;
    // 30% of 2 pods: one canary pod beside the full stable.
    wait_replicas(
        &ns,
        name,
        &[
            ("argoproj/rollouts-demo:blue", 2),
            ("argoproj/rollouts-demo:yellow", 1),
        ],
        TIMEOUT,
    )
    .await;
    let ts = json_of(&traefik_services(&ns, group).get(TS).await.unwrap());
    assert_eq!(
        ts["spec"]["weighted"]["services"],
        serde_json::json!([
            {"name": STABLE, "port": 80, "weight": 70},
            {"name": CANARY, "port": 80, "weight": 30},
        ]),
        "only the weights are written"
    );

    // setWeight 60, a 5 s pause, 100 at the end of the steps, 0 once promoted.
    promote(&api, name).await;
    wait_for("the update to complete", TIMEOUT, || async {
        let s = api.get(name).await?.status.unwrap_or_default();
        anyhow::ensure!(
            s.phase == Some(RolloutPhase::Healthy) && s.stable_rs == s.current_pod_hash,
            "{:?}",
            s.phase
        );
        Ok(())
    })
    .await
    .unwrap();
    wait_weights(&ns, group, (0, 100)).await;
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (30, 70), (60, 40), (100, 0), (0, 100)],
        "TraefikService weights over the update"
    );
    let stable_hash = service_hash(&ns, STABLE).await;
    assert_eq!(service_hash(&ns, CANARY).await, stable_hash);

    // An update aborted at 30%: all traffic back to stable.
    set_image(&api, name, "argoproj/rollouts-demo:green").await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    wait_weights(&ns, group, (30, 70)).await;
    abort(&api, name).await;
    wait_weights(&ns, group, (0, 100)).await;
    wait_phase(&api, name, RolloutPhase::Degraded, TIMEOUT).await;
    assert_eq!(
        recorder.values().await,
        vec![
            (0, 100),
            (30, 70),
            (60, 40),
            (100, 0),
            (0, 100),
            (30, 70),
            (0, 100)
        ],
        "TraefikService weights over the update and the aborted one"
    );
    assert_eq!(service_hash(&ns, STABLE).await, stable_hash);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traefik_2_group_is_routed_with_the_traefik_api_group_flag() {
    let (_env, ns, _controller) = setup_with("traefik-containo", Some("traefik.containo.us")).await;
    let group = "traefik.containo.us";
    // A TraefikService of the same name in Traefik 3's group, which must stay untouched.
    let other = ns
        .apply_yaml(&traefik_service("traefik.io"))
        .await
        .unwrap()
        .remove(0);
    let recorder = Recorder::start(traefik_services(&ns, group), TS, weights);
    ns.apply_yaml(&manifest(group, "      - setWeight: 50\n      - pause: {}"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    let name = "rollouts-demo";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    wait_weights(&ns, group, (0, 100)).await;
    set_image(&api, name, "argoproj/rollouts-demo:yellow").await;
    wait_phase(&api, name, RolloutPhase::Paused, TIMEOUT).await;
    wait_weights(&ns, group, (50, 50)).await;
    promote(&api, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    wait_weights(&ns, group, (0, 100)).await;
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (50, 50), (100, 0), (0, 100)],
        "traefik.containo.us TraefikService weights over the update"
    );
    let untouched = traefik_services(&ns, "traefik.io").get(TS).await.unwrap();
    assert_eq!(
        untouched.metadata.resource_version, other.metadata.resource_version,
        "the traefik.io TraefikService is never written"
    );
    assert_eq!(weights(&json_of(&untouched)), None);
}
