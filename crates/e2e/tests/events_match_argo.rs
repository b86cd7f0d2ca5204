//! The events a Rollout's life produces, in order, are the ones Argo Rollouts' own end-to-end
//! suite expects (its TestRolloutAbortRetryPromote): first deploy, update, pause, abort,
//! retry, timed pause, completion; and events with different messages are never folded into
//! one (kubectl describe and notifications read them).

use std::time::Duration;

use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::wait_for;
use sluice_e2e::*;

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

    // Argo's expectation, reason by reason.
    let expected = [
        "RolloutAddedToInformer",
        "RolloutNotCompleted",
        "RolloutUpdated",
        "NewReplicaSetCreated",
        "ScalingReplicaSet",
        "RolloutCompleted",
        "RolloutNotCompleted",
        "RolloutUpdated",
        "NewReplicaSetCreated",
        "ScalingReplicaSet",
        "RolloutStepCompleted",
        "RolloutPaused",
        "ScalingReplicaSet",
        "RolloutAborted",
        "ScalingReplicaSet",
        "RolloutStepCompleted",
        "RolloutPaused",
        "RolloutStepCompleted",
        "RolloutResumed",
        "ScalingReplicaSet",
        "RolloutCompleted",
    ];
    let events = wait_for("the completion event", Duration::from_secs(30), || async {
        let events = rollout_events(&ns, "web").await;
        let completed = events
            .iter()
            .filter(|(reason, _)| reason == "RolloutCompleted")
            .count();
        anyhow::ensure!(completed == 2, "{events:#?}");
        Ok(events)
    })
    .await
    .unwrap();
    let reasons: Vec<&str> = events.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(reasons, expected, "{events:#?}");

    // Messages as Argo writes them, each its own event.
    let messages: Vec<&str> = events.iter().map(|(_, m)| m.as_str()).collect();
    let ns_name = ns.name();
    assert_eq!(
        messages[0],
        format!("Rollout resource added to informer: {ns_name}/web")
    );
    assert!(
        messages[1].starts_with("Rollout not completed, started update to revision 1 ("),
        "{}",
        messages[1]
    );
    assert_eq!(messages[2], "Rollout updated to revision 1");
    assert!(
        messages[3].starts_with("Created ReplicaSet web-")
            && messages[3].ends_with(" (revision 1)"),
        "{}",
        messages[3]
    );
    assert!(
        messages[5].ends_with("): Initial deploy"),
        "{}",
        messages[5]
    );
    assert_eq!(messages[7], "Rollout updated to revision 2");
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
