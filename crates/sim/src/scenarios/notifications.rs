//! Notifications under faults: the leader sends what Argo's default catalog defines for the
//! events of its reconciles, through the recording service, while sends fail, writes meet
//! conflicts, replies are lost, watches lag and leaders crash or change. The checks hold the
//! deliveries to "at most once, and at least once after the faults stop".

use std::collections::BTreeMap;

use serde_json::json;
use sluice_api::common::AnalysisPhase;

use super::analysis;
use super::{Op, Scenario, Setup, Target, Wait, image, kubelet, rollout, step};
use crate::api_model::Kind;
use crate::faults::Faults;
use crate::invariants::Expect;
use crate::notifications::Notify;
use crate::rng::Rng;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "notify-canary-pause",
            about: "a canary paused until promoted, then completed, notifying on every step; the leader crashes mid-way",
            build: canary_pause,
        },
        Scenario {
            name: "notify-failed-analysis",
            about: "background analysis fails mid-canary: the abort and the failed run are notified",
            build: failed_analysis,
        },
    ]
}

/// Argo's default catalog, with two webhook services standing for a chat and a hook (the
/// recording service receives whatever they would), and sends that fail up to a third of the
/// time while the faults last.
fn notify(rng: &mut Rng) -> Notify {
    let mut data = sluice_notifications::catalog::data();
    data.insert(
        "service.webhook.hook".into(),
        "url: http://hook.example/notify\n".into(),
    );
    data.insert(
        "service.webhook.chat".into(),
        "url: http://chat.example/post\n".into(),
    );
    Notify {
        data,
        send_failure: [0.0, 0.1, 0.3][rng.below(3) as usize],
    }
}

/// Subscribes the Rollout to `triggers`, each to both services (two recipients on the chat).
fn subscribe(ro: &mut serde_json::Value, triggers: &[&str]) {
    let mut annotations: BTreeMap<String, String> =
        serde_json::from_value(ro["metadata"]["annotations"].clone()).unwrap_or_default();
    for trigger in triggers {
        annotations.insert(
            format!("notifications.argoproj.io/subscribe.{trigger}.hook"),
            "ops".to_string(),
        );
        annotations.insert(
            format!("notifications.argoproj.io/subscribe.{trigger}.chat"),
            "releases;oncall".to_string(),
        );
    }
    ro["metadata"]["annotations"] = json!(annotations);
}

fn canary_pause(_seed: u64, rng: &mut Rng) -> Setup {
    let steps = json!([
        {"setWeight": 25}, {"pause": {}},
        {"setWeight": 50}, {"pause": {"duration": "10s"}},
        {"setWeight": 75}
    ]);
    let mut ro = rollout(rng.range((1, 4)) as i32, steps);
    subscribe(
        &mut ro,
        &[
            "on-rollout-updated",
            "on-rollout-step-completed",
            "on-rollout-paused",
            "on-rollout-completed",
        ],
    );
    let (controllers, leases) = if rng.chance(0.7) {
        (2, true)
    } else {
        (1, false)
    };
    let crash_at = rng.range((2, 5)) as i32;
    Setup {
        rollout: ro,
        objects: Vec::new(),
        controllers,
        leases,
        faults: Faults::swarm(rng),
        kubelet: kubelet(rng, &[]),
        analysis: Default::default(),
        script: vec![
            step(
                Wait::Phase("Healthy"),
                (0, 5_000),
                Op::SetImage(image("v2")),
            ),
            step(Wait::Paused("CanaryPauseStep"), (0, 8_000), Op::Promote),
            // Any millisecond: often between a send and its record.
            step(
                Wait::CanaryStep(crash_at),
                (0, 3_000),
                Op::Crash(Target::Leader),
            ),
        ],
        notifications: Some(notify(rng)),
        expect: Expect {
            phase: "Healthy",
            stable_image: image("v2"),
            analysis_runs: None,
        },
    }
}

fn failed_analysis(_seed: u64, rng: &mut Rng) -> Setup {
    let (mut ro, controllers, leases, faults, measured) =
        analysis::setup(rng, AnalysisPhase::Failed);
    subscribe(
        &mut ro,
        &[
            "on-rollout-updated",
            "on-rollout-step-completed",
            "on-rollout-aborted",
            "on-analysis-run-failed",
        ],
    );
    Setup {
        rollout: ro,
        objects: vec![(Kind::AnalysisTemplate, analysis::template(None))],
        controllers,
        leases,
        faults,
        kubelet: kubelet(rng, &[]),
        analysis: measured,
        script: vec![step(
            Wait::Phase("Healthy"),
            (0, 5_000),
            Op::SetImage(image("v2")),
        )],
        notifications: Some(notify(rng)),
        expect: Expect {
            phase: "Degraded",
            stable_image: image("v1"),
            analysis_runs: Some(1),
        },
    }
}
