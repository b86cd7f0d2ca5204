//! Scale-down after a delay (`scaleDownDelaySeconds`, `abortScaleDownDelaySeconds`): the
//! deadline is recorded in the `scale-down-deadline` annotation and only ever compared with the
//! current time, so an expired or malformed one never blocks anything.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;

use super::world::World;
use crate::labels::SCALE_DOWN_DEADLINE;
use crate::observed::ReplicaSetExt;
use crate::plan::{Action, Event, Plan, set_requeue};

/// Parses a `scale-down-deadline` value; `None` for anything that is not an RFC 3339 time.
pub fn parse_deadline(value: &str) -> Option<Timestamp> {
    value.parse::<Timestamp>().ok()
}

/// Whether `rs` is waiting out a scale-down delay: its deadline is readable and still ahead,
/// so its pods are up. A rollback to such a ReplicaSet is fast-tracked.
pub(super) fn within_scale_down_delay(rs: &ReplicaSet, now: Timestamp) -> bool {
    rs.annotation(SCALE_DOWN_DEADLINE)
        .and_then(parse_deadline)
        .is_some_and(|deadline| deadline > now)
}

/// What to do with a ReplicaSet that is to be scaled down after a delay.
#[derive(Debug, PartialEq, Eq)]
enum Delayed {
    /// No deadline yet: record one.
    Annotate(Timestamp),
    /// The deadline is in the future.
    Wait(Duration),
    /// Expired, or unreadable (an empty or garbled value must never keep pods up): scale down.
    ScaleDownNow,
}

fn delayed_scale_down(rs: &ReplicaSet, now: Timestamp, delay_secs: i32) -> Delayed {
    match rs.annotation(SCALE_DOWN_DEADLINE) {
        None => {
            Delayed::Annotate(now + jiff::SignedDuration::from_secs(i64::from(delay_secs.max(0))))
        }
        Some(value) => match parse_deadline(value) {
            Some(deadline) if deadline > now => {
                Delayed::Wait(Duration::try_from(deadline.duration_since(now)).unwrap_or_default())
            }
            _ => Delayed::ScaleDownNow,
        },
    }
}

impl World<'_> {
    /// Records a deadline on `rs`, or scales it to 0 once the deadline has passed (removing
    /// the annotation in the same write). Returns whether it scaled.
    pub(super) fn scale_down_after(
        &self,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        rs: &ReplicaSet,
        delay_secs: i32,
    ) -> bool {
        match delayed_scale_down(rs, self.now, delay_secs) {
            Delayed::Annotate(deadline) => {
                let mut a = BTreeMap::new();
                a.insert(SCALE_DOWN_DEADLINE.to_string(), Some(deadline.to_string()));
                plan.actions.push(Action::AnnotateReplicaSet {
                    name: rs.name().to_string(),
                    resource_version: rs.metadata.resource_version.clone(),
                    annotations: a,
                });
                set_requeue(
                    &mut plan.requeue_after,
                    Duration::from_secs(delay_secs.max(1) as u64),
                );
                false
            }
            Delayed::Wait(left) => {
                set_requeue(&mut plan.requeue_after, left);
                false
            }
            Delayed::ScaleDownNow if self.traffic_floor(rs) > 0 => {
                // A router still sends it traffic: look again once that has moved.
                set_requeue(
                    &mut plan.requeue_after,
                    super::scaling::HELD_BY_TRAFFIC_RETRY,
                );
                false
            }
            Delayed::ScaleDownNow => {
                let mut extra = BTreeMap::new();
                extra.insert(SCALE_DOWN_DEADLINE.to_string(), None);
                let rev = rs.revision().unwrap_or(0);
                self.scale_with(plan, events, rs, 0, rev, extra)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn rs_with(deadline: Option<&str>) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                annotations: deadline
                    .map(|d| [(SCALE_DOWN_DEADLINE.to_string(), d.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn deadlines_compare_with_now_and_never_block_when_unreadable() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            delayed_scale_down(&rs_with(None), now, 30),
            Delayed::Annotate("2026-01-01T00:00:30Z".parse().unwrap())
        );
        assert_eq!(
            delayed_scale_down(&rs_with(Some("2026-01-01T00:00:10Z")), now, 30),
            Delayed::Wait(Duration::from_secs(10))
        );
        for stale in [
            "2025-12-31T23:59:59Z",
            "",
            "garbage",
            "2026-01-01T00:00:00Z",
        ] {
            assert_eq!(
                delayed_scale_down(&rs_with(Some(stale)), now, 30),
                Delayed::ScaleDownNow,
                "{stale:?}"
            );
        }
    }

    #[test]
    fn only_a_readable_future_deadline_is_a_pending_delay() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert!(within_scale_down_delay(
            &rs_with(Some("2026-01-01T00:00:01Z")),
            now
        ));
        for not_pending in [
            None,
            Some("2026-01-01T00:00:00Z"),
            Some("2025-12-31T23:59:59Z"),
            Some(""),
            Some("garbage"),
        ] {
            assert!(
                !within_scale_down_delay(&rs_with(not_pending), now),
                "{not_pending:?}"
            );
        }
    }

    #[test]
    fn deadline_is_written_as_rfc3339_utc_seconds() {
        let now: Timestamp = "2024-08-01T15:13:06Z".parse().unwrap();
        let Delayed::Annotate(t) = delayed_scale_down(&rs_with(None), now, 30) else {
            panic!("expected a new deadline");
        };
        assert_eq!(t.to_string(), "2024-08-01T15:13:36Z");
    }
}
