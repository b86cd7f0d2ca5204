//! The events a Rollout's life produces are Argo Rollouts' own, in Argo's order and number, as
//! (type, reason): the ones its end-to-end suite expects (TestRolloutAbortRetryPromote: first
//! deploy, update, pause, abort, retry, timed pause, completion; TestBlueGreenUpdate), and those
//! its source emits for a first deploy and an image update of a canary with steps, a plain
//! canary, a canary of four replicas and a blue-green Rollout with a preview Service. Each of
//! these four scenarios also runs under Argo Rollouts 1.9.1's own controller (`argo_*`), which
//! must produce the very same list. Events with different messages are never folded into one
//! (kubectl describe and notifications read them).

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{ArgoController, TestEnv, TestNamespace, wait_for};
use sluice_e2e::*;

const NORMAL: &str = "Normal";

/// When an event was first recorded, from its name: both Argo (client-go) and Sluice name an
/// event `<object>.<hex nanoseconds>` (core/v1 events have no sub-second time of their own).
fn recorded_at(e: &Event) -> i128 {
    let name = e.metadata.name.as_deref().unwrap_or_default();
    let hex = name.rsplit_once('.').map_or("", |(_, h)| h);
    i128::from_str_radix(hex, 16).unwrap_or(0)
}

/// The events recorded for a Rollout, oldest first, as (type, reason, message); a repeat of an
/// identical event (a series) is listed again at its last time.
async fn events_of(ns: &TestNamespace, rollout: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = ns.api();
    let mut occurrences = Vec::new();
    for e in api
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
    {
        let about_it = e.regarding.as_ref().is_some_and(|r| {
            r.kind.as_deref() == Some("Rollout") && r.name.as_deref() == Some(rollout)
        });
        if !about_it {
            continue;
        }
        let what = (
            e.type_.clone().unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            e.note.clone().unwrap_or_default(),
        );
        let first = recorded_at(&e);
        occurrences.push((first, what.clone()));
        if let Some(series) = &e.series {
            let last = series.last_observed_time.0.as_nanosecond();
            occurrences.push((last.max(first + 1), what));
        }
    }
    occurrences.sort_by_key(|(at, _)| *at);
    occurrences.into_iter().map(|(_, what)| what).collect()
}

fn type_and_reason(events: &[(String, String, String)]) -> Vec<(&str, &str)> {
    events
        .iter()
        .map(|(t, r, _)| (t.as_str(), r.as_str()))
        .collect()
}

fn normal<'a>(reasons: &[&'a str]) -> Vec<(&'static str, &'a str)> {
    reasons.iter().map(|r| (NORMAL, *r)).collect()
}

/// Waits until the Rollout has at least `n` events, then until no new one came for 3 s, and
/// returns them all.
async fn settled_events(
    ns: &TestNamespace,
    rollout: &str,
    n: usize,
) -> Vec<(String, String, String)> {
    let events = wait_for("the events", Duration::from_secs(60), || async {
        let events = events_of(ns, rollout).await;
        anyhow::ensure!(events.len() >= n, "{events:#?}");
        Ok(events)
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = events_of(ns, rollout).await;
    assert_eq!(after.len(), events.len(), "more events came: {after:#?}");
    after
}

/// The events of a canary's first deploy, as Argo's source emits them: the Rollout's revision
/// and the ReplicaSet created at 0, the first status reset (its step hash is new:
/// `RolloutNotCompleted`), the scale-up, the promotion.
const CANARY_FIRST_DEPLOY: [&str; 6] = [
    "RolloutAddedToInformer",
    "RolloutUpdated",
    "NewReplicaSetCreated",
    "RolloutNotCompleted",
    "ScalingReplicaSet",
    "RolloutCompleted",
];

/// The announcement of an image update: revision, creation, then the Completed condition
/// turning False; then the scale-up.
const UPDATE_STARTS: [&str; 4] = [
    "RolloutUpdated",
    "NewReplicaSetCreated",
    "RolloutNotCompleted",
    "ScalingReplicaSet",
];

#[tokio::test]
async fn abort_retry_promote_emits_argos_events_in_order() {
    let (_env, ns, _controller) = setup("events").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        1,
        "example.invalid/web:1",
        json!([{"setWeight": 50}, {"pause": {"duration": "3s"}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;

    set_image(&api, "web", "example.invalid/web:2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    abort(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Degraded, TIMEOUT).await;
    retry(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;

    // Argo's expectation (its TestRolloutAbortRetryPromote), reason by reason.
    let expected = [
        (NORMAL, "RolloutAddedToInformer"),
        (NORMAL, "RolloutUpdated"),
        (NORMAL, "NewReplicaSetCreated"),
        (NORMAL, "RolloutNotCompleted"),
        (NORMAL, "ScalingReplicaSet"),
        (NORMAL, "RolloutCompleted"),
        (NORMAL, "RolloutUpdated"),
        (NORMAL, "NewReplicaSetCreated"),
        (NORMAL, "RolloutNotCompleted"),
        (NORMAL, "ScalingReplicaSet"),
        (NORMAL, "RolloutStepCompleted"),
        (NORMAL, "RolloutPaused"),
        (NORMAL, "ScalingReplicaSet"),
        ("Warning", "RolloutAborted"),
        (NORMAL, "ScalingReplicaSet"),
        (NORMAL, "RolloutStepCompleted"),
        (NORMAL, "RolloutPaused"),
        (NORMAL, "RolloutStepCompleted"),
        (NORMAL, "RolloutResumed"),
        (NORMAL, "ScalingReplicaSet"),
        (NORMAL, "RolloutCompleted"),
    ];
    let events = settled_events(&ns, "web", expected.len()).await;
    assert_eq!(type_and_reason(&events), expected, "{events:#?}");

    // Messages as Argo writes them, each its own event.
    let messages: Vec<&str> = events.iter().map(|(_, _, m)| m.as_str()).collect();
    let ns_name = ns.name();
    assert_eq!(
        messages[0],
        format!("Rollout resource added to informer: {ns_name}/web")
    );
    assert_eq!(messages[1], "Rollout updated to revision 1");
    assert!(
        messages[2].starts_with("Created ReplicaSet web-")
            && messages[2].ends_with(" (revision 1)"),
        "{}",
        messages[2]
    );
    assert!(
        messages[3].starts_with("Rollout not completed, started update to revision 1 ("),
        "{}",
        messages[3]
    );
    assert!(
        messages[5].ends_with("): Initial deploy"),
        "{}",
        messages[5]
    );
    assert_eq!(messages[6], "Rollout updated to revision 2");
    assert!(
        messages[8].starts_with("Rollout not completed, started update to revision 2 ("),
        "{}",
        messages[8]
    );
    assert_eq!(messages[10], "Rollout step 1/2 completed (setWeight: 50)");
    assert_eq!(messages[11], "Rollout is paused (CanaryPauseStep)");
    assert_eq!(messages[13], "Rollout aborted update to revision 2");
    assert_eq!(messages[17], "Rollout step 2/2 completed (pause: 3s)");
    assert_eq!(messages[18], "Rollout is resumed");
    assert!(
        messages[20].ends_with("): Completed all 2 canary steps"),
        "{}",
        messages[20]
    );
}

#[tokio::test]
async fn a_canary_with_steps_first_deploy_and_update_emit_argos_events() {
    let (_env, ns, _controller) = setup("events-steps").await;
    a_canary_with_steps_first_deploy_and_update_emit_argos_events_scenario(&ns).await;
}

#[tokio::test]
async fn argo_a_canary_with_steps_first_deploy_and_update_emit_argos_events() {
    let (_env, ns, _argo) = under_argo("events-steps-argo").await;
    a_canary_with_steps_first_deploy_and_update_emit_argos_events_scenario(&ns).await;
}

async fn a_canary_with_steps_first_deploy_and_update_emit_argos_events_scenario(
    ns: &TestNamespace,
) {
    let api = rollouts(ns);
    ns.apply_yaml(&canary_rollout(
        "steps",
        1,
        "example.invalid/steps:1",
        json!([{"setWeight": 50}, {"pause": {"duration": "2s"}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "steps", RolloutPhase::Healthy, TIMEOUT).await;
    let first = settled_events(ns, "steps", CANARY_FIRST_DEPLOY.len()).await;
    assert_eq!(
        type_and_reason(&first),
        normal(&CANARY_FIRST_DEPLOY),
        "{first:#?}"
    );

    set_image(&api, "steps", "example.invalid/steps:2").await;
    wait_phase(&api, "steps", RolloutPhase::Paused, TIMEOUT).await;
    wait_phase(&api, "steps", RolloutPhase::Healthy, TIMEOUT).await;
    let update_reasons: Vec<&str> = UPDATE_STARTS
        .iter()
        .copied()
        .chain([
            "RolloutStepCompleted",
            "RolloutPaused",
            "RolloutStepCompleted",
            "RolloutResumed",
            "ScalingReplicaSet",
            "RolloutCompleted",
        ])
        .collect();
    let all = settled_events(ns, "steps", first.len() + update_reasons.len()).await;
    let update = &all[first.len()..];
    assert_eq!(
        type_and_reason(update),
        normal(&update_reasons),
        "{update:#?}"
    );
    assert!(
        update[9].2.ends_with("): Completed all 2 canary steps"),
        "{update:#?}"
    );
}

#[tokio::test]
async fn a_plain_canary_first_deploy_and_update_emit_argos_events() {
    let (_env, ns, _controller) = setup("events-plain").await;
    a_plain_canary_first_deploy_and_update_emit_argos_events_scenario(&ns).await;
}

#[tokio::test]
async fn argo_a_plain_canary_first_deploy_and_update_emit_argos_events() {
    let (_env, ns, _argo) = under_argo("events-plain-argo").await;
    a_plain_canary_first_deploy_and_update_emit_argos_events_scenario(&ns).await;
}

async fn a_plain_canary_first_deploy_and_update_emit_argos_events_scenario(ns: &TestNamespace) {
    let api = rollouts(ns);
    ns.apply_yaml(&canary_rollout(
        "plain",
        1,
        "example.invalid/plain:1",
        json!([]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "plain", RolloutPhase::Healthy, TIMEOUT).await;
    let first = settled_events(ns, "plain", CANARY_FIRST_DEPLOY.len()).await;
    assert_eq!(
        type_and_reason(&first),
        normal(&CANARY_FIRST_DEPLOY),
        "{first:#?}"
    );

    set_image(&api, "plain", "example.invalid/plain:2").await;
    let before = first.len();
    wait_for("the update to complete", TIMEOUT, || async {
        let events = events_of(ns, "plain").await;
        anyhow::ensure!(
            events[before..]
                .iter()
                .any(|(_, r, _)| r == "RolloutCompleted"),
            "{events:#?}"
        );
        Ok(())
    })
    .await
    .unwrap();
    wait_phase(&api, "plain", RolloutPhase::Healthy, TIMEOUT).await;
    let update_reasons: Vec<&str> = UPDATE_STARTS
        .iter()
        .copied()
        .chain(["ScalingReplicaSet", "RolloutCompleted"])
        .collect();
    let all = settled_events(ns, "plain", before + update_reasons.len()).await;
    let update = &all[before..];
    // Six events per update, as Argo's source emits them: the new ReplicaSet scaled up, the
    // stable one down, then the promotion.
    assert_eq!(
        type_and_reason(update),
        normal(&update_reasons),
        "{update:#?}"
    );
    assert!(
        update[3].2.ends_with(" from 0 to 1") && update[4].2.ends_with(" from 1 to 0"),
        "{update:#?}"
    );
    assert!(
        update[5].2.ends_with("): Completed all 0 canary steps"),
        "{update:#?}"
    );
}

#[tokio::test]
async fn a_blue_green_first_deploy_and_update_emit_argos_events() {
    let (_env, ns, _controller) = setup("events-bg").await;
    a_blue_green_first_deploy_and_update_emit_argos_events_scenario(&ns).await;
}

#[tokio::test]
async fn argo_a_blue_green_first_deploy_and_update_emit_argos_events() {
    let (_env, ns, _argo) = under_argo("events-bg-argo").await;
    a_blue_green_first_deploy_and_update_emit_argos_events_scenario(&ns).await;
}

async fn a_blue_green_first_deploy_and_update_emit_argos_events_scenario(ns: &TestNamespace) {
    let api = rollouts(ns);
    apply_blue_green(
        ns,
        "bg",
        1,
        "example.invalid/bg:1",
        json!({"scaleDownDelaySeconds": 3}),
    )
    .await;
    wait_phase(&api, "bg", RolloutPhase::Healthy, TIMEOUT).await;
    // No RolloutNotCompleted: Argo's first status of a blue-green Rollout makes the new pods
    // stable. The preview Service follows the new ReplicaSet as soon as it is created, the
    // active one once its pods are available.
    let first_reasons = [
        "RolloutAddedToInformer",
        "RolloutUpdated",
        "NewReplicaSetCreated",
        "SwitchService",
        "ScalingReplicaSet",
        "RolloutCompleted",
        "SwitchService",
    ];
    let first = settled_events(ns, "bg", first_reasons.len()).await;
    assert_eq!(
        type_and_reason(&first),
        normal(&first_reasons),
        "{first:#?}"
    );
    assert!(first[3].2.contains("'bg-preview' from ''"), "{first:#?}");
    assert!(first[6].2.contains("'bg-active' from ''"), "{first:#?}");
    assert!(first[5].2.ends_with("): Initial deploy"), "{first:#?}");

    set_image(&api, "bg", "example.invalid/bg:2").await;
    let update_reasons = [
        "RolloutUpdated",
        "NewReplicaSetCreated",
        "SwitchService",
        "RolloutNotCompleted",
        "ScalingReplicaSet",
        "SwitchService",
        "RolloutCompleted",
        "ScalingReplicaSet",
    ];
    wait_for("the old pods scaled down", TIMEOUT, || async {
        let events = events_of(ns, "bg").await;
        anyhow::ensure!(
            events.len() >= first.len() + update_reasons.len(),
            "{events:#?}"
        );
        Ok(())
    })
    .await
    .unwrap();
    let all = settled_events(ns, "bg", first.len() + update_reasons.len()).await;
    let update = &all[first.len()..];
    assert_eq!(
        type_and_reason(update),
        normal(&update_reasons),
        "{update:#?}"
    );
    assert!(update[2].2.contains("'bg-preview'"), "{update:#?}");
    assert!(update[5].2.contains("'bg-active'"), "{update:#?}");
    assert!(
        update[6].2.ends_with("): Completed blue-green update"),
        "{update:#?}"
    );
    assert!(update[7].2.ends_with(" from 1 to 0"), "{update:#?}");
}

#[tokio::test]
async fn a_canary_of_four_emits_argos_scaling_events_one_replica_set_at_a_time() {
    let (_env, ns, _controller) = setup("events-four").await;
    a_canary_of_four_emits_argos_scaling_events_one_replica_set_at_a_time_scenario(&ns).await;
}

#[tokio::test]
async fn argo_a_canary_of_four_emits_argos_scaling_events_one_replica_set_at_a_time() {
    let (_env, ns, _argo) = under_argo("events-four-argo").await;
    a_canary_of_four_emits_argos_scaling_events_one_replica_set_at_a_time_scenario(&ns).await;
}

async fn a_canary_of_four_emits_argos_scaling_events_one_replica_set_at_a_time_scenario(
    ns: &TestNamespace,
) {
    let api = rollouts(ns);
    ns.apply_yaml(&canary_rollout(
        "four",
        4,
        "example.invalid/four:1",
        // One pause: a second one would repeat its identical events, which Argo's recorder
        // folds into the first (core/v1 count, kept to the second) and Sluice into a series.
        json!([{"setWeight": 25}, {"pause": {"duration": "2s"}}, {"setWeight": 75}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "four", RolloutPhase::Healthy, TIMEOUT).await;
    let first = settled_events(ns, "four", CANARY_FIRST_DEPLOY.len()).await;
    assert_eq!(
        type_and_reason(&first),
        normal(&CANARY_FIRST_DEPLOY),
        "{first:#?}"
    );

    set_image(&api, "four", "example.invalid/four:2").await;
    let before = first.len();
    wait_for("the update to complete", TIMEOUT, || async {
        let events = events_of(ns, "four").await;
        anyhow::ensure!(
            events[before..]
                .iter()
                .any(|(_, r, _)| r == "RolloutCompleted"),
            "{events:#?}"
        );
        Ok(())
    })
    .await
    .unwrap();
    // Argo sizes the stable ReplicaSet first and the new one in a later pass (its replica
    // arithmetic for 4 replicas, maxSurge and maxUnavailable 1).
    let update_reasons = [
        "RolloutUpdated",
        "NewReplicaSetCreated",
        "RolloutNotCompleted",
        "ScalingReplicaSet",
        "ScalingReplicaSet",
        "RolloutStepCompleted",
        "RolloutPaused",
        "RolloutStepCompleted",
        "RolloutResumed",
        "ScalingReplicaSet",
        "ScalingReplicaSet",
        "ScalingReplicaSet",
        "RolloutStepCompleted",
        "ScalingReplicaSet",
        "ScalingReplicaSet",
        "RolloutCompleted",
    ];
    let all = settled_events(ns, "four", before + update_reasons.len()).await;
    let update = &all[before..];
    assert_eq!(
        type_and_reason(update),
        normal(&update_reasons),
        "{update:#?}"
    );
    let ro = api.get("four").await.unwrap();
    let status = ro.status.unwrap();
    let new = format!("four-{}", status.current_pod_hash.unwrap());
    let created = update[1].2.replace("Created ReplicaSet ", "");
    assert_eq!(created, format!("{new} (revision 2)"), "{update:#?}");
    let stable_rs = first[2]
        .2
        .replace("Created ReplicaSet ", "")
        .replace(" (revision 1)", "");
    let scaling: Vec<String> = update
        .iter()
        .filter(|(_, r, _)| r == "ScalingReplicaSet")
        .map(|(_, _, m)| m.replace(&stable_rs, "v1").replace(&new, "v2"))
        .collect();
    assert_eq!(
        scaling,
        [
            "Scaled down ReplicaSet v1 (revision 1) from 4 to 3",
            "Scaled up ReplicaSet v2 (revision 2) from 0 to 1",
            "Scaled down ReplicaSet v1 (revision 1) from 3 to 2",
            "Scaled up ReplicaSet v2 (revision 2) from 1 to 3",
            "Scaled down ReplicaSet v1 (revision 1) from 2 to 1",
            "Scaled down ReplicaSet v1 (revision 1) from 1 to 0",
            "Scaled up ReplicaSet v2 (revision 2) from 3 to 4",
        ]
    );
}

/// A test namespace watched by Argo Rollouts 1.9.1's own controller (built once, cached).
async fn under_argo(prefix: &str) -> (TestEnv, TestNamespace, ArgoController) {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let ns = TestNamespace::create(&env, prefix)
        .await
        .expect("test namespace");
    let argo = ArgoController::start(&env, ns.name(), &[])
        .await
        .expect("Argo Rollouts' controller");
    (env, ns, argo)
}

#[tokio::test]
async fn going_back_to_the_stable_template_while_paused_emits_argos_events() {
    let (_env, ns, _controller) = setup("events-undo").await;
    undo_scenario(&ns).await;
}

#[tokio::test]
async fn argo_going_back_to_the_stable_template_while_paused_emits_argos_events() {
    let (_env, ns, _argo) = under_argo("events-undo-argo").await;
    undo_scenario(&ns).await;
}

async fn undo_scenario(ns: &TestNamespace) {
    let api = rollouts(ns);
    ns.apply_yaml(&canary_rollout(
        "undo",
        1,
        "example.invalid/undo:1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "undo", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "undo", "example.invalid/undo:2").await;
    wait_phase(&api, "undo", RolloutPhase::Paused, TIMEOUT).await;
    let before = CANARY_FIRST_DEPLOY.len() + UPDATE_STARTS.len() + 2;
    let paused = settled_events(ns, "undo", before).await;
    assert_eq!(paused.len(), before, "{paused:#?}");

    // Back to the stable template: the revision is recorded, the reset status says the steps
    // are skipped and the pause is over, then the update's pod goes.
    set_image(&api, "undo", "example.invalid/undo:1").await;
    wait_phase(&api, "undo", RolloutPhase::Healthy, TIMEOUT).await;
    let undo_reasons = [
        "RolloutUpdated",
        "SkipSteps",
        "RolloutResumed",
        "ScalingReplicaSet",
    ];
    let all = settled_events(ns, "undo", before + undo_reasons.len()).await;
    let undo = &all[before..];
    assert_eq!(type_and_reason(undo), normal(&undo_reasons), "{undo:#?}");
    assert_eq!(undo[0].2, "Rollout updated to revision 3", "{undo:#?}");
    assert_eq!(undo[1].2, "Rollback to stable ReplicaSets", "{undo:#?}");
    assert!(undo[3].2.ends_with(" from 1 to 0"), "{undo:#?}");
}
