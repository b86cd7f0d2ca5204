//! How many status writes an update costs: progress coalesced within the write interval, and
//! what goes out with the completion.

use super::*;

/// Status writes of an update of one replica, pods ready a second after they are created.
/// An update reconciled a second apart, but for the first gap: the pods come `pods_after`
/// seconds after the new ReplicaSet.
fn status_writes_of_an_update(
    interval: std::time::Duration,
    pods_after: i64,
) -> (usize, Vec<Option<std::time::Duration>>, World) {
    let mut w = World::new(rollout(1, json!([])));
    w.settings.status_write_interval = interval;
    w.settle();
    w.advance(60);
    w.set_image("app:v2");
    let mut writes = 0;
    let mut requeues = Vec::new();
    for i in 0..20 {
        let before = (w.ro.clone(), w.rss.clone());
        let plan = w.reconcile();
        requeues.push(plan.requeue_after);
        if w.ro.status != before.0.status {
            writes += 1;
        }
        if before == (w.ro.clone(), w.rss.clone()) {
            break;
        }
        let first = i == 0;
        w.advance(if first { pods_after } else { 1 });
    }
    (writes, requeues, w)
}

#[test]
fn a_status_write_interval_coalesces_an_updates_progress_into_fewer_writes() {
    let (argo, _, every) = status_writes_of_an_update(std::time::Duration::ZERO, 1);
    let (coalesced, requeues, w) = status_writes_of_an_update(std::time::Duration::from_secs(5), 1);
    assert!(
        coalesced < argo,
        "{coalesced} writes coalesced, {argo} without"
    );
    assert!(coalesced <= 2, "{coalesced}");
    // Held back, the Rollout is looked at again within the interval.
    assert!(
        requeues
            .iter()
            .flatten()
            .all(|d| *d <= std::time::Duration::from_secs(900)),
        "{requeues:?}"
    );
    // Where it ends is the same.
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    let counts = |s: &sluice_api::RolloutStatus| {
        (
            s.replicas,
            s.updated_replicas,
            s.available_replicas,
            s.stable_rs.clone(),
            s.message.clone(),
        )
    };
    assert_eq!(counts(w.status()), counts(every.status()));
}

#[test]
fn progress_long_after_the_new_replica_set_is_written_with_the_completion() {
    // On a busy cluster the pods come long after their ReplicaSet: their arrival is held back
    // and goes out with the completion that follows, not in a write of its own.
    let five = std::time::Duration::from_secs(5);
    let (argo, _, every) = status_writes_of_an_update(std::time::Duration::ZERO, 40);
    let (coalesced, requeues, w) = status_writes_of_an_update(five, 40);
    assert_eq!(coalesced, 2, "the new revision, then the completion");
    assert!(argo > coalesced, "{argo} writes without an interval");
    assert!(
        requeues.iter().flatten().any(|d| *d <= five),
        "{requeues:?}"
    );
    assert_eq!(w.phase(), RolloutPhase::Healthy);
    assert_eq!(w.status().replicas, every.status().replicas);
    assert_eq!(
        w.status().available_replicas,
        every.status().available_replicas
    );
}

#[test]
fn a_promotion_named_only_in_the_status_goes_out_with_the_completion() {
    // A canary without routing, Services or analysis: its promotion is held with the progress
    // until the old pods are gone, and written, with its RolloutCompleted event, once.
    let statuses_and_events = |interval: u64| {
        let mut w = World::new(rollout(1, json!([])));
        w.slow_scale_down = true;
        w.settings.status_write_interval = std::time::Duration::from_secs(interval);
        w.settle();
        w.advance(60);
        w.set_image("app:v2");
        let mut written = Vec::new();
        let mut reasons = Vec::new();
        for _ in 0..20 {
            let before = (w.ro.clone(), w.rss.clone());
            let plan = w.reconcile();
            reasons.extend(plan.events.iter().map(|e| e.reason));
            if w.ro.status != before.0.status {
                let s = w.status();
                written.push((s.phase.clone().unwrap(), s.stable_rs.clone()));
            }
            if before == (w.ro.clone(), w.rss.clone()) {
                break;
            }
            w.advance(1);
        }
        (written, reasons, w)
    };
    let (every, every_reasons, argo) = statuses_and_events(0);
    let (held, held_reasons, w) = statuses_and_events(5);
    let new_hash = w.status().current_pod_hash.clone();
    // Argo's order: the new revision observed, the pods, the promotion while the old pods
    // terminate, the completion.
    assert!(
        every.contains(&(RolloutPhase::Progressing, new_hash.clone())),
        "{every:?}"
    );
    // Coalesced: the new revision observed, then the promotion with the completion.
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(held[1], (RolloutPhase::Healthy, new_hash));
    // The same events, each once: RolloutCompleted is not told while its status is held.
    assert_eq!(held_reasons, every_reasons);
    let completed = held_reasons.iter().filter(|r| **r == "RolloutCompleted");
    assert_eq!(completed.count(), 1, "{held_reasons:?}");
    // Where it ends is the same.
    let end = |w: &World| {
        let s = w.status();
        (
            s.phase.clone(),
            s.stable_rs.clone(),
            s.replicas,
            s.available_replicas,
        )
    };
    assert_eq!(end(&w), end(&argo));
}
