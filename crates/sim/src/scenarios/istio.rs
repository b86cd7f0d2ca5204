//! A canary routed by an Istio VirtualService host split: the `canary` and `stable` Services
//! behind one http route of VirtualService `vs`. An image update walks the weights up; in
//! some seeds a user aborts it at a pause, in others a newer image supersedes it mid-way.
//! The second scenario scales the stable down as the canary takes traffic
//! (`dynamicStableScale`), so both sides of the split depend on the weights read back. In the
//! third the steps take the weight back down (50% then 20%): the canary may only shrink once
//! the router has taken the lower weight, which is where the scale-down floor decides (the
//! scenario that shows a floor regression as `routed-replicasets-keep-their-pods`). The
//! fourth aborts every update at 50% with Sluice's gradual abort: traffic steps back through
//! 20% to 0, two seconds each, and the canary must keep the pods of whatever weight the
//! VirtualService still gives it.

use serde_json::{Value, json};

use super::{Op, Scenario, Setup, Step, Wait, image, kubelet, rollout, step};
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;
use sluice_routers::kinds::RouterKind;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "istio-host-split",
            about: "Istio VirtualService host split: update, abort at a pause or supersede",
            build: host_split,
        },
        Scenario {
            name: "istio-host-split-dynamic-stable-scale",
            about: "the Istio host split with dynamicStableScale: the stable shrinks as the canary takes traffic",
            build: host_split_dynamic,
        },
        Scenario {
            name: "istio-weight-steps-down",
            about: "the Istio host split with steps that lower the weight: 20%, 50%, then 20% again",
            build: weight_steps_down,
        },
        Scenario {
            name: "istio-gradual-abort",
            about: "the Istio host split aborted at 50% with a gradual abort: 50, 20, 0, two seconds each",
            build: gradual_abort,
        },
    ]
}

/// The canary's steps: two weights, each held for ten seconds.
fn steps() -> Value {
    json!([
        {"setWeight": 20}, {"pause": {"duration": "10s"}},
        {"setWeight": 50}, {"pause": {"duration": "10s"}}
    ])
}

/// [`steps`], then back down to 20%.
fn steps_down() -> Value {
    json!([
        {"setWeight": 20}, {"pause": {"duration": "10s"}},
        {"setWeight": 50}, {"pause": {"duration": "10s"}},
        {"setWeight": 20}, {"pause": {"duration": "10s"}}
    ])
}

fn service(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": "demo"}, "ports": [{"port": 80}]}
    })
}

/// VirtualService `vs`: all traffic to `stable`, none to `canary`, on route `primary`.
fn virtual_service() -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "VirtualService",
        "metadata": {"name": "vs", "namespace": "default"},
        "spec": {
            "hosts": ["demo"],
            "http": [{
                "name": "primary",
                "route": [
                    {"destination": {"host": "stable"}, "weight": 100},
                    {"destination": {"host": "canary"}, "weight": 0}
                ]
            }]
        }
    })
}

fn host_split(seed: u64, rng: &mut Rng) -> Setup {
    build(seed, rng, steps(), false)
}

fn host_split_dynamic(seed: u64, rng: &mut Rng) -> Setup {
    build(seed, rng, steps(), true)
}

fn weight_steps_down(seed: u64, rng: &mut Rng) -> Setup {
    build(seed, rng, steps_down(), false)
}

fn gradual_abort(seed: u64, rng: &mut Rng) -> Setup {
    let mut setup = build(seed, rng, steps(), false);
    setup.rollout["metadata"]["annotations"] = json!({"rollouts.sluice.dev/gradual-abort": "2s"});
    // Always an abort, at the pause after 50%.
    setup.script.truncate(1);
    setup
        .script
        .push(step(Wait::CanaryStep(3), (0, 3_000), Op::Abort));
    setup.expect = expect("Degraded", "v1");
    setup
}

fn build(seed: u64, rng: &mut Rng, steps: Value, dynamic_stable_scale: bool) -> Setup {
    // The replica count cycles with the seed, so that every batch meets the rounding of 20%
    // and 50% at 1 to 5 pods.
    let replicas = 1 + (seed % 5) as i32;
    let mut ro = rollout(replicas, json!([]));
    ro["spec"]["strategy"]["canary"] = json!({
        "canaryService": "canary",
        "stableService": "stable",
        "trafficRouting": {"istio": {"virtualService": {"name": "vs", "routes": ["primary"]}}},
        "steps": steps,
    });
    if dynamic_stable_scale {
        ro["spec"]["strategy"]["canary"]["dynamicStableScale"] = json!(true);
    }
    let (controllers, leases) = if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    };
    let mut script: Vec<Step> = vec![step(
        Wait::Phase("Healthy"),
        (0, 5_000),
        Op::SetImage(image("v2")),
    )];
    let expect = if rng.chance(0.4) {
        // At the pause after 20% or after 50%, well within its ten seconds: the update is
        // still under way when the abort lands.
        let at = if rng.chance(0.5) { 1 } else { 3 };
        script.push(step(Wait::CanaryStep(at), (0, 3_000), Op::Abort));
        expect("Degraded", "v1")
    } else if rng.chance(0.5) {
        let at = rng.range((1, 3)) as i32;
        script.push(step(
            Wait::CanaryStep(at),
            (0, 8_000),
            Op::SetImage(image("v3")),
        ));
        expect("Healthy", "v3")
    } else {
        expect("Healthy", "v2")
    };
    Setup {
        rollout: ro,
        objects: vec![
            (Kind::Service, service("canary")),
            (Kind::Service, service("stable")),
            (Kind::Router(RouterKind::VirtualService), virtual_service()),
        ],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: Default::default(),
        script,
        notifications: None,
        expect,
    }
}

fn expect(phase: &'static str, tag: &str) -> Expect {
    Expect {
        phase,
        stable_image: image(tag),
        analysis_runs: None,
    }
}
