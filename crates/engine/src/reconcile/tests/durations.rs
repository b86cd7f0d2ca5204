//! `status.duration`: when an update began and ended, how, and how long it waited for a person.

use super::*;

fn duration(w: &World) -> sluice_api::rollout::RolloutDurationStatus {
    w.status().duration.clone().unwrap_or_default()
}

#[test]
fn an_update_records_its_start_its_manual_pause_and_its_promotion() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    assert_eq!(w.status().duration, None, "a first deploy is no update");
    let started = w.now;
    w.set_image("app:v2");
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Paused);
    let d = duration(&w);
    assert_eq!(d.rollout_started_at.map(|t| t.0), Some(started));
    assert_eq!(
        d.manual_pause_started_at.map(|t| t.0),
        Some(started),
        "waits at the pause step"
    );
    assert_eq!(d.finished_at, None);

    w.advance(90);
    w.promote();
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    let d = duration(&w);
    assert_eq!(d.total_manual_pause_duration_seconds, Some(90));
    assert_eq!(d.manual_pause_started_at, None);
    assert_eq!(d.completion_status.as_deref(), Some("Promoted"));
    assert_eq!(d.finished_at.map(|t| t.0), Some(w.now));
    assert_eq!(d.rollout_started_at.map(|t| t.0), Some(started));
}

#[test]
fn an_abort_ends_the_update_and_a_new_template_starts_another() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    w.advance(30);
    w.ro.status.as_mut().unwrap().abort = Some(true);
    w.settle();
    let d = duration(&w);
    assert_eq!(d.completion_status.as_deref(), Some("Aborted"));
    assert_eq!(d.total_manual_pause_duration_seconds, Some(30));

    w.advance(10);
    w.set_image("app:v3");
    w.settle();
    let d = duration(&w);
    assert_eq!(d.rollout_started_at.map(|t| t.0), Some(w.now));
    assert_eq!((d.finished_at, d.completion_status), (None, None));
}

#[test]
fn a_full_promotion_is_fast() {
    let mut w = healthy_world(2, json!([{"setWeight": 50}, {"pause": {}}]));
    w.set_image("app:v2");
    w.settle();
    w.ro.status.as_mut().unwrap().promote_full = Some(true);
    w.settle();
    assert_eq!(w.phase(), RolloutPhase::Healthy, "{:#?}", w.status());
    assert_eq!(
        duration(&w).completion_status.as_deref(),
        Some("FastPromoted")
    );
}
