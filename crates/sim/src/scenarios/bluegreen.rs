//! Blue-green with `progressDeadlineAbort`: bad, good, bad again. Argo's original let the
//! aborted first bad revision keep its `scale-down-deadline`, and that stale deadline then
//! suppressed the progress deadline of the second bad revision, which never aborted (#3988).

use serde_json::{Value, json};

use super::{Op, Scenario, Setup, Wait, image, kubelet, rollout, step};
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::rng::Rng;

pub fn scenario() -> Scenario {
    Scenario {
        name: "bluegreen-bad-good-bad",
        about: "blue-green: bad revision aborted, good, bad again must abort too (#3988)",
        build,
    }
}

fn service(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": "demo"}, "ports": [{"port": 80}]}
    })
}

fn build(_seed: u64, rng: &mut Rng) -> Setup {
    let mut ro = rollout(rng.range((1, 4)) as i32, json!([]));
    ro["spec"]["strategy"] = json!({"blueGreen": {
        "activeService": "demo-active",
        "previewService": "demo-preview",
        "scaleDownDelaySeconds": rng.range((0, 30)),
    }});
    ro["spec"]["progressDeadlineAbort"] = json!(true);
    let (controllers, leases) = if rng.chance(0.5) {
        (2, true)
    } else {
        (1, false)
    };
    Setup {
        rollout: ro,
        objects: vec![
            (Kind::Service, service("demo-active")),
            (Kind::Service, service("demo-preview")),
        ],
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &["bad1", "bad2"]),
        analysis: Default::default(),
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("bad1")),
            ),
            step(
                Wait::Phase("Degraded"),
                (0, 5_000),
                Op::SetImage(image("v3")),
            ),
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("bad2")),
            ),
        ],
        notifications: None,
        expect: Expect {
            phase: "Degraded",
            stable_image: image("v3"),
            analysis_runs: None,
        },
    }
}
