//! What the Rollout reports of the workload it drives: the counts (`updatedReplicas` are the
//! pods on the Rollout's current revision), the selector, and the conditions as the canary
//! path writes them, so that `kubectl sluice get rollout`, the phase and Argo CD's health read
//! the same.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use sluice_api::rollout::{RolloutCondition, RolloutConditionType as Cond, RolloutStatus};

use super::Driven;
use super::update::Update;
use crate::conditions::{self as c, FALSE, TRUE, UNKNOWN};
use crate::plan::{Event, Plan, set_requeue};
use crate::progress_deadline::{self, Deadline};
use crate::steps;
use crate::waits::Wait;

impl<W: Driven> Update<'_, W> {
    /// `revisions`: the hashes of the update and current revisions, when known.
    pub(super) fn fill_counts(&self, status: &mut RolloutStatus, revisions: Option<(&str, &str)>) {
        let counts = self.w.counts(
            status.current_pod_hash.as_deref().unwrap_or_default(),
            revisions,
        );
        status.replicas = Some(counts.replicas);
        status.ready_replicas = Some(counts.ready);
        status.available_replicas = Some(counts.available);
        status.updated_replicas = Some(counts.updated);
        status.selector =
            serde_json::from_value::<LabelSelector>(self.w.object()["spec"]["selector"].clone())
                .ok()
                .map(|s| sluice_api::label_selector::format_selector(&s));
    }

    /// Progressing, Available, Paused, Completed and Healthy, with Argo's reasons.
    pub(super) fn conditions(
        &mut self,
        plan: &mut Plan,
        aborted: bool,
        completed: bool,
        revision: i64,
    ) {
        let now = self.now;
        let name = self.w.name().to_string();
        let kind = W::KIND;
        let status = &mut plan.status;
        let replicas = self.w.size();
        let available = self.w.counts("", None).available;
        let pod_hash = status.current_pod_hash.clone().unwrap_or_default();
        let paused = status
            .pause_conditions
            .as_ref()
            .is_some_and(|p| !p.is_empty())
            || self.ro.spec.paused == Some(true);
        let mut conds = status.conditions.take().unwrap_or_default();

        c::set_available(&mut conds, available >= replicas, now);

        let progressing = format!("{kind} \"{name}\" revision {pod_hash}");
        if aborted {
            let was_aborted = c::has_reason(&conds, Cond::Progressing, c::ROLLOUT_ABORTED);
            let generic = format!("Rollout aborted update to revision {revision}");
            // The analysis verdict that aborted, as the canary path words it; kept while the
            // update stays aborted.
            let message = match (
                &self.analysis.abort_message,
                c::find(&conds, Cond::Progressing),
            ) {
                (Some(detail), _) => format!("{generic}: {detail}"),
                (None, Some(cond)) if was_aborted => cond
                    .message
                    .clone()
                    .filter(|m| m.starts_with(generic.as_str()))
                    .unwrap_or(generic),
                _ => generic,
            };
            if !was_aborted {
                self.events
                    .push(Event::warning("RolloutAborted", message.clone()));
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
        } else if paused {
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
                format!("{progressing} has successfully progressed."),
                now,
                false,
            );
        } else if self.progressed(status)
            || c::find(&conds, Cond::Progressing).is_none_or(|cond| {
                cond.reason.as_deref() != Some(c::RS_UPDATED)
                    && cond.reason.as_deref() != Some(c::PROGRESS_DEADLINE_EXCEEDED)
            })
        {
            // Fresh progress, or the first reconcile of an update, after a pause or a retry:
            // the deadline counts from now.
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::RS_UPDATED,
                format!("{progressing} is progressing."),
                now,
                true,
            );
        } else if !self.at_analysis_step(status) {
            self.check_deadline(plan, &mut conds, revision);
        }
        let status = &mut plan.status;

        let aborted = aborted || status.abort == Some(true);
        if c::set_paused(&mut conds, paused, now) && !aborted {
            self.events
                .push(crate::Event::normal("RolloutResumed", "Rollout is resumed"));
        }
        c::set_completed(&mut conds, completed, available >= replicas, now);
        status.conditions = Some(conds);
    }

    /// Whether the update moved since the status this reconcile started from: a step, or
    /// the workload's counts.
    fn progressed(&self, status: &RolloutStatus) -> bool {
        let before = self.ro.status.clone().unwrap_or_default();
        let counts = |s: &RolloutStatus| {
            (
                s.current_step_index,
                s.replicas,
                s.updated_replicas,
                s.ready_replicas,
                s.available_replicas,
            )
        };
        counts(&before) != counts(status)
    }

    /// An analysis step takes as long as its run: as for ReplicaSets (and in Argo), the
    /// deadline does not run there.
    fn at_analysis_step(&self, status: &RolloutStatus) -> bool {
        steps::current_step(self.canary, status.current_step_index.unwrap_or(0))
            .is_some_and(|s| s.analysis.is_some())
    }

    /// `progressDeadlineSeconds` without progress since the Progressing condition's
    /// `lastUpdateTime`: `ProgressDeadlineExceeded`, and with `progressDeadlineAbort` the
    /// update is aborted (recorded now; the stable template goes back on the next pass).
    fn check_deadline(
        &mut self,
        plan: &mut Plan,
        conds: &mut Vec<RolloutCondition>,
        revision: i64,
    ) {
        let Some(cond) = c::find(conds, Cond::Progressing).cloned() else {
            return;
        };
        let name = self.w.name().to_string();
        let message = format!("{} \"{name}\" has timed out progressing.", W::KIND);
        let abort = self.ro.spec.progress_deadline_abort == Some(true);
        if cond.reason.as_deref() != Some(c::PROGRESS_DEADLINE_EXCEEDED) {
            if let Deadline::Running { left, wait } =
                progress_deadline::judge(self.ro, &cond, self.now)
            {
                set_requeue(&mut plan.requeue_after, left);
                plan.waits.push(wait);
                return;
            }
            c::set(
                conds,
                Cond::Progressing,
                FALSE,
                c::PROGRESS_DEADLINE_EXCEEDED,
                message.clone(),
                self.now,
                false,
            );
            self.events
                .push(Event::warning("RolloutTimedOut", message.clone()));
        }
        if abort && plan.status.abort != Some(true) {
            let status = &mut plan.status;
            status.abort = Some(true);
            status.aborted_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                self.now,
            ));
            status.pause_conditions = None;
            status.controller_pause = None;
            let aborted = format!("Rollout aborted update to revision {revision}");
            self.events
                .push(Event::warning("RolloutAborted", aborted.clone()));
            c::set(
                conds,
                Cond::Progressing,
                FALSE,
                c::ROLLOUT_ABORTED,
                format!("{aborted}: {message}"),
                self.now,
                false,
            );
            set_requeue(&mut plan.requeue_after, Duration::from_secs(1));
        }
        plan.waits.push(Wait::ProgressDeadlineExceeded { message });
    }
}
