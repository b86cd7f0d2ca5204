//! The step machine on partitions: adoption, the walk through the steps, promotion, pause,
//! abort and rollback, and what cannot be driven.

use super::*;

#[test]
fn partition_leaves_the_weight_of_the_pods_above_it() {
    for (replicas, weight, partition) in [
        (5, 20, 4),
        (5, 50, 2),
        (5, 100, 0),
        (5, 0, 5),
        (4, 25, 3),
        (4, 50, 2),
        (3, 1, 2),
        (0, 50, 0),
        (4, 250, 0),
        (4, -5, 4),
    ] {
        assert_eq!(
            partition_for(replicas, weight),
            partition,
            "{replicas} at {weight}%"
        );
    }
    assert_eq!(revision_hash("db", "db-7c9f"), "7c9f");
    assert_eq!(revision_hash("db", "other"), "other");
}

#[test]
fn first_adoption_makes_the_current_revision_stable_and_closes_the_partition() {
    let ro = rollout(steps(), None);
    let plan = decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0));
    let s = &plan.status;
    assert_eq!(s.stable_rs.as_deref(), Some("a"));
    assert_eq!(s.current_pod_hash.as_deref(), Some("a"));
    assert_eq!(s.current_step_index, Some(4));
    assert_eq!(s.phase, Some(RolloutPhase::Healthy));
    assert_eq!(s.selector.as_deref(), Some("app=db"));
    assert_eq!(written_partition(&plan), Some(4));
    // Written with the resourceVersion read, without the status.
    let object = written(&plan).unwrap();
    assert_eq!(object["metadata"]["resourceVersion"], "7");
    assert!(object.get("status").is_none());
    assert_eq!(
        plan.events[0].message,
        "Rollout completed update to revision 1 (a): Initial deploy"
    );
    // Nothing more to do once it is closed.
    let plan = decide(&next(&ro, &plan), Some(sts(Some(4), "a", "a", 4, 4)), at(1));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
}

/// A Rollout that has adopted revision `a` and is Healthy.
fn healthy() -> Rollout {
    let ro = rollout(steps(), None);
    let plan = decide(&ro, Some(sts(None, "a", "a", 4, 4)), at(0));
    next(&ro, &plan)
}

#[test]
fn a_canary_walks_its_partitions_through_the_steps() {
    let ro = healthy();
    // The template changed: revision b, nothing updated yet (partition 4).
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("b"));
    assert_eq!(plan.status.current_step_index, Some(0));
    assert_eq!(written_partition(&plan), Some(3), "setWeight 25 of 4 pods");
    assert!(reasons(&plan).contains(&"RolloutUpdated"));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Progressing));
    let ro = next(&ro, &plan);

    // Partition 3 set, ordinal 3 not yet replaced: the step waits, and looks again soon.
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 0, 3)), at(11));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.current_step_index, Some(0));
    assert_eq!(plan.requeue_after, Some(POD_RECHECK));
    assert!(matches!(
        plan.waits[0],
        crate::Wait::PodsNotAvailable { .. }
    ));

    // Ordinal 3 runs b and is ready: the step completes and the pause step pauses.
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(12));
    assert_eq!(plan.status.current_step_index, Some(1));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Paused));
    let pause = &plan.status.pause_conditions.as_ref().unwrap()[0];
    assert_eq!(pause.reason, Some(PauseReason::CanaryPauseStep));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.updated_replicas, Some(1));
    let ro = next(&ro, &plan);

    // Still paused a while later.
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(100));
    assert_eq!(plan.status.current_step_index, Some(1));
    assert!(plan.actions.is_empty());

    // Promoted (the pause conditions cleared): setWeight 50 sets partition 2.
    let mut promoted = ro.clone();
    promoted.status.as_mut().unwrap().pause_conditions = None;
    let plan = decide(&promoted, Some(sts(Some(3), "b", "a", 1, 4)), at(101));
    assert_eq!(plan.status.current_step_index, Some(2));
    assert_eq!(written_partition(&plan), Some(2));
    assert!(reasons(&plan).contains(&"RolloutResumed"));
    let ro = next(&promoted, &plan);

    // Ordinals 2 and 3 on b: the timed pause starts, and runs out by the clock.
    let plan = decide(&ro, Some(sts(Some(2), "b", "a", 2, 4)), at(102));
    assert_eq!(plan.status.current_step_index, Some(3));
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(2)));
    let ro = next(&ro, &plan);
    let plan = decide(&ro, Some(sts(Some(2), "b", "a", 2, 4)), at(103));
    assert_eq!(plan.status.current_step_index, Some(3));
    assert!(plan.actions.is_empty());
    let plan = decide(&ro, Some(sts(Some(2), "b", "a", 2, 4)), at(104));
    assert_eq!(plan.status.current_step_index, Some(4));
    assert_eq!(
        written_partition(&plan),
        Some(0),
        "past the steps: every pod"
    );
    assert_eq!(plan.status.stable_rs.as_deref(), Some("a"));
    let ro = next(&ro, &plan);

    // Every pod on b, which the StatefulSet controller has made current: b is stable, and
    // the partition is closed for the next update.
    let plan = decide(&ro, Some(sts(Some(0), "b", "a", 3, 4)), at(105));
    assert_eq!(plan.status.stable_rs.as_deref(), Some("a"));
    assert!(plan.actions.is_empty());
    let plan = decide(&ro, Some(sts(Some(0), "b", "b", 4, 4)), at(106));
    assert_eq!(plan.status.stable_rs.as_deref(), Some("b"));
    assert_eq!(written_partition(&plan), Some(4));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
    assert!(
        plan.events.iter().any(|e| e.message
            == "Rollout completed update to revision 2 (b): Completed all 4 canary steps"),
        "{:?}",
        plan.events
    );
}

#[test]
fn a_full_promotion_skips_the_steps() {
    let ro = healthy();
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10));
    let mut ro = next(&ro, &plan);
    ro.status.as_mut().unwrap().promote_full = Some(true);
    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 0, 4)), at(11));
    assert_eq!(written_partition(&plan), Some(0));
}

#[test]
fn a_manual_pause_moves_nothing() {
    let ro = healthy();
    let mut ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    ro.spec.paused = Some(true);
    let plan = decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(11));
    assert!(plan.actions.is_empty());
    assert_eq!(plan.status.phase, Some(RolloutPhase::Paused));
}

#[test]
fn abort_restores_the_stable_template_and_keeps_the_partition() {
    let ro = healthy();
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(11)),
    );
    assert_eq!(ro.status.as_ref().unwrap().current_step_index, Some(1));
    let mut ro = ro;
    ro.status.as_mut().unwrap().abort = Some(true);

    let plan = decide(&ro, Some(sts(Some(3), "b", "a", 1, 4)), at(12));
    let object = written(&plan).unwrap();
    assert_eq!(
        object["spec"]["template"],
        template("a"),
        "no $patch directive"
    );
    assert_eq!(
        object["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        3
    );
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert_eq!(
        plan.status.message.as_deref(),
        Some("RolloutAborted: Rollout aborted update to revision 2")
    );
    assert!(reasons(&plan).contains(&"RolloutAborted"));
    assert!(plan.status.pause_conditions.is_none());
    let ro = next(&ro, &plan);

    // The template is a's again (the update revision), ordinal 3 still on b: it rolls back,
    // the Rollout stays aborted on b.
    let mut rolling_back = sts(Some(3), "a", "a", 3, 3);
    rolling_back["spec"]["template"] = template("a");
    let plan = decide(&ro, Some(rolling_back), at(13));
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("b"));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert!(!reasons(&plan).contains(&"RolloutAborted"), "said once");

    // Every pod back on a: the partition closes, the Rollout stays aborted.
    let plan = decide(&ro, Some(sts(Some(3), "a", "a", 4, 4)), at(14));
    assert_eq!(written_partition(&plan), Some(4));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert_eq!(plan.status.abort, Some(true));
    let ro = next(&ro, &plan);

    // A new template starts a new update, the abort forgotten.
    let mut c = sts(Some(4), "c", "a", 0, 4);
    c["spec"]["template"] = template("c");
    let plan = decide(&ro, Some(c), at(15));
    assert_eq!(plan.status.abort, None);
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("c"));
    assert_eq!(written_partition(&plan), Some(3));
}

#[test]
fn a_template_edited_back_to_stable_is_a_rollback_without_steps() {
    let ro = healthy();
    let ro = next(
        &ro,
        &decide(&ro, Some(sts(Some(4), "b", "a", 0, 4)), at(10)),
    );
    let plan = decide(&ro, Some(sts(Some(3), "a", "a", 3, 4)), at(11));
    assert!(reasons(&plan).contains(&"SkipSteps"));
    assert_eq!(plan.status.current_pod_hash.as_deref(), Some("a"));
    // Ordinal 3 is still rolling back: the partition stays until every pod is on a.
    assert!(plan.actions.is_empty());
    let ro = next(&ro, &plan);
    let plan = decide(&ro, Some(sts(Some(3), "a", "a", 4, 4)), at(12));
    assert_eq!(written_partition(&plan), Some(4));
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
}

#[test]
fn what_cannot_be_driven_is_invalid_spec() {
    let message = |plan: &Plan| plan.status.message.clone().unwrap_or_default();
    let ro = rollout(steps(), None);
    let plan = decide(&ro, None, at(0));
    assert_eq!(
        message(&plan),
        "InvalidSpec: The Rollout \"db\" is invalid: statefulsets.apps \"db\" not found"
    );
    assert_eq!(plan.status.phase, Some(RolloutPhase::Degraded));
    assert!(plan.actions.is_empty());

    let mut on_delete = sts(None, "a", "a", 4, 4);
    on_delete["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let plan = decide(&ro, Some(on_delete), at(0));
    assert!(
        message(&plan).contains(
            "StatefulSet \"db\": spec.updateStrategy.type: Unsupported value: \"OnDelete\""
        ),
        "{}",
        message(&plan)
    );
    assert!(plan.actions.is_empty());

    // An analysis naming a template that does not exist, as for any Rollout.
    for (steps, field) in [
        (
            json!([{"setCanaryScale": {"weight": 10}}]),
            "steps[0].setCanaryScale",
        ),
        (
            json!([{"experiment": {"templates": [{"name": "x", "specRef": "canary"}]}}]),
            "steps[0].experiment",
        ),
        (
            json!([{"analysis": {"templates": [{"templateName": "missing"}]}}]),
            "steps[0].analysis.templates: Invalid value: \"missing\": AnalysisTemplate 'missing' not found",
        ),
    ] {
        let plan = decide(
            &rollout(steps, None),
            Some(sts(None, "a", "a", 4, 4)),
            at(0),
        );
        assert!(message(&plan).contains(field), "{}", message(&plan));
        assert!(plan.actions.is_empty());
    }
    let mut blue_green = rollout(steps(), None);
    blue_green.spec.strategy =
        serde_json::from_value(json!({"blueGreen": {"activeService": "a"}})).unwrap();
    let plan = decide(&blue_green, Some(sts(None, "a", "a", 4, 4)), at(0));
    assert!(
        message(&plan).contains("spec.strategy.blueGreen: Forbidden"),
        "{}",
        message(&plan)
    );
    let mut surge = rollout(steps(), None);
    canary_mut(&mut surge).max_surge =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1));
    let plan = decide(&surge, Some(sts(None, "a", "a", 4, 4)), at(0));
    assert!(
        message(&plan).contains("maxSurge: Forbidden"),
        "{}",
        message(&plan)
    );

    // Fixed, the condition goes.
    let plan = decide(
        &next(&ro, &decide(&ro, None, at(0))),
        Some(sts(None, "a", "a", 4, 4)),
        at(1),
    );
    assert_eq!(plan.status.phase, Some(RolloutPhase::Healthy));
}
