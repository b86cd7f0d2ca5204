//! Status writes that only report an update's progress are coalesced.
//!
//! While an update runs, every pod created, ready or gone changes the Rollout's counts, and
//! writing each change costs a custom-resource write (JSON, schema validation and pruning
//! against a large schema): the API server's dearest request. A write whose only news is
//! bookkeeping (counts, the phase message, condition timestamps, the Progressing reason
//! moving from "created" to "updated") waits for the next write that matters, for one
//! interval ([`crate::Settings::status_write_interval`]) at most, counted from when the
//! controller first held it back ([`crate::Observed::progress_held_since`]), and never
//! written sooner than an interval after the last write. The Rollout is looked at again when
//! it is due, so the counts are at most one interval late. Anything that matters to a reader
//! (a new revision or generation observed, a phase, a condition turning, a step, a pause, an
//! abort, weights, stable) is written at once, and carries the progress held back with it.
//!
//! A Rollout whose stable ReplicaSet is named nowhere but in its own status (a canary without
//! traffic routing, Services, background analysis, analysis or experiment steps, or a
//! workloadRef) also holds the promotion of its stable ReplicaSet this way: the old pods are
//! already being scaled away in the same reconcile, and the phase turns Healthy once they are
//! gone, usually well within the interval, so the promotion is written with it. Nothing acts
//! on the status in between: the next reconcile, from the same observed state, promotes again.
//! This is what keeps a plain update to three Rollout writes: the revision annotation, the
//! new revision observed, the completion.
//!
//! Counting from the first hold rather than from the last write is what folds an update's
//! progress into its completion when the pods come long after the ReplicaSet (a busy
//! cluster): the pods' arrival is held, and the completion that follows within the interval
//! writes both.
//!
//! Argo writes every change. Progress held back is stamped when it is written, so the
//! progress deadline may be judged up to one interval later than Argo would; a Rollout whose
//! deadline is shorter than ten intervals is never coalesced. The controller's
//! `--status-write-interval` sets the interval (0 writes every change, as Argo does).

use std::time::Duration;

use jiff::Timestamp;
use sluice_api::rollout::{RolloutConditionType as Cond, RolloutPhase, RolloutSpec, RolloutStatus};

use crate::conditions as c;

/// What a Rollout's status may be held back under: the controller's interval, the Rollout's
/// progress deadline, and whether its promotion may wait too ([`stable_in_status_only`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rules {
    interval: Duration,
    progress_deadline_seconds: i64,
    stable_in_status_only: bool,
}

impl Rules {
    pub(super) fn of(spec: &RolloutSpec, interval: Duration) -> Rules {
        Rules {
            interval,
            progress_deadline_seconds: i64::from(spec.progress_deadline_seconds.unwrap_or(600)),
            stable_in_status_only: stable_in_status_only(spec),
        }
    }
}

/// Whether the change from `old` to `new` may wait, and if so for how long at most: `None`
/// means write now. `held_since` is when a change not written since was first held back.
pub(super) fn may_wait(
    old: &RolloutStatus,
    new: &RolloutStatus,
    rules: Rules,
    held_since: Option<Timestamp>,
    now: Timestamp,
) -> Option<Duration> {
    let Rules {
        interval,
        progress_deadline_seconds,
        stable_in_status_only,
    } = rules;
    if interval.is_zero() || (progress_deadline_seconds as f64) < 10.0 * interval.as_secs_f64() {
        return None;
    }
    // Nothing new: nothing is held. Counting such a reconcile as a hold (a ReplicaSet's own
    // status write wakes the Rollout with nothing to report) started the interval before
    // there was any progress, so the progress that came later was written early, a write
    // of its own just before the one that would have carried it.
    if old == new {
        return None;
    }
    // Only in the middle of an update: a paused, degraded or finished Rollout is not looked
    // at again soon, so what it shows must be current.
    if old.phase != Some(RolloutPhase::Progressing) || new.phase != Some(RolloutPhase::Progressing)
    {
        return None;
    }
    if bookkeeping_removed(old, stable_in_status_only)
        != bookkeeping_removed(new, stable_in_status_only)
    {
        return None;
    }
    // Counted from the later of the last write (which stamped the Progressing condition) and
    // the first hold (now, if this is the first).
    let last = c::find(
        old.conditions.as_deref().unwrap_or_default(),
        Cond::Progressing,
    )?
    .last_update_time
    .as_ref()?
    .0;
    let start = last.max(held_since.unwrap_or(now).min(now));
    let since = now.duration_since(start);
    let interval = jiff::SignedDuration::try_from(interval).ok()?;
    (since >= jiff::SignedDuration::ZERO && since < interval)
        .then(|| Duration::try_from(interval - since).ok())
        .flatten()
}

/// Whether the stable ReplicaSet of `spec` is named nowhere but in the Rollout's status: no
/// router, Service, analysis, experiment or referenced workload acts on a promotion, so it
/// may be held back with the progress that leads to it.
pub(super) fn stable_in_status_only(spec: &RolloutSpec) -> bool {
    let Some(strategy) = spec.strategy.as_ref() else {
        return false;
    };
    let Some(canary) = strategy.canary.as_ref() else {
        return false;
    };
    strategy.blue_green.is_none()
        && spec.workload_ref.is_none()
        && canary.traffic_routing.is_none()
        && canary.canary_service.is_none()
        && canary.stable_service.is_none()
        && canary.analysis.is_none()
        && canary.steps.iter().flatten().all(|step| {
            step.analysis.is_none() && step.experiment.is_none() && step.plugin.is_none()
        })
}

/// The status without what only reports progress: the counts, the phase message, the
/// conditions' update times and messages, and the difference between the two Progressing
/// reasons an update in progress moves between; and the stable ReplicaSet (with the Completed
/// condition that follows it) where nothing but the status names it.
fn bookkeeping_removed(s: &RolloutStatus, stable_in_status_only: bool) -> RolloutStatus {
    let mut s = s.clone();
    if stable_in_status_only {
        s.stable_rs = None;
    }
    s.replicas = None;
    s.updated_replicas = None;
    s.ready_replicas = None;
    s.available_replicas = None;
    s.hpa_replicas = None;
    s.message = None;
    // Timing follows what it times: written with the start, pause or end it records.
    s.duration = None;
    for cond in s.conditions.iter_mut().flatten() {
        cond.last_update_time = None;
        cond.message = None;
        // Completed says whether the current pods are the stable ones: it turns with the
        // promotion, and waits with it.
        if stable_in_status_only && cond.type_ == Some(Cond::Completed) {
            cond.status = None;
            cond.last_transition_time = None;
        }
        if cond.type_ == Some(Cond::Progressing)
            && cond.reason.as_deref() == Some(c::NEW_RS_CREATED)
        {
            cond.reason = Some(c::RS_UPDATED.to_string());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(v: serde_json::Value) -> RolloutStatus {
        serde_json::from_value(v).unwrap()
    }

    fn progressing(reason: &str, at: &str, extra: serde_json::Value) -> RolloutStatus {
        let mut v = json!({
            "phase": "Progressing", "message": "more replicas need to be updated",
            "currentPodHash": "h2", "stableRS": "h1", "observedGeneration": "2",
            "replicas": 1, "updatedReplicas": 0, "readyReplicas": 1, "availableReplicas": 1,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "AvailableReason",
                 "lastUpdateTime": at, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Progressing", "status": "True", "reason": reason,
                 "message": "x", "lastUpdateTime": at,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ],
        });
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        status(v)
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const FIVE: Duration = Duration::from_secs(5);

    /// A five-second interval, a progress deadline, and whether the promotion may wait.
    fn rules(progress_deadline_seconds: i64, stable_in_status_only: bool) -> Rules {
        Rules {
            interval: FIVE,
            progress_deadline_seconds,
            stable_in_status_only,
        }
    }

    #[test]
    fn counts_and_the_progressing_reason_wait_until_the_interval_is_up() {
        let old = progressing("NewReplicaSetCreated", "2026-01-01T00:00:10Z", json!({}));
        let new = progressing(
            "ReplicaSetUpdated",
            "2026-01-01T00:00:11Z",
            json!({"replicas": 2, "updatedReplicas": 1,
                   "message": "old replicas are pending termination"}),
        );
        let secs = Duration::from_secs;
        // First held a second after the last write: it waits the interval from now.
        assert_eq!(
            may_wait(
                &old,
                &new,
                rules(600, false),
                None,
                at("2026-01-01T00:00:11Z")
            ),
            Some(secs(5))
        );
        // Held since then, it is written once the interval is up.
        let held = Some(at("2026-01-01T00:00:11Z"));
        assert_eq!(
            may_wait(
                &old,
                &new,
                rules(600, false),
                held,
                at("2026-01-01T00:00:15Z")
            ),
            Some(secs(1))
        );
        assert_eq!(
            may_wait(
                &old,
                &new,
                rules(600, false),
                held,
                at("2026-01-01T00:00:16Z")
            ),
            None
        );
        // Never sooner than an interval after the last write, whenever it was first held.
        let held_before_the_write = Some(at("2026-01-01T00:00:02Z"));
        assert_eq!(
            may_wait(
                &old,
                &new,
                rules(600, false),
                held_before_the_write,
                at("2026-01-01T00:00:11Z")
            ),
            Some(secs(4))
        );
        // Progress first seen long after the last write (pods slow to come on a busy
        // cluster) waits too, for what comes next.
        assert_eq!(
            may_wait(
                &old,
                &new,
                rules(600, false),
                None,
                at("2026-01-01T00:01:10Z")
            ),
            Some(secs(5))
        );
        // A short progress deadline is never judged on held-back counts.
        assert_eq!(
            may_wait(
                &old,
                &new,
                rules(49, false),
                None,
                at("2026-01-01T00:00:11Z")
            ),
            None
        );
        // No interval: every change is written, as Argo does.
        let now = at("2026-01-01T00:00:11Z");
        assert_eq!(
            may_wait(
                &old,
                &new,
                Rules {
                    interval: Duration::ZERO,
                    progress_deadline_seconds: 600,
                    stable_in_status_only: false
                },
                None,
                now
            ),
            None
        );
    }

    #[test]
    fn a_status_with_nothing_new_is_not_held() {
        let old = progressing("ReplicaSetUpdated", "2026-01-01T00:00:10Z", json!({}));
        let now = at("2026-01-01T00:00:11Z");
        // A reconcile that finds the status up to date holds nothing back, so the interval of
        // the progress that comes later starts when that progress does.
        assert_eq!(may_wait(&old, &old, rules(600, false), None, now), None);
        let new = progressing(
            "ReplicaSetUpdated",
            "2026-01-01T00:00:16Z",
            json!({"readyReplicas": 2, "availableReplicas": 2}),
        );
        assert_eq!(
            may_wait(
                &old,
                &new,
                rules(600, false),
                None,
                at("2026-01-01T00:00:16Z")
            ),
            Some(FIVE)
        );
    }

    #[test]
    fn what_a_reader_acts_on_is_written_at_once() {
        let now = at("2026-01-01T00:00:11Z");
        let old = progressing("ReplicaSetUpdated", "2026-01-01T00:00:10Z", json!({}));
        for (what, extra) in [
            ("a phase", json!({"phase": "Healthy"})),
            ("a stable ReplicaSet", json!({"stableRS": "h2"})),
            ("a new revision", json!({"currentPodHash": "h3"})),
            ("a generation", json!({"observedGeneration": "3"})),
            ("a step", json!({"currentStepIndex": 1})),
            ("an abort", json!({"abort": true})),
        ] {
            let new = progressing("ReplicaSetUpdated", "2026-01-01T00:00:11Z", extra);
            assert_eq!(
                may_wait(&old, &new, rules(600, false), None, now),
                None,
                "{what}"
            );
        }
        // A condition turning.
        let mut new = progressing("ReplicaSetUpdated", "2026-01-01T00:00:11Z", json!({}));
        new.conditions.as_mut().unwrap()[0].status =
            Some(sluice_api::common::ConditionStatus::False);
        assert_eq!(may_wait(&old, &new, rules(600, false), None, now), None);
        // Paused: nothing comes back soon to write the counts.
        let paused = |s: &RolloutStatus| {
            let mut s = s.clone();
            s.phase = Some(RolloutPhase::Paused);
            s
        };
        let counted = progressing(
            "ReplicaSetUpdated",
            "2026-01-01T00:00:11Z",
            json!({"replicas": 2}),
        );
        assert_eq!(
            may_wait(
                &paused(&old),
                &paused(&counted),
                rules(600, false),
                None,
                now
            ),
            None
        );
    }

    #[test]
    fn a_promotion_named_only_in_the_status_waits_for_the_completion() {
        let now = at("2026-01-01T00:00:11Z");
        let old = progressing("ReplicaSetUpdated", "2026-01-01T00:00:10Z", json!({}));
        let promoted = progressing(
            "ReplicaSetUpdated",
            "2026-01-01T00:00:11Z",
            json!({"stableRS": "h2", "replicas": 2, "updatedReplicas": 1,
                   "message": "old replicas are pending termination"}),
        );
        assert_eq!(
            may_wait(&old, &promoted, rules(600, true), None, now),
            Some(Duration::from_secs(5))
        );
        // Where something else acts on it, it is written at once.
        assert_eq!(
            may_wait(&old, &promoted, rules(600, false), None, now),
            None
        );
        // The completion that follows is a phase: written at once, promotion and all.
        let mut healthy = promoted.clone();
        healthy.phase = Some(RolloutPhase::Healthy);
        assert_eq!(may_wait(&old, &healthy, rules(600, true), None, now), None);
    }

    #[test]
    fn only_a_canary_without_routing_services_or_analysis_has_its_stable_in_status_only() {
        let spec = |v: serde_json::Value| -> RolloutSpec { serde_json::from_value(v).unwrap() };
        let canary = |c: serde_json::Value| spec(json!({"strategy": {"canary": c}}));
        assert!(stable_in_status_only(&canary(json!({}))));
        assert!(stable_in_status_only(&canary(
            json!({"steps": [{"setWeight": 50}, {"pause": {"duration": "2s"}}]})
        )));
        for (what, c) in [
            ("traffic routing", json!({"trafficRouting": {"smi": {}}})),
            ("a stable Service", json!({"stableService": "s"})),
            ("a canary Service", json!({"canaryService": "c"})),
            (
                "background analysis",
                json!({"analysis": {"templates": [{"templateName": "t"}]}}),
            ),
            (
                "an analysis step",
                json!({"steps": [{"analysis": {"templates": [{"templateName": "t"}]}}]}),
            ),
            (
                "an experiment step",
                json!({"steps": [{"experiment": {"templates": []}}]}),
            ),
        ] {
            assert!(!stable_in_status_only(&canary(c)), "{what}");
        }
        assert!(!stable_in_status_only(&spec(
            json!({"strategy": {"blueGreen": {"activeService": "a"}}})
        )));
        assert!(!stable_in_status_only(&spec(json!({
            "strategy": {"canary": {}},
            "workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}
        }))));
    }
}
