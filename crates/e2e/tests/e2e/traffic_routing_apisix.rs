//! Apache APISIX traffic routing on the real control plane, with the Rollouts and ApisixRoutes
//! of Argo's own APISIX end-to-end suite unchanged: the backends of the route's rule carry
//! Argo's weights at every step, on abort and after promotion; and a `setHeaderRoute` step
//! creates a second ApisixRoute, named after the step's route and owned by the Rollout, that
//! sends the requests with the step's header to the canary alone (weight 100, the stable
//! backend removed, the rule's priority raised, the header as a match expression), kept over
//! the later steps and deleted once the Rollout is promoted.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Api;
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use tokio::task::JoinHandle;

const ROLLOUT: &str = "rollout-apisix-canary";
const ROUTE: &str = "rollouts-apisix-route";
const RULE: &str = "rollouts-apisix";
const CANARY: &str = "rollout-apisix-canary-canary";
const STABLE: &str = "rollout-apisix-canary-stable";
const HEADER_ROUTE: &str = "set-header";

fn apisix_routes(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(ns, "apisix.apache.org", "v2", "ApisixRoute", "apisixroutes")
}

/// `(canary, stable)` weights of the backends of the rule the Rollout names.
fn weights(route: &Value) -> Option<(i64, i64)> {
    let rule = route
        .pointer("/spec/http")?
        .as_array()?
        .iter()
        .find(|r| r["name"] == RULE)?;
    let backends = rule["backends"].as_array()?;
    let weight = |svc: &str| {
        backends
            .iter()
            .find(|b| b["serviceName"] == svc)
            .and_then(|b| b["weight"].as_i64())
    };
    Some((weight(CANARY)?, weight(STABLE)?))
}

async fn wait_weights(ns: &TestNamespace, expected: (i64, i64)) {
    wait_for(&format!("{ROUTE} at {expected:?}"), TIMEOUT, || async {
        let w = weights(&json_of(&apisix_routes(ns).get(ROUTE).await?));
        anyhow::ensure!(w == Some(expected), "{w:?}");
        Ok(())
    })
    .await
    .unwrap();
}

/// Waits until the update is at step `index` or a later one.
async fn wait_step_index(ns: &TestNamespace, index: i32) {
    let api = rollouts(ns);
    wait_for(&format!("canary step index {index}"), TIMEOUT, || async {
        let s = api.get(ROLLOUT).await?.status.unwrap_or_default();
        anyhow::ensure!(
            s.stable_rs != s.current_pod_hash && s.current_step_index >= Some(index),
            "{:?}",
            s.current_step_index
        );
        Ok(())
    })
    .await
    .unwrap();
}

async fn wait_promoted(ns: &TestNamespace) {
    let api = rollouts(ns);
    wait_for("the update to complete", TIMEOUT, || async {
        let s = api.get(ROLLOUT).await?.status.unwrap_or_default();
        anyhow::ensure!(
            s.phase == Some(RolloutPhase::Healthy) && s.stable_rs == s.current_pod_hash,
            "{:?}",
            s.phase
        );
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apisix_backend_weights_follow_the_steps_the_promotion_and_the_abort() {
    let (_env, ns, _controller) = setup_routed("apisix").await;
    // Recording from before the route exists: every weight it is ever given.
    let recorder = Recorder::start(apisix_routes(&ns), ROUTE, weights);
    ns.apply_yaml(&corpus_file("test/e2e/apisix/rollout-apisix-canary.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, ROLLOUT, RolloutPhase::Healthy, TIMEOUT).await;
    wait_weights(&ns, (0, 100)).await;

    // setWeight 5, pause 15 s, setWeight 50, pause 15 s, then promotion.
    set_image(&api, ROLLOUT, "nginx:1.20-alpine").await;
    wait_weights(&ns, (5, 95)).await;
    wait_step_index(&ns, 1).await;
    wait_weights(&ns, (50, 50)).await;
    wait_promoted(&ns).await;
    wait_weights(&ns, (0, 100)).await;
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (5, 95), (50, 50), (100, 0), (0, 100)],
        "ApisixRoute weights over the update"
    );
    // Only the weights are written: the rule is otherwise the one applied.
    let route = json_of(&apisix_routes(&ns).get(ROUTE).await.unwrap());
    assert_eq!(
        route["spec"]["http"][0]["match"],
        json!({
            "paths": ["/*"],
            "methods": ["GET", "POST", "PUT", "DELETE", "PATCH"],
            "hosts": ["rollouts-demo.apisix.local"]
        })
    );
    assert_eq!(route["spec"]["http"].as_array().map(Vec::len), Some(1));

    // An update aborted at 5%: all traffic back to stable.
    set_image(&api, ROLLOUT, "nginx:1.21-alpine").await;
    wait_weights(&ns, (5, 95)).await;
    abort(&api, ROLLOUT).await;
    wait_weights(&ns, (0, 100)).await;
    wait_phase(&api, ROLLOUT, RolloutPhase::Degraded, TIMEOUT).await;
    assert_eq!(
        recorder.values().await,
        vec![
            (0, 100),
            (5, 95),
            (50, 50),
            (100, 0),
            (0, 100),
            (5, 95),
            (0, 100)
        ],
        "ApisixRoute weights over the update and the aborted one"
    );
}

/// Every version of one object seen by a watch: `Some(spec)` when written, `None` when
/// deleted (each kept once in a row).
struct Versions {
    seen: Arc<Mutex<Vec<Option<Value>>>>,
    task: JoinHandle<()>,
}

impl Versions {
    fn start(api: Api<DynamicObject>, name: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config).default_backoff().boxed();
            while let Some(event) = stream.next().await {
                let value = match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        Some(Some(json_of(&o)["spec"].clone()))
                    }
                    Ok(watcher::Event::Delete(_)) => Some(None),
                    _ => None,
                };
                if let Some(value) = value {
                    let mut seen = sink.lock().expect("versions lock");
                    if seen.last() != Some(&value) {
                        seen.push(value);
                    }
                }
            }
        });
        Self { seen, task }
    }

    fn values(&self) -> Vec<Option<Value>> {
        self.seen.lock().expect("versions lock").clone()
    }
}

impl Drop for Versions {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The set-header fixture's first step: setCanaryScale, setHeaderRoute and pause together.
const COMBINED_STEP: &str = "      - setCanaryScale:
          replicas: 1
        setHeaderRoute:
          match:
            - headerName: trace
              headerValue:
                exact: debug
          name: set-header
        pause:
          duration: 15
";

/// The same actions as three steps of their own.
const SEPARATE_STEPS: &str = "      - setCanaryScale:
          replicas: 1
      - setHeaderRoute:
          match:
            - headerName: trace
              headerValue:
                exact: debug
          name: set-header
      - pause:
          duration: 15
";

/// Argo's own fixture: its first step sets the canary scale, the header route and a pause at
/// once (Argo acts on each field of a step, and its suite checks the header route at step 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apisix_set_header_route_is_an_owned_route_to_the_canary_until_promotion() {
    let manifest = corpus_file("test/e2e/apisix/rollout-apisix-canary-set-header.yaml");
    assert!(manifest.contains(COMBINED_STEP));
    // Steps: 0 header route (with the scale and a pause), 1 pause, 2 setWeight 5, 3 pause,
    // 4 setWeight 50, 5 pause.
    header_route_scenario("apisix-header", &manifest, 0, 3, 5).await;
}

/// The fixture with the setCanaryScale, setHeaderRoute and pause of its first step as three
/// steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apisix_set_header_route_step_of_its_own_is_an_owned_route_to_the_canary() {
    let manifest = corpus_file("test/e2e/apisix/rollout-apisix-canary-set-header.yaml")
        .replace(COMBINED_STEP, SEPARATE_STEPS);
    // Steps: 0 scale, 1 header route, 2 and 3 pauses, 4 setWeight 5, 5 pause, 6 setWeight
    // 50, 7 pause.
    header_route_scenario("apisix-header-own", &manifest, 1, 5, 7).await;
}

/// Walks the set-header Rollout: `header_step` is the index of its setHeaderRoute step, and
/// the weights are 5 and 50 from the step indices `at_5` and `at_50` on.
async fn header_route_scenario(
    prefix: &str,
    manifest: &str,
    header_step: i32,
    at_5: i32,
    at_50: i32,
) {
    let (_env, ns, _controller) = setup_routed(prefix).await;
    let recorder = Recorder::start(apisix_routes(&ns), ROUTE, weights);
    let header_versions = Versions::start(apisix_routes(&ns), HEADER_ROUTE);
    ns.apply_yaml(manifest).await.unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, ROLLOUT, RolloutPhase::Healthy, TIMEOUT).await;
    wait_weights(&ns, (0, 100)).await;
    assert_eq!(
        apisix_routes(&ns).get_opt(HEADER_ROUTE).await.unwrap(),
        None,
        "no header route before its step"
    );

    // setCanaryScale 1, setHeaderRoute `trace: debug`, pause 15 s.
    set_image(&api, ROLLOUT, "nginx:1.20-alpine").await;
    wait_step_index(&ns, header_step).await;
    // The rule copied from the main route: the canary backend alone at 100, the priority
    // raised by one, the header as an APISIX expression; paths, methods and hosts kept.
    let expected = json!({
        "http": [{
            "name": RULE,
            "priority": 1,
            "match": {
                "paths": ["/*"],
                "methods": ["GET", "POST", "PUT", "DELETE", "PATCH"],
                "hosts": ["rollouts-demo.apisix.local"],
                "exprs": [{
                    "subject": {"scope": "Header", "name": "trace"},
                    "op": "Equal",
                    "value": "debug"
                }]
            },
            "backends": [{"serviceName": CANARY, "servicePort": 80, "weight": 100}]
        }]
    });
    let header = wait_for("the header route", TIMEOUT, || async {
        Ok(json_of(&apisix_routes(&ns).get(HEADER_ROUTE).await?))
    })
    .await
    .unwrap();
    assert_eq!(header["spec"], expected);
    let uid = api.get(ROLLOUT).await.unwrap().metadata.uid;
    assert_eq!(
        header["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "name": ROLLOUT,
            "uid": uid,
            "controller": true,
            "blockOwnerDeletion": true
        }]),
        "the header route is controlled by the Rollout"
    );
    // setCanaryScale 1: one canary pod beside the stable one.
    wait_replicas(
        &ns,
        ROLLOUT,
        &[("nginx:1.19-alpine", 1), ("nginx:1.20-alpine", 1)],
        TIMEOUT,
    )
    .await;
    // The main route still sends nothing to the canary: no setWeight yet.
    assert_eq!(
        weights(&json_of(&apisix_routes(&ns).get(ROUTE).await.unwrap())),
        Some((0, 100))
    );

    // setWeight 5, then setWeight 50: the header route stays.
    wait_step_index(&ns, at_5).await;
    wait_weights(&ns, (5, 95)).await;
    wait_step_index(&ns, at_50).await;
    wait_weights(&ns, (50, 50)).await;
    let header = json_of(&apisix_routes(&ns).get(HEADER_ROUTE).await.unwrap());
    assert_eq!(header["spec"], expected, "kept over the later steps");

    // Promotion: the managed route is deleted.
    promote(&api, ROLLOUT).await;
    wait_promoted(&ns).await;
    wait_weights(&ns, (0, 100)).await;
    wait_for("the header route deleted", TIMEOUT, || async {
        anyhow::ensure!(
            apisix_routes(&ns).get_opt(HEADER_ROUTE).await?.is_none(),
            "still there"
        );
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(
        recorder.values().await,
        vec![(0, 100), (5, 95), (50, 50), (100, 0), (0, 100)],
        "main ApisixRoute weights over the update"
    );
    let versions = header_versions.values();
    assert_eq!(
        versions.last(),
        Some(&None),
        "the header route ends deleted: {versions:?}"
    );
    assert!(
        versions.iter().flatten().all(|spec| *spec == expected),
        "the header route only ever had the step's content: {versions:?}"
    );
}
