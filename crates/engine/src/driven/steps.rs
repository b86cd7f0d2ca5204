//! The steps of an update in progress: `setWeight` (and, for a DaemonSet, `setCanaryScale`'s
//! node count) moves its share of the pods onto the update revision and completes once they
//! run it and are ready; `pause` pauses as for any canary (timed, or until promoted);
//! `analysis` completes once its run is Successful; past the last step (or on `promote
//! --full`) every pod moves and the update completes once every pod runs the new revision.

use sluice_api::rollout::{CanaryStepAction, PauseReason, RolloutPause, RolloutStatus};

use super::update::{POD_RECHECK, Update};
use super::{Driven, Target};
use crate::controller_revision::{find_revision, revision_number};
use crate::plan::{Event, Plan, set_requeue};
use crate::steps;
use crate::waits::Wait;

impl<W: Driven> Update<'_, W> {
    /// Advances the update as far as the workload allows in this reconcile.
    pub(super) fn step_machine(&mut self, plan: &mut Plan, update: &str) {
        if self.ro.spec.paused == Some(true) {
            // Paused by a user: nothing moves.
            plan.waits.push(Wait::PausedByUser);
            return;
        }
        if self.held_by_analysis(plan) {
            return;
        }
        let steps_len = steps::steps(self.canary).len() as i32;
        loop {
            let status = &mut plan.status;
            let index = status.current_step_index.unwrap_or(0).max(0);
            let promote_full = status.promote_full == Some(true);
            let past = index >= steps_len || promote_full;
            let target = if past {
                Target::Weight(100)
            } else {
                target_at(self.canary, index)
            };
            let reached = self.w.advance(update, target);
            if past {
                if reached && self.w.all_updated() {
                    self.complete(status, update, steps_len, promote_full);
                    self.w.settle();
                } else {
                    self.wait_for_pods(plan, target);
                }
                return;
            }
            let Some(step) = steps::current_step(self.canary, index) else {
                return;
            };
            let done = match step.action() {
                Some(CanaryStepAction::SetWeight(_) | CanaryStepAction::SetCanaryScale(_)) => {
                    if !reached {
                        self.wait_for_pods(plan, target);
                    }
                    reached
                }
                Some(CanaryStepAction::Pause(pause)) => self.pause_step(plan, pause, index),
                Some(CanaryStepAction::Analysis(analysis)) => {
                    self.analysis_step(plan, analysis, index)
                }
                // Refused by validation: never reached.
                _ => false,
            };
            if !done {
                return;
            }
            let status = &mut plan.status;
            crate::pause::remove_pause(status, &PauseReason::CanaryPauseStep);
            status.controller_pause = None;
            status.current_step_index = Some(index + 1);
            self.events.push(Event::normal(
                "RolloutStepCompleted",
                format!(
                    "Rollout step {}/{steps_len} completed ({})",
                    index + 1,
                    steps::describe(step.action())
                ),
            ));
        }
    }

    /// The update revision is now the stable one.
    fn complete(&mut self, status: &mut RolloutStatus, update: &str, steps_len: i32, full: bool) {
        let why = if full {
            "Full promotion requested".to_string()
        } else {
            format!("Completed all {steps_len} canary steps")
        };
        let revision = revision_number(find_revision(self.revisions, self.w.name(), update));
        status.stable_rs = Some(update.to_string());
        status.promote_full = None;
        status.current_step_index = Some(steps_len);
        self.events.push(Event::normal(
            "RolloutCompleted",
            format!("Rollout completed update to revision {revision} ({update}): {why}"),
        ));
    }

    fn wait_for_pods(&self, plan: &mut Plan, target: Target) {
        set_requeue(&mut plan.requeue_after, POD_RECHECK);
        let counts = self.w.counts("", None);
        plan.waits.push(Wait::PodsNotAvailable {
            replica_set: self.w.waiting_for(target),
            wanted: self.w.size(),
            available: counts.ready,
        });
    }

    /// A pause step, as for any canary (`crate::pause::pause_step`). Returns whether it is
    /// done.
    fn pause_step(&mut self, plan: &mut Plan, pause: &RolloutPause, index: i32) -> bool {
        let Plan {
            status,
            requeue_after,
            waits,
            ..
        } = plan;
        crate::pause::pause_step(
            status,
            requeue_after,
            waits,
            &mut self.events,
            pause,
            index,
            self.now,
        )
    }
}

/// What the steps ask for at step `index`: the last `setWeight` or `setCanaryScale.replicas`
/// at or before it (a weight of 0 before any).
fn target_at(canary: &sluice_api::rollout::CanaryStrategy, index: i32) -> Target {
    let all = steps::steps(canary);
    let end = usize::try_from(index.saturating_add(1))
        .unwrap_or(0)
        .min(all.len());
    all[..end]
        .iter()
        .rev()
        .find_map(|s| match s.action() {
            Some(CanaryStepAction::SetWeight(w)) => Some(Target::Weight(w)),
            Some(CanaryStepAction::SetCanaryScale(scale)) => scale.replicas.map(Target::Count),
            _ => None,
        })
        .unwrap_or(Target::Weight(0))
}
