//! The `get` summaries checked against hand-built Rollouts, ReplicaSets and pods.

use super::fixtures::*;
use super::*;
use serde_json::json;

#[test]
fn canary_summary() {
    let (ro, rss, pods) = canary_world();
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.phase, RolloutPhase::Paused);
    assert_eq!(info.message, "CanaryPauseStep");
    assert_eq!(info.strategy, Strategy::Canary);
    assert_eq!(info.step.as_deref(), Some("1/3"));
    assert_eq!(info.set_weight, Some(20));
    // One available canary pod of five available pods.
    assert_eq!(info.actual_weight, Some(20));
    assert_eq!(
        info.images,
        [
            ImageInfo {
                image: "demo:v1".into(),
                tags: vec!["stable"]
            },
            ImageInfo {
                image: "demo:v2".into(),
                tags: vec!["canary"]
            },
        ]
    );
    assert_eq!(
        info.replicas,
        ReplicaCounts {
            desired: 4,
            current: 5,
            updated: 1,
            ready: 5,
            available: 5
        }
    );
    let revisions: Vec<i64> = info.revisions.iter().map(|r| r.revision).collect();
    assert_eq!(revisions, [3, 2, 1]);
    let old = &info.revisions[2].replica_sets[0];
    assert_eq!((old.status, old.tags.len()), ("ScaledDown", 0));
    assert_eq!(info.revisions[1].replica_sets[0].pods.len(), 4);
    assert_eq!(info.revisions[1].replica_sets[0].pods[1].restarts, 2);
}

#[test]
fn replica_sets_of_other_owners_are_left_out() {
    let (ro, mut rss, pods) = canary_world();
    rss[0].metadata.owner_references.as_mut().unwrap()[0].uid = "other".into();
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.revisions.len(), 2);
}

#[test]
fn finished_steps_mean_full_weight() {
    let (mut ro, rss, pods) = canary_world();
    let status = ro.status.as_mut().unwrap();
    status.current_step_index = Some(3);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(
        (info.set_weight, info.actual_weight),
        (Some(100), Some(100))
    );
    assert_eq!(info.step.as_deref(), Some("3/3"));
}

#[test]
fn aborted_canary_sets_weight_zero() {
    let (mut ro, rss, pods) = canary_world();
    ro.status.as_mut().unwrap().abort = Some(true);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.set_weight, Some(0));
}

#[test]
fn basic_canary_weight_is_the_share_of_available_pods() {
    let (mut ro, mut rss, pods) = canary_world();
    // Two stable pods and one canary pod available: 100 * 1 / 3, rounded down.
    rss[1].status.as_mut().unwrap().available_replicas = Some(2);
    ro.status.as_mut().unwrap().available_replicas = Some(3);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!((info.set_weight, info.actual_weight), (Some(20), Some(33)));
}

#[test]
fn basic_canary_without_available_pods_has_no_weight() {
    let (mut ro, rss, pods) = canary_world();
    ro.status.as_mut().unwrap().available_replicas = Some(0);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.actual_weight, Some(0));
}

#[test]
fn routed_canary_weight_comes_from_the_recorded_router_weight() {
    let (ro, rss, pods) = routed_canary_world();
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.step.as_deref(), Some("2/3"));
    // The step asks for 60; the router still sends 20 until the canary pods are up.
    assert_eq!((info.set_weight, info.actual_weight), (Some(60), Some(20)));
}

#[test]
fn routed_canary_ignores_the_pod_share() {
    let (mut ro, rss, pods) = routed_canary_world();
    record_weights(&mut ro, 60, 40);
    // One canary pod of five would be 20 by pods; the router says 60.
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.actual_weight, Some(60));
}

#[test]
fn routed_canary_before_any_recorded_weight_shows_the_set_weight() {
    let (mut ro, rss, pods) = routed_canary_world();
    ro.status.as_mut().unwrap().canary = None;
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!((info.set_weight, info.actual_weight), (Some(60), Some(60)));
}

#[test]
fn routed_canary_unverified_weight_is_shown_as_recorded() {
    let (mut ro, rss, pods) = routed_canary_world();
    let weights = ro
        .status
        .as_mut()
        .and_then(|s| s.canary.as_mut())
        .and_then(|c| c.weights.as_mut())
        .unwrap();
    weights.verified = Some(false);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.actual_weight, Some(20));
}

#[test]
fn routed_weights_keep_the_max_traffic_weight_scale() {
    let (mut ro, rss, pods) = canary_world();
    route_traffic(
        &mut ro,
        json!({"nginx": {"stableIngress": "demo"}, "maxTrafficWeight": 1000}),
    );
    let canary = ro.spec.strategy.as_mut().unwrap().canary.as_mut().unwrap();
    canary.steps = Some(
        serde_json::from_value(json!([{"setWeight": 5}, {"pause": {}}, {"setWeight": 250}]))
            .unwrap(),
    );
    ro.status.as_mut().unwrap().current_step_index = Some(2);
    record_weights(&mut ro, 5, 995);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!((info.set_weight, info.actual_weight), (Some(250), Some(5)));

    record_weights(&mut ro, 250, 750);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(
        (info.set_weight, info.actual_weight),
        (Some(250), Some(250))
    );
}

#[test]
fn completed_routed_canary_gets_the_full_weight() {
    let (mut ro, rss, pods) = routed_canary_world();
    let status = ro.status.as_mut().unwrap();
    status.current_step_index = Some(3);
    status.stable_rs = Some("h2".into());
    // After promotion the router's canary weight goes back to 0.
    record_weights(&mut ro, 0, 100);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(
        (info.set_weight, info.actual_weight),
        (Some(100), Some(100))
    );
}

#[test]
fn completed_canary_with_max_traffic_weight_shows_it_as_the_actual_weight() {
    let (mut ro, rss, pods) = routed_canary_world();
    route_traffic(
        &mut ro,
        json!({"nginx": {"stableIngress": "demo"}, "maxTrafficWeight": 1000}),
    );
    ro.status.as_mut().unwrap().current_step_index = Some(3);
    record_weights(&mut ro, 0, 1000);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    // The set weight past the last step is always 100; the actual weight is the full
    // weight in the router's scale.
    assert_eq!(
        (info.set_weight, info.actual_weight),
        (Some(100), Some(1000))
    );
}

#[test]
fn canary_without_steps_is_at_full_weight() {
    let (mut ro, rss, pods) = canary_world();
    ro.spec
        .strategy
        .as_mut()
        .unwrap()
        .canary
        .as_mut()
        .unwrap()
        .steps = None;
    ro.status.as_mut().unwrap().current_step_index = None;
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!(info.step, None);
    assert_eq!(
        (info.set_weight, info.actual_weight),
        (Some(100), Some(100))
    );
}

#[test]
fn aborted_routed_canary_shows_the_weight_taken_away() {
    let (mut ro, rss, pods) = routed_canary_world();
    ro.status.as_mut().unwrap().abort = Some(true);
    record_weights(&mut ro, 0, 100);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!((info.set_weight, info.actual_weight), (Some(0), Some(0)));
}

#[test]
fn step_before_any_set_weight_sets_zero() {
    let (mut ro, rss, pods) = routed_canary_world();
    let canary = ro.spec.strategy.as_mut().unwrap().canary.as_mut().unwrap();
    canary.steps = Some(serde_json::from_value(json!([{"pause": {}}, {"setWeight": 50}])).unwrap());
    ro.status.as_mut().unwrap().current_step_index = Some(0);
    record_weights(&mut ro, 0, 100);
    let info = RolloutInfo::new(&ro, &rss, &pods, now());
    assert_eq!((info.set_weight, info.actual_weight), (Some(0), Some(0)));
}

#[test]
fn blue_green_tags_and_delay() {
    let ro: Rollout = serde_json::from_value(json!({
        "metadata": {"name": "demo", "uid": "ro-uid", "generation": 1},
        "spec": {"replicas": 1, "strategy": {"blueGreen": {"activeService": "a", "previewService": "p"}}},
        "status": {"observedGeneration": "1", "stableRS": "h1", "currentPodHash": "h2",
                   "blueGreen": {"activeSelector": "h1", "previewSelector": "h2"}}
    }))
    .unwrap();
    let mut old = replica_set("demo-h0", "h0", 1, "demo:v0", 1, "2024-05-01T10:00:00Z");
    old.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("scale-down-deadline".into(), "2024-05-01T12:00:25Z".into());
    let rss = vec![
        old,
        replica_set("demo-h1", "h1", 2, "demo:v1", 1, "2024-05-01T11:00:00Z"),
        replica_set("demo-h2", "h2", 3, "demo:v2", 1, "2024-05-01T11:30:00Z"),
    ];
    let info = RolloutInfo::new(&ro, &rss, &[] as &[Pod], now());
    let tags: Vec<Vec<String>> = info
        .revisions
        .iter()
        .map(|r| r.replica_sets[0].tags.clone())
        .collect();
    assert_eq!(
        tags,
        [vec!["preview"], vec!["stable", "active"], vec!["delay:25s"]]
    );
    assert_eq!(info.strategy, Strategy::BlueGreen);
    assert_eq!(info.step, None);
    assert_eq!(info.images[0].tags, ["stable", "active"]);
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

#[test]
fn pod_status_words() {
    let waiting = pod(json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Pending", "containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}}}]}
    }));
    assert_eq!(pod_status(&waiting), "ContainerCreating");

    let crashed = pod(json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": false, "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
    }));
    assert_eq!(pod_status(&crashed), "CrashLoopBackOff");

    let init = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [], "initContainers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "a", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0}}},
            {"name": "b", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"running": {}}}]}
    }));
    assert_eq!(pod_status(&init), "Init:1/2");

    let failed = pod(json!({
        "metadata": {"name": "p"},
        "status": {"phase": "Running", "containerStatuses": [{
            "name": "app", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 2}}}]}
    }));
    assert_eq!(pod_status(&failed), "ExitCode:2");

    let deleting = pod(json!({
        "metadata": {"name": "p", "deletionTimestamp": "2024-05-01T12:00:00Z"},
        "status": {"phase": "Running"}
    }));
    assert_eq!(pod_status(&deleting), "Terminating");

    assert_eq!(
        pod_status(&pod(json!({"metadata": {"name": "p"}}))),
        "Unknown"
    );
}
