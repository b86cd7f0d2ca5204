//! The Rollout's conditions after a reconcile: Available, Progressing (with the progress
//! deadline and `progressDeadlineAbort`), Paused, Completed and Healthy.

use crate::waits::Wait;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::rollout::{RolloutCondition, RolloutConditionType as Cond, RolloutStatus};

use super::World;
use super::spec::Strategy;
use crate::conditions::{self as c, FALSE, TRUE, UNKNOWN};
use crate::labels::SCALE_DOWN_DEADLINE;
use crate::observed::ReplicaSetExt;
use crate::plan::{Event, set_requeue};
use crate::progress_deadline::{self, Deadline};
use crate::steps;

/// What the reconcile did to the update, as the conditions need it.
pub(super) struct Progress {
    pub(super) aborted: bool,
    /// Why an analysis aborted the update, when one did in this reconcile.
    pub(super) abort_message: Option<String>,
    pub(super) created: bool,
    pub(super) progressed: bool,
    pub(super) completed: bool,
    pub(super) revision: i64,
}

/// The counts whose change is progress.
pub(super) fn counts_of_status(
    s: &RolloutStatus,
) -> (Option<i32>, Option<i32>, Option<i32>, Option<i32>) {
    (
        s.replicas,
        s.updated_replicas,
        s.ready_replicas,
        s.available_replicas,
    )
}

impl World<'_> {
    pub(super) fn conditions(
        &self,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        requeue: &mut Option<Duration>,
        progress: Progress,
    ) -> Option<Wait> {
        let now = self.now;
        let mut wait = None;
        let mut conds = status.conditions.take().unwrap_or_default();
        let rs_name = self.new_rs_name();
        let r = self.spec.replicas;
        let available = status.available_replicas.unwrap_or(0);
        let completed = progress.completed;
        let paused = self.ro.spec.paused == Some(true)
            || status
                .pause_conditions
                .as_ref()
                .is_some_and(|p| !p.is_empty());

        // As Argo: every desired pod available (a canary counts all its ReplicaSets' pods, a
        // blue-green Rollout its active ReplicaSet's), not a Deployment's replicas less
        // maxUnavailable.
        c::set_available(&mut conds, available >= r, now);

        // Progressing, and the progress deadline.
        let was_aborted = c::has_reason(&conds, Cond::Progressing, c::ROLLOUT_ABORTED);
        let was_completed = c::find(&conds, Cond::Completed)
            .is_some_and(|cond| cond.status.as_ref().is_some_and(|s| s.as_str() == TRUE));
        if progress.aborted {
            let generic = format!("Rollout aborted update to revision {}", progress.revision);
            // Keep the reason an earlier reconcile recorded (an analysis verdict, a deadline).
            let message = match (&progress.abort_message, c::find(&conds, Cond::Progressing)) {
                (Some(detail), _) => format!("{generic}: {detail}"),
                (None, Some(cond))
                    if was_aborted
                        && cond
                            .message
                            .as_deref()
                            .is_some_and(|m| m.starts_with(generic.as_str())) =>
                {
                    cond.message.clone().unwrap_or(generic)
                }
                _ => generic,
            };
            // The event carries the condition's message, the analysis verdict included.
            if !was_aborted {
                events.push(Event::warning("RolloutAborted", message.clone()));
            }
            c::set(
                &mut conds,
                Cond::Progressing,
                FALSE,
                c::ROLLOUT_ABORTED,
                message,
                now,
                false,
            );
        } else if paused && !was_completed {
            // A pause of a Rollout that completed leaves Progressing as it is, as in Argo.
            c::set(
                &mut conds,
                Cond::Progressing,
                UNKNOWN,
                c::ROLLOUT_PAUSED,
                "Rollout is paused",
                now,
                false,
            );
        } else if completed {
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::NEW_RS_AVAILABLE,
                available_message(&rs_name),
                now,
                false,
            );
        } else if progress.created && !self.strategy_progressed(status) {
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::NEW_RS_CREATED,
                format!("Created new replica set \"{rs_name}\""),
                now,
                true,
            );
        } else if progress.progressed
            || was_aborted
            || c::has_reason(&conds, Cond::Progressing, c::ROLLOUT_PAUSED)
            || another_revision_available(&conds, &rs_name)
            || c::find(&conds, Cond::Progressing).is_none()
            || self.timed_out_another_revision(&conds, &rs_name)
        {
            // Fresh progress, or the first reconcile after a resume or retry: the deadline
            // counts from now. A Progressing condition still saying the previous revision is
            // available means the status write of the reconcile that created this revision's
            // ReplicaSet was lost (a conflict): without this its deadline would never run. (One
            // saying this revision is available stays, as in Argo: a scale of a paused Rollout
            // that completed is no progress.)
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::RS_UPDATED,
                format!("ReplicaSet \"{rs_name}\" is progressing."),
                now,
                true,
            );
        } else if !self.at_indefinite_step(status)
            && !self.was_paused()
            && !self.waiting_for_scale_down()
        {
            wait = self.check_deadline(status, &mut conds, events, requeue);
        }

        // As Argo, the Paused condition stays as it is while the Progressing condition says an
        // earlier reconcile aborted the update; in the pass that aborts it, it follows the
        // pause the Rollout was in before the abort lifted it (Argo looks at the status it
        // read), so an update paused when aborted stays Paused=True.
        if !was_aborted {
            let was_paused = self.ro.spec.paused == Some(true)
                || self
                    .ro
                    .status
                    .as_ref()
                    .and_then(|s| s.pause_conditions.as_ref())
                    .is_some_and(|p| !p.is_empty());
            let paused = if progress.aborted { was_paused } else { paused };
            c::set_paused(&mut conds, paused, now);
        }
        // `RolloutResumed` as Argo sends it: when the pause conditions (a step's, an analysis',
        // the controller's) are lifted other than by an abort. A user's `spec.paused` has no
        // event of its own.
        let had_pause_conditions = self
            .ro
            .status
            .as_ref()
            .and_then(|s| s.pause_conditions.as_ref())
            .is_some_and(|p| !p.is_empty());
        let has_pause_conditions = status
            .pause_conditions
            .as_ref()
            .is_some_and(|p| !p.is_empty());
        if had_pause_conditions && !has_pause_conditions && status.aborted_at.is_none() {
            events.push(Event::normal("RolloutResumed", "Rollout is resumed"));
        }
        // As Argo: Completed says the current pod template is the stable one (an old
        // ReplicaSet may still be up within its scale-down delay); Healthy needs all of the
        // update done and the Rollout not paused.
        let stable_is_current = status
            .stable_rs
            .as_deref()
            .is_some_and(|h| h == self.spec.pod_hash);
        c::set_completed(
            &mut conds,
            stable_is_current,
            completed && available >= r && !paused,
            now,
        );
        status.conditions = Some(conds);
        wait
    }

    /// Whether the update waits at an `experiment` or `analysis` step. How long those take is
    /// up to the Experiment or AnalysisRun, whose verdict ends the step, so no progress is
    /// expected meanwhile: as in Argo, the progress deadline does not run there.
    fn at_indefinite_step(&self, status: &RolloutStatus) -> bool {
        matches!(self.spec.strategy, Strategy::Canary(_))
            && steps::current_step(self.spec.canary(), status.current_step_index.unwrap_or(0))
                .is_some_and(|s| s.experiment.is_some() || s.analysis.is_some())
    }

    /// Whether the status read says Paused: as in Argo, no progress is expected of a paused
    /// Rollout (a user's pause of a completed one included), so its deadline does not run.
    fn was_paused(&self) -> bool {
        self.ro
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .and_then(|conds| c::find(conds, Cond::Paused))
            .is_some_and(|cond| cond.status.as_ref().is_some_and(|s| s.as_str() == TRUE))
    }

    /// Whether an older ReplicaSet waits out its scale-down delay (`scale-down-deadline`):
    /// the update is done but for that, so no progress is expected meanwhile and, as in Argo,
    /// the progress deadline does not run (a Rollout must not be aborted after its promotion
    /// because the previous version is kept up for a while).
    fn waiting_for_scale_down(&self) -> bool {
        self.older.iter().any(|rs| {
            rs.annotation(SCALE_DOWN_DEADLINE)
                .is_some_and(|d| !d.is_empty())
        })
    }

    /// Progressing with no progress since `lastUpdateTime`: past the deadline it becomes
    /// `ProgressDeadlineExceeded`, and with `progressDeadlineAbort` the update is aborted.
    /// Returns when the deadline fires, or that it has.
    fn check_deadline(
        &self,
        status: &mut RolloutStatus,
        conds: &mut Vec<RolloutCondition>,
        events: &mut Vec<Event>,
        requeue: &mut Option<Duration>,
    ) -> Option<Wait> {
        let cond = c::find(conds, Cond::Progressing).cloned()?;
        // Already timed out: `progressDeadlineAbort` is evaluated on every reconcile, so turning
        // it on after the deadline passed aborts the update too.
        if cond.reason.as_deref() == Some(c::PROGRESS_DEADLINE_EXCEEDED) {
            if self.ro.spec.progress_deadline_abort == Some(true) {
                self.abort_on_deadline(status, conds, events, requeue);
            }
            return Some(Wait::ProgressDeadlineExceeded {
                message: cond.message.clone().unwrap_or_default(),
            });
        }
        let is_true = cond.status.as_ref().is_some_and(|s| s.as_str() == TRUE);
        if !is_true || cond.reason.as_deref() == Some(c::NEW_RS_AVAILABLE) {
            return None;
        }
        if let Deadline::Running { left, wait } = progress_deadline::judge(self.ro, &cond, self.now)
        {
            set_requeue(requeue, left);
            return Some(wait);
        }
        let rs_name = self.new_rs_name();
        let message = format!("ReplicaSet \"{rs_name}\" has timed out progressing.");
        c::set(
            conds,
            Cond::Progressing,
            FALSE,
            c::PROGRESS_DEADLINE_EXCEEDED,
            message.clone(),
            self.now,
            false,
        );
        // As Argo: the timeout itself is told by the condition only; with
        // `progressDeadlineAbort` the abort is announced with the timeout's message.
        if self.ro.spec.progress_deadline_abort == Some(true) {
            self.abort_on_deadline(status, conds, events, requeue);
        }
        Some(Wait::ProgressDeadlineExceeded { message })
    }

    /// Whether the Progressing condition says an earlier revision's ReplicaSet timed out: the
    /// status write of the reconcile that created this revision's ReplicaSet was lost (a
    /// conflict), and that old timeout must neither stop nor abort the new revision.
    fn timed_out_another_revision(&self, conds: &[RolloutCondition], rs_name: &str) -> bool {
        c::find(conds, Cond::Progressing).is_some_and(|cond| {
            cond.reason.as_deref() == Some(c::PROGRESS_DEADLINE_EXCEEDED)
                && cond.message.as_deref()
                    != Some(format!("ReplicaSet \"{rs_name}\" has timed out progressing.").as_str())
        })
    }

    /// `progressDeadlineAbort`: the timed-out update is aborted, with a `RolloutAborted`
    /// warning that carries the timeout's message. As in Argo, the next pass handles the abort
    /// as any other: it moves the ReplicaSets back, turns Progressing to `RolloutAborted`
    /// ("Rollout aborted update to revision N") and says so in a second `RolloutAborted`.
    fn abort_on_deadline(
        &self,
        status: &mut RolloutStatus,
        conds: &[RolloutCondition],
        events: &mut Vec<Event>,
        requeue: &mut Option<Duration>,
    ) {
        if status.abort == Some(true) {
            return;
        }
        let message = c::find(conds, Cond::Progressing)
            .and_then(|cond| cond.message.clone())
            .unwrap_or_default();
        status.abort = Some(true);
        status.aborted_at = Some(Time(self.now));
        status.pause_conditions = None;
        status.controller_pause = None;
        events.push(Event::warning("RolloutAborted", message));
        set_requeue(requeue, Duration::from_secs(1));
    }
}

impl World<'_> {
    /// Argo's progress of the strategy between the status read and `new`: a canary's step
    /// index moving (a new template resets it) or its step list or stable pods changing, a
    /// blue-green Rollout's Services switching. Argo judges Progressing after it recorded the
    /// new ReplicaSet, so such progress turns `NewReplicaSetCreated` into `ReplicaSetUpdated`
    /// in the same pass.
    fn strategy_progressed(&self, new: &RolloutStatus) -> bool {
        let old = self.ro.status.clone().unwrap_or_default();
        let step_moved = matches!(
            (old.current_step_index, new.current_step_index),
            (Some(a), Some(b)) if a != b
        );
        let selector = |s: &RolloutStatus| {
            s.blue_green
                .as_ref()
                .map(|b| (b.active_selector.clone(), b.preview_selector.clone()))
        };
        step_moved
            || old.current_step_hash != new.current_step_hash
            || old.stable_rs != new.stable_rs
            || (matches!(self.spec.strategy, Strategy::BlueGreen(_))
                && selector(&old) != selector(new))
    }
}

/// Whether the Progressing condition says that a ReplicaSet other than `rs_name` (an earlier
/// revision's) has successfully progressed.
fn another_revision_available(conds: &[RolloutCondition], rs_name: &str) -> bool {
    c::find(conds, Cond::Progressing).is_some_and(|cond| {
        cond.reason.as_deref() == Some(c::NEW_RS_AVAILABLE)
            && cond.message.as_deref() != Some(available_message(rs_name).as_str())
    })
}

/// Argo's message for a revision whose ReplicaSet has successfully progressed.
fn available_message(rs_name: &str) -> String {
    format!("ReplicaSet \"{rs_name}\" has successfully progressed.")
}
