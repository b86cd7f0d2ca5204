//! A canary's update from start to end: steps and Argo's replica counts, aborts and retries,
//! promotions, pauses, superseding revisions, progress deadlines, restarts and rollbacks.

use super::*;

#[test]
fn first_deploy_goes_straight_to_full_and_healthy() {
    let w = healthy_world(5, json!([{"setWeight": 20}, {"pause": {}}]));
    assert_eq!(w.rss.len(), 1);
    assert_eq!(w.replicas_by_image(), vec![("app:v1".into(), 5)]);
    let s = w.status();
    assert_eq!(s.stable_rs, s.current_pod_hash);
    assert_eq!(s.current_step_index, Some(2));
    assert_eq!(s.observed_generation.as_deref(), Some("1"));
    assert_eq!(s.selector.as_deref(), Some("app=demo"));
    let rs = &w.rss[0];
    assert_eq!(
        rs.name(),
        format!("demo-{}", s.current_pod_hash.as_deref().unwrap())
    );
    assert_eq!(rs.revision(), Some(1));
    assert_eq!(
        w.ro.metadata.annotations.as_ref().unwrap()["rollout.argoproj.io/revision"],
        "1"
    );
}

#[test]
fn steady_state_writes_nothing() {
    let mut w = healthy_world(3, json!([{"setWeight": 50}]));
    let before = w.ro.status.clone();
    let plan = w.reconcile();
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
    assert_eq!(Some(plan.status), before);
    assert!(plan.events.is_empty());
}

#[test]
fn update_walks_through_steps_with_argo_replica_counts() {
    let mut w = healthy_world(
        5,
        json!([{"setWeight": 20}, {"pause": {}}, {"setWeight": 40}, {"pause": {"duration": "40s"}}, {"setWeight": 80}]),
    );
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.status().message.as_deref(), Some("CanaryPauseStep"));
    assert_eq!(w.status().current_step_index, Some(1));
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 1)]
    );
    // Waiting does not promote an indefinite pause.
    w.advance(3600);
    w.settle();
    assert_eq!(w.status().current_step_index, Some(1));

    w.promote();
    let plan = w.settle();
    assert_eq!(w.status().current_step_index, Some(3));
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 3), ("app:v2".into(), 2)]
    );
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(40)));
    w.advance(39);
    w.settle();
    assert_eq!(w.status().current_step_index, Some(3));
    w.advance(1);
    w.settle();
    // Past the last step: fully promoted, the old revision scaled away.
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 5)]
    );
    assert_eq!(w.status().stable_rs, w.status().current_pod_hash);
    assert_eq!(w.status().current_step_index, Some(5));
}

#[test]
fn abort_returns_to_stable_and_retry_resumes() {
    let mut w = healthy_world(4, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 2)]
    );
    w.ro.status.as_mut().unwrap().abort = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .starts_with("RolloutAborted: Rollout aborted update to revision 2")
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
    assert!(w.status().aborted_at.is_some());
    assert!(w.status().pause_conditions.is_none());

    w.ro.status.as_mut().unwrap().abort = Some(false);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 2)]
    );
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn promote_full_on_an_aborted_canary_clears_the_abort_and_promotes() {
    let mut w = healthy_world(4, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    w.ro.status.as_mut().unwrap().abort = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);

    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(w.status().abort, None);
    assert_eq!(w.status().aborted_at, None);
    assert_eq!(w.status().promote_full, None);
    assert_eq!(w.status().current_step_index, Some(2));
    assert_eq!(w.status().stable_rs, w.status().current_pod_hash);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 4)]
    );
}

#[test]
fn promote_full_skips_remaining_steps() {
    let mut w = healthy_world(
        4,
        json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]),
    );
    w.set_image("app:v2");
    w.settle();
    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 4)]
    );
    assert_eq!(w.status().promote_full, None);
}

#[test]
fn manual_pause_holds_the_step() {
    let mut w = healthy_world(4, json!([{"setWeight": 25}, {"setWeight": 50}]));
    w.ro.spec.paused = Some(true);
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(w.status().message.as_deref(), Some("manually paused"));
    // The new ReplicaSet is created at 0 and nothing is resized while paused, as in Argo.
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
    w.ro.spec.paused = Some(false);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn superseding_revision_completes_and_scales_the_intermediate_down() {
    for replicas in [1, 2, 3, 4, 10] {
        let mut w = healthy_world(replicas, json!([{"setWeight": 50}, {"pause": {}}]));
        w.set_image("app:v2");
        w.settle();
        assert_eq!(w.phase(), RolloutPhase::Paused, "R={replicas}");
        w.set_image("app:v3");
        w.settle();
        assert_eq!(
            w.phase(),
            RolloutPhase::Paused,
            "R={replicas}: {:#?}",
            w.status()
        );
        w.promote();
        w.settle();
        assert_eq!(
            w.phase(),
            RolloutPhase::Healthy,
            "R={replicas}: {:#?}",
            w.status()
        );
        let counts = w.replicas_by_image();
        assert_eq!(
            counts,
            vec![
                ("app:v1".into(), 0),
                ("app:v2".into(), 0),
                ("app:v3".into(), replicas)
            ],
            "R={replicas}"
        );
    }
}

#[test]
fn availability_never_drops_below_max_unavailable_during_update() {
    let mut w = healthy_world(10, json!([{"setWeight": 30}, {"setWeight": 70}]));
    w.set_image("app:v2");
    for _ in 0..40 {
        w.reconcile();
        let available: i32 = w.rss.iter().map(|r| r.available_replicas()).sum();
        // default maxUnavailable 25% of 10 = 2
        assert!(
            available >= 8,
            "available {available}: {:?}",
            w.replicas_by_image()
        );
    }
    assert_eq!(w.phase(), RolloutPhase::Healthy);
}

#[test]
fn bad_revision_times_out_and_aborts_then_good_then_bad_again() {
    let mut ro = rollout(3, json!([{"setWeight": 34}, {"pause": {"duration": 5}}]));
    ro.spec.progress_deadline_seconds = Some(30);
    ro.spec.progress_deadline_abort = Some(true);
    let mut w = World::new(ro);
    w.settle();
    w.bad_images = vec!["app:bad1".into(), "app:bad2".into()];
    for (image, good) in [("app:bad1", false), ("app:v2", true), ("app:bad2", false)] {
        w.set_image(image);
        w.settle();
        // Nothing more happens until time passes.
        w.advance(29);
        w.settle();
        if good {
            w.advance(10);
            w.settle();
            assert_eq!(
                w.phase(),
                RolloutPhase::Healthy,
                "{image}: {:#?}",
                w.status()
            );
            continue;
        }
        assert_eq!(w.phase(), RolloutPhase::Progressing, "{image}");
        w.advance(2);
        w.settle();
        assert_eq!(
            w.phase(),
            RolloutPhase::Degraded,
            "{image}: {:#?}",
            w.status()
        );
        assert_eq!(w.status().abort, Some(true));
        let bad: i32 = w
            .rss
            .iter()
            .filter(|r| World::image_of(r) == image)
            .map(|r| r.spec_replicas())
            .sum();
        assert_eq!(bad, 0, "{image} scaled down after abort");
    }
    // A deadline annotation elsewhere never matters: none is ever written.
    assert!(
        w.rss
            .iter()
            .all(|r| r.annotation(SCALE_DOWN_DEADLINE).is_none())
    );
}

#[test]
fn progress_deadline_abort_turned_on_after_the_deadline_passed_aborts() {
    let mut ro = rollout(3, json!([{"setWeight": 34}, {"pause": {}}]));
    ro.spec.progress_deadline_seconds = Some(30);
    let mut w = World::new(ro);
    w.settle();
    w.bad_images = vec!["app:bad".into()];
    w.set_image("app:bad");
    w.settle();
    w.advance(31);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert_eq!(
        w.status().abort,
        None,
        "no abort without progressDeadlineAbort"
    );
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .starts_with("ProgressDeadlineExceeded: ReplicaSet \"demo-")
    );

    w.ro.spec.progress_deadline_abort = Some(true);
    w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
    let plan = w.reconcile();
    assert_eq!(w.status().abort, Some(true));
    assert!(w.status().aborted_at.is_some());
    let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, vec!["RolloutAborted"]);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    let bad: i32 = w
        .rss
        .iter()
        .filter(|r| World::image_of(r) == "app:bad")
        .map(|r| r.spec_replicas())
        .sum();
    assert_eq!(bad, 0, "scaled down after the abort");
    let progressing = w
        .status()
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(sluice_api::rollout::RolloutConditionType::Progressing))
        .unwrap();
    assert_eq!(progressing.reason.as_deref(), Some("RolloutAborted"));
    // Argo's words after a deadline's abort (checked against its controller by the live
    // scenarios): the revision only, the timeout having been told in the first event.
    assert_eq!(
        progressing.message.as_deref(),
        Some("Rollout aborted update to revision 2")
    );
}

#[test]
fn lowering_replicas_mid_update_with_a_crashing_canary_keeps_surge_and_availability() {
    for (from, to, weight) in [
        (10, 4, 50),
        (10, 2, 50),
        (5, 1, 20),
        (8, 3, 75),
        (10, 5, 90),
    ] {
        let mut w = healthy_world(from, json!([{"setWeight": weight}, {"pause": {}}]));
        w.bad_images = vec!["app:bad".into()];
        w.set_image("app:bad");
        w.settle();
        w.ro.spec.replicas = Some(to);
        w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
        w.settle();
        let limits = crate::replicas::resolve_surge_limits(None, None, to).unwrap();
        let total: i32 = w.rss.iter().map(|r| r.spec_replicas()).sum();
        let available: i32 = w.rss.iter().map(|r| r.available_replicas()).sum();
        let case = format!("{from}->{to} at {weight}%: {:?}", w.replicas_by_image());
        assert!(total <= to + limits.max_surge, "over maxSurge: {case}");
        assert!(
            available >= to - limits.max_unavailable,
            "under minimum availability: {case}"
        );
    }
}

#[test]
fn invalid_spec_is_degraded_with_no_writes() {
    let mut ro = rollout(3, json!([{"setWeight": 120}]));
    ro.spec.selector = None;
    let mut w = World::new(ro);
    let plan = w.reconcile();
    assert!(plan.actions.is_empty());
    // Looked at again soon, as Argo does: what made it invalid may appear later.
    assert_eq!(plan.requeue_after, Some(super::super::INVALID_SPEC_RECHECK));
    assert_eq!(w.phase(), RolloutPhase::Degraded);
    assert!(
        w.status()
            .message
            .as_deref()
            .unwrap()
            .starts_with("InvalidSpec: ")
    );
}

#[test]
fn rollback_to_stable_template_is_immediate() {
    let mut w = healthy_world(4, json!([{"setWeight": 25}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    w.set_image("app:v1");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 4), ("app:v2".into(), 0)]
    );
}

/// A ReplicaSet cache behind the last update's create: the new ReplicaSet's revision is
/// still above the Rollout's, never the one the unseen ReplicaSet has.
#[test]
fn a_new_replica_set_takes_a_revision_above_the_rollouts_when_the_cache_lags() {
    let mut w = healthy_world(4, json!([{"setWeight": 25}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    let v2 = w.rs_named_by_image("app:v2");
    w.set_image("app:v3");
    let unseen = w.rss.iter().position(|r| r.name() == v2).unwrap();
    let unseen = w.rss.remove(unseen);
    let plan = w.reconcile();
    let created: Vec<Option<i64>> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateReplicaSet { replica_set } => Some(replica_set.revision()),
            _ => None,
        })
        .collect();
    assert_eq!(created, vec![Some(3)]);
    w.rss.push(unseen);
    w.settle();
    let mut revisions: Vec<(String, Option<i64>)> = w
        .rss
        .iter()
        .map(|r| (World::image_of(r), r.revision()))
        .collect();
    revisions.sort();
    assert_eq!(
        revisions,
        vec![
            ("app:v1".into(), Some(1)),
            ("app:v2".into(), Some(2)),
            ("app:v3".into(), Some(3))
        ]
    );
}

#[test]
fn history_limit_deletes_oldest_idle_replica_sets() {
    let mut ro = rollout(1, json!([]));
    ro.spec.revision_history_limit = Some(1);
    let mut w = World::new(ro);
    w.settle();
    for i in 2..=5 {
        w.set_image(&format!("app:v{i}"));
        w.settle();
    }
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    // current + one idle old revision
    assert_eq!(w.rss.len(), 2, "{:?}", w.replicas_by_image());
    let revisions: Vec<i64> = w.rss.iter().filter_map(|r| r.revision()).collect();
    assert!(
        revisions.contains(&5) && revisions.contains(&4),
        "{revisions:?}"
    );
}

#[test]
fn restart_evicts_old_pods_within_max_unavailable_then_records_it() {
    let mut ro = rollout(4, json!([{"setWeight": 50}]));
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .max_unavailable = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2));
    let mut w = World::new(ro);
    w.settle();
    let old: Vec<String> = w
        .pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(old.len(), 4);
    w.advance(10);
    let at = w.now;
    w.ro.spec.restart_at = Some(Time(at));
    w.ro.metadata.generation = Some(2);
    w.advance(1);
    let plan = w.reconcile();
    let evictions = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::EvictPod { .. }))
        .count();
    assert_eq!(evictions, 2, "maxUnavailable 2");
    assert_eq!(w.phase(), RolloutPhase::Progressing);
    assert_eq!(w.status().message.as_deref(), Some("rollout is restarting"));
    w.settle();
    assert_eq!(w.status().restarted_at, Some(Time(at)));
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert!(
        w.pods
            .iter()
            .all(|p| !old.contains(p.metadata.name.as_ref().unwrap()))
    );
    assert_eq!(w.pods.len(), 4);
}

#[test]
fn rollback_to_a_template_copied_from_a_replica_set_reuses_it() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    // The API server fills defaults into ReplicaSet templates; `undo` copies such a template.
    let copied = w.template_as_undo_copies_it();
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.rss.len(), 2);
    w.ro.spec.template = Some(copied);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        w.rss.len(),
        2,
        "no new ReplicaSet for the restored template"
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 2), ("app:v2".into(), 0)]
    );
}

/// As Argo: once the new ReplicaSet's pods are counted (even pods that never become ready),
/// the update has progressed: `ReplicaSetUpdated`, not `NewReplicaSetCreated` any more.
#[test]
fn pods_that_never_become_ready_still_move_progressing_to_replica_set_updated() {
    let mut ro = rollout(1, json!([{"setWeight": 50}, {"pause": {}}]));
    let canary = ro.spec.strategy.as_mut().unwrap().canary.as_mut().unwrap();
    canary.max_surge = Some(serde_json::from_value(json!("50%")).unwrap());
    canary.max_unavailable = Some(serde_json::from_value(json!(1)).unwrap());
    let mut w = healthy_world(1, json!([]));
    w.ro.spec.strategy = ro.spec.strategy;
    w.settle();
    w.bad_images.push("app:v2".into());
    w.set_image("app:v2");
    w.settle();
    w.advance(60);
    w.settle();
    assert_eq!(
        progressing_reason(&w).as_deref(),
        Some("ReplicaSetUpdated"),
        "{:#?}",
        w.status()
    );
}

/// The reason of the Progressing condition.
fn progressing_reason(w: &World) -> Option<String> {
    w.status()
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(sluice_api::rollout::RolloutConditionType::Progressing))
        .and_then(|c| c.reason.clone())
}

/// As Argo, which judges Progressing after recording the new ReplicaSet: a new template resets
/// the step index, which is progress, so a canary with steps says `ReplicaSetUpdated` from the
/// first pass (live scenarios seeds 282, 291); one without steps has no index and says
/// `NewReplicaSetCreated`.
#[test]
fn the_progressing_reason_of_the_pass_that_creates_the_replica_set_follows_argo() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.reconcile();
    assert_eq!(progressing_reason(&w).as_deref(), Some("ReplicaSetUpdated"));
    let mut w = healthy_world(2, json!([]));
    w.set_image("app:v2");
    w.reconcile();
    assert_eq!(
        progressing_reason(&w).as_deref(),
        Some("NewReplicaSetCreated")
    );
}

/// As Argo: a completed Rollout the user paused, then scaled, has made no progress: nothing is
/// resized while paused, and Progressing keeps saying its ReplicaSet has successfully
/// progressed, also after a retry (live scenario seed 252). A Progressing condition that names
/// an earlier revision's ReplicaSet still starts the new revision's deadline.
#[test]
fn a_scale_of_a_paused_completed_rollout_is_no_progress() {
    let mut w = healthy_world(3, json!([{"setWeight": 50}]));
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(
        progressing_reason(&w).as_deref(),
        Some("NewReplicaSetAvailable")
    );
    w.ro.spec.paused = Some(true);
    w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
    w.settle();
    w.ro.spec.replicas = Some(2);
    w.ro.metadata.generation = Some(w.ro.metadata.generation.unwrap() + 1);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    assert_eq!(
        progressing_reason(&w).as_deref(),
        Some("NewReplicaSetAvailable")
    );
    assert_eq!(
        w.replicas_by_image(),
        vec![("app:v1".into(), 0), ("app:v2".into(), 3)]
    );
}
