//! The plan says what the update waits for (`Plan::waits`), decided where the decision is made.

use jiff::SignedDuration;
use serde_json::json;

use super::{World, bg_rollout, rollout};
use crate::waits::Wait;

#[test]
fn pause_steps_timed_then_indefinite_and_a_users_pause() {
    let mut w = World::new(rollout(
        2,
        json!([{"pause": {"duration": "1h"}}, {"pause": {}}]),
    ));
    w.settle();
    w.set_image("app:v2");
    let plan = w.settle();
    let started = w.now;
    assert_eq!(
        plan.waits,
        [Wait::PauseStep {
            step: 0,
            until: Some(started + SignedDuration::from_hours(1)),
        }]
    );
    w.advance(3600);
    let plan = w.settle();
    assert_eq!(
        plan.waits,
        [Wait::PauseStep {
            step: 1,
            until: None
        }]
    );
    w.ro.spec.paused = Some(true);
    let plan = w.reconcile();
    assert_eq!(plan.waits.first(), Some(&Wait::PausedByUser));
}

#[test]
fn pods_not_available_and_the_progress_deadline() {
    let mut ro = rollout(2, json!([{"setWeight": 50}]));
    ro.spec.progress_deadline_seconds = Some(600);
    let mut w = World::new(ro);
    w.settle();
    w.bad_images.push("app:v2".into());
    w.set_image("app:v2");
    let plan = w.settle();
    let [
        Wait::PodsNotAvailable {
            wanted, available, ..
        },
        Wait::ProgressDeadline { since, at },
    ] = plan.waits.as_slice()
    else {
        panic!("{:?}", plan.waits)
    };
    assert_eq!((*wanted, *available), (1, 0));
    assert_eq!(*at, *since + SignedDuration::from_secs(600));
    w.advance(601);
    let plan = w.reconcile();
    assert!(
        plan.waits.iter().any(|x| matches!(x, Wait::ProgressDeadlineExceeded { message } if message.ends_with("has timed out progressing."))),
        "{:?}",
        plan.waits
    );
}

#[test]
fn an_invalid_spec_is_the_only_wait() {
    let mut w = World::new(rollout(2, json!([{"setWeight": 120}])));
    let plan = w.reconcile();
    assert_eq!(
        plan.waits,
        [Wait::InvalidSpec {
            message: "The Rollout \"demo\" is invalid: spec.strategy.steps[0].setWeight: Invalid value: 120: SetWeight needs to be between 0 and 100".into()
        }]
    );
}

#[test]
fn a_blue_green_preview_awaits_its_promotion() {
    let mut w = World::bg(bg_rollout(
        1,
        json!({"activeService": "active", "autoPromotionEnabled": false}),
    ));
    w.settle_bg();
    w.set_image("app:v2");
    w.settle_bg();
    let plan = w.reconcile();
    assert_eq!(plan.waits, [Wait::AwaitingPromotion { until: None }]);
}

#[test]
fn an_aborted_update_says_so_first() {
    let mut w = World::new(rollout(2, json!([{"pause": {}}])));
    w.settle();
    w.set_image("app:v2");
    w.settle();
    w.ro.status.as_mut().unwrap().abort = Some(true);
    let plan = w.settle();
    assert!(
        matches!(plan.waits.first(), Some(Wait::Aborted { message }) if message.starts_with("RolloutAborted")),
        "{:?}",
        plan.waits
    );
}
