//! Ping-pong Services (`canary.pingPong`) on the real control plane, with the Rollouts of
//! Argo's own end-to-end suite unchanged.
//!
//! Proven, as Argo does it:
//! - the first deploy makes `ping` the stable Service (`status.canary.stablePingPong: ping`,
//!   ping selecting the stable pods) and leaves pong's selector alone;
//! - during an update the other Service (pong) selects the new pods and the router weighs it
//!   as the canary against ping, step by step (ALB: the action of `rootService` lists pong
//!   then ping; Istio: the VirtualService's ping and pong destinations);
//! - promotion flips `stablePingPong` to `pong` without touching pong's selector, the router
//!   ends with everything on pong, and the old ReplicaSet is scaled down once the
//!   `scaleDownDelaySeconds` deadline it was given has passed;
//! - the next update moves ping to the newest pods and flips back to `ping`;
//! - with `ingresses[]`, both Ingresses carry the ping/pong weights.

use kube::Api;
use kube::api::DynamicObject;
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::rollout::{PingPongType, RolloutPhase};
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};

const ROOT_ACTION: &str = "alb.ingress.kubernetes.io/actions.alb-rollout-root";

/// Waits until `recorder` has seen the object once, so that no later change is missed.
async fn started<T: Clone + PartialEq + Send + 'static>(recorder: &Recorder<T>) {
    wait_for("the recorder's first observation", TIMEOUT, || async {
        anyhow::ensure!(!recorder.values().await.is_empty(), "nothing yet");
        Ok(())
    })
    .await
    .unwrap();
}

/// Argo's forward action text: target groups in order, port 80 as a string.
fn forward(groups: &[(&str, i64)]) -> String {
    let groups: Vec<String> = groups
        .iter()
        .map(|(svc, w)| format!(r#"{{"ServiceName":"{svc}","ServicePort":"80","Weight":{w}}}"#))
        .collect();
    format!(
        r#"{{"Type":"forward","ForwardConfig":{{"TargetGroups":[{}]}}}}"#,
        groups.join(",")
    )
}

fn root_action(ingress: &Value) -> Option<String> {
    ingress["metadata"]["annotations"][ROOT_ACTION]
        .as_str()
        .map(str::to_string)
}

fn services_api(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(ns, "", "v1", "Service", "services")
}

fn replica_sets_api(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(ns, "apps", "v1", "ReplicaSet", "replicasets")
}

/// The pod-template hash a Service selects (`None`: it selects by app only).
fn selected(svc: &Value) -> Option<Option<String>> {
    Some(
        svc.pointer("/spec/selector/rollouts-pod-template-hash")
            .and_then(Value::as_str)
            .map(str::to_string),
    )
}

/// A ReplicaSet's spec replicas and whether it carries a `scale-down-deadline`.
fn replicas_and_deadline(rs: &Value) -> Option<(i64, bool)> {
    Some((
        rs.pointer("/spec/replicas")?.as_i64()?,
        rs.pointer("/metadata/annotations/scale-down-deadline")
            .is_some(),
    ))
}

async fn stable_ping_pong(api: &Api<Rollout>, name: &str) -> Option<PingPongType> {
    api.get(name)
        .await
        .unwrap()
        .status?
        .canary?
        .stable_ping_pong
}

async fn stable_hash(api: &Api<Rollout>, name: &str) -> String {
    api.get(name)
        .await
        .unwrap()
        .status
        .unwrap()
        .stable_rs
        .unwrap()
}

async fn wait_action(ns: &TestNamespace, ingress: &str, expected: &str) {
    wait_for(&format!("{ingress} at {expected}"), TIMEOUT, || async {
        let got = root_action(&json_of(&ingresses(ns).get(ingress).await?));
        anyhow::ensure!(got.as_deref() == Some(expected), "{got:?}");
        Ok(())
    })
    .await
    .unwrap();
}

/// Waits until the ReplicaSet `name` has no replicas left (deadline included in the record).
async fn wait_scaled_down(ns: &TestNamespace, name: &str) {
    wait_for(&format!("{name} scaled down"), TIMEOUT, || async {
        let rs = json_of(&replica_sets_api(ns).get(name).await?);
        let got = replicas_and_deadline(&rs);
        anyhow::ensure!(got == Some((0, false)), "{got:?}");
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_ping_pong_services_swap_roles_at_each_promotion() {
    let (_env, ns, _controller) = setup("pingpong-alb").await;
    // Unchanged: two replicas, setWeight 25 then a 5 s pause, scaleDownDelaySeconds 2.
    ns.apply_yaml(&corpus_file(
        "test/e2e/functional/alb-pingpong-rollout.yaml",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "alb-canary";
    let ingress = "alb-canary-ingress";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;

    // First deploy: ping is the stable Service and has the stable pods; pong is untouched.
    let h1 = stable_hash(&api, name).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Ping));
    wait_for("ping on the stable pods", TIMEOUT, || async {
        let h = service_hash(&ns, "ping-service").await;
        anyhow::ensure!(h.as_deref() == Some(h1.as_str()), "{h:?}");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(service_hash(&ns, "pong-service").await, None);
    // Pong is the canary: 0, ping (stable) 100 (Argo's assertWeights(ping 100, pong 0)).
    let first = forward(&[("pong-service", 0), ("ping-service", 100)]);
    wait_action(&ns, ingress, &first).await;

    let action = Recorder::start(ingresses(&ns), ingress, root_action);
    let ping = Recorder::start(services_api(&ns), "ping-service", selected);
    let pong = Recorder::start(services_api(&ns), "pong-service", selected);
    let old = Recorder::start(
        replica_sets_api(&ns),
        &format!("{name}-{h1}"),
        replicas_and_deadline,
    );

    for r in [&ping, &pong] {
        started(r).await;
    }
    started(&action).await;
    started(&old).await;

    // Update 1: pong takes the new pods and the canary weight; promotion makes it stable.
    set_image(&api, name, "argoproj/rollouts-demo:blue").await;
    let h2 = wait_promoted(&api, name, &h1).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Pong));
    let promoted = forward(&[("ping-service", 0), ("pong-service", 100)]);
    wait_action(&ns, ingress, &promoted).await;
    assert_eq!(
        action.values().await,
        vec![
            first.clone(),
            forward(&[("pong-service", 25), ("ping-service", 75)]),
            forward(&[("pong-service", 100), ("ping-service", 0)]),
            promoted.clone(),
        ],
        "the ALB action over the first update"
    );
    assert_eq!(
        service_hash(&ns, "pong-service").await.as_deref(),
        Some(h2.as_str())
    );
    // The old stable ReplicaSet: kept for scaleDownDelaySeconds, then scaled to 0.
    wait_scaled_down(&ns, &format!("{name}-{h1}")).await;
    assert_eq!(old.values().await, vec![(2, false), (2, true), (0, false)]);
    wait_replicas(&ns, name, &[("argoproj/rollouts-demo:blue", 2)], TIMEOUT).await;

    // Update 2: ping takes the newest pods and becomes stable again.
    set_image(&api, name, "argoproj/rollouts-demo:green").await;
    let h3 = wait_promoted(&api, name, &h2).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Ping));
    wait_action(&ns, ingress, &first).await;
    assert_eq!(
        action.values().await[4..],
        [
            forward(&[("ping-service", 25), ("pong-service", 75)]),
            forward(&[("ping-service", 100), ("pong-service", 0)]),
            first.clone(),
        ],
        "the ALB action over the second update"
    );
    wait_scaled_down(&ns, &format!("{name}-{h2}")).await;
    wait_replicas(&ns, name, &[("argoproj/rollouts-demo:green", 2)], TIMEOUT).await;
    // Each Service's selector changed once: ping to the third pods, pong to the second; the
    // promotions themselves patched neither.
    assert_eq!(
        ping.values().await,
        vec![Some(h1.clone()), Some(h3.clone())]
    );
    assert_eq!(pong.values().await, vec![None, Some(h2.clone())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_ping_pong_weights_reach_every_ingress() {
    let (_env, ns, _controller) = setup("pingpong-multi").await;
    // Unchanged: two Ingresses, setWeight 25 then a 5 s pause.
    ns.apply_yaml(&corpus_file(
        "test/e2e/functional/alb-pingpong-multi-ingress-rollout.yaml",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "alb-canary-multi-ingress";
    let (ping, pong) = ("ping-multi-ingress-service", "pong-multi-ingress-service");
    let names = ["alb-canary-multi-ingress-1", "alb-canary-multi-ingress-2"];
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Ping));
    let first = forward(&[(pong, 0), (ping, 100)]);
    let mut recorders = Vec::new();
    for i in names {
        wait_action(&ns, i, &first).await;
        recorders.push(Recorder::start(ingresses(&ns), i, root_action));
    }
    for r in &recorders {
        started(r).await;
    }
    let h1 = stable_hash(&api, name).await;
    set_image(&api, name, "argoproj/rollouts-demo:blue").await;
    let h2 = wait_promoted(&api, name, &h1).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Pong));
    let promoted = forward(&[(ping, 0), (pong, 100)]);
    for (i, r) in names.iter().zip(&recorders) {
        wait_action(&ns, i, &promoted).await;
        assert_eq!(
            r.values().await,
            vec![
                first.clone(),
                forward(&[(pong, 25), (ping, 75)]),
                forward(&[(pong, 100), (ping, 0)]),
                promoted.clone(),
            ],
            "the ALB action of {i}"
        );
    }
    assert_eq!(service_hash(&ns, pong).await.as_deref(), Some(h2.as_str()));
    assert_eq!(service_hash(&ns, ping).await.as_deref(), Some(h1.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istio_ping_pong_hosts_take_turns_as_canary() {
    let (env, ns, _controller) = setup("pingpong-istio").await;
    install_router_crds(&env).await;
    // Unchanged: no canary or stable Service, ping and pong as the VirtualService's hosts;
    // setWeight 25 then a 5 s pause; one replica.
    ns.apply_yaml(&corpus_file(
        "test/e2e/istio/istio-host-split-ping-pong.yaml",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "istio-host-split";
    let vs = "istio-host-split-vsvc";
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let h1 = stable_hash(&api, name).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Ping));
    wait_for("ping on the stable pods", TIMEOUT, || async {
        let h = service_hash(&ns, "ping").await;
        anyhow::ensure!(h.as_deref() == Some(h1.as_str()), "{h:?}");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(service_hash(&ns, "pong").await, None);
    // (ping, pong) weights.
    wait_vs_weights(&ns, vs, ("ping", "pong"), (100, 0)).await;
    let recorder = Recorder::start(virtual_services(&ns), vs, |v| vs_weights(v, "ping", "pong"));
    let pong = Recorder::start(services_api(&ns), "pong", selected);
    started(&recorder).await;
    started(&pong).await;

    set_image(&api, name, "nginx:1.20-alpine").await;
    let h2 = wait_promoted(&api, name, &h1).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Pong));
    wait_vs_weights(&ns, vs, ("ping", "pong"), (0, 100)).await;
    assert_eq!(
        service_hash(&ns, "pong").await.as_deref(),
        Some(h2.as_str())
    );
    assert_eq!(
        service_hash(&ns, "ping").await.as_deref(),
        Some(h1.as_str())
    );

    set_image(&api, name, "nginx:1.21-alpine").await;
    let h3 = wait_promoted(&api, name, &h2).await;
    assert_eq!(stable_ping_pong(&api, name).await, Some(PingPongType::Ping));
    wait_vs_weights(&ns, vs, ("ping", "pong"), (100, 0)).await;
    assert_eq!(
        service_hash(&ns, "ping").await.as_deref(),
        Some(h3.as_str())
    );
    assert_eq!(
        service_hash(&ns, "pong").await.as_deref(),
        Some(h2.as_str())
    );
    // Pong is the canary at 25 then 100 and stays at 100 as the stable; then ping takes its
    // turn. Pong's selector moved once, before the first promotion.
    assert_eq!(
        recorder.values().await,
        vec![(100, 0), (75, 25), (0, 100), (25, 75), (100, 0)]
    );
    assert_eq!(pong.values().await, vec![None, Some(h2)]);
}
