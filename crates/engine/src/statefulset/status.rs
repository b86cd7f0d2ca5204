//! What the Rollout reports of its StatefulSet: the counts (`updatedReplicas` are the pods on
//! the Rollout's current revision), the selector, and the conditions as the canary path writes
//! them, so that `kubectl sluice get rollout`, the phase and Argo CD's health read the same.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use sluice_api::rollout::{RolloutConditionType as Cond, RolloutStatus};

use super::decide::Update;
use crate::conditions::{self as c, FALSE, TRUE, UNKNOWN};
use crate::plan::{Event, Plan};

impl Update<'_> {
    /// `revisions`: the hashes of the update and current revisions, when known.
    pub(super) fn fill_counts(&self, status: &mut RolloutStatus, revisions: Option<(&str, &str)>) {
        let sts = self.sts;
        status.replicas = Some(sts.status_replicas());
        status.ready_replicas = Some(sts.ready());
        status.available_replicas = Some(sts.available());
        let pod_hash = status.current_pod_hash.as_deref();
        status.updated_replicas = Some(match revisions {
            Some((update, _)) if Some(update) == pod_hash => sts.updated(),
            Some((_, current)) if Some(current) == pod_hash => sts.current(),
            _ => 0,
        });
        status.selector =
            serde_json::from_value::<LabelSelector>(sts.0["spec"]["selector"].clone())
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
        let name = self.sts.name().to_string();
        let status = &mut plan.status;
        let replicas = self.sts.replicas();
        let available = self.sts.available();
        let pod_hash = status.current_pod_hash.clone().unwrap_or_default();
        let paused = status
            .pause_conditions
            .as_ref()
            .is_some_and(|p| !p.is_empty())
            || self.ro.spec.paused == Some(true);
        let mut conds = status.conditions.take().unwrap_or_default();

        c::set_available(&mut conds, available >= replicas, now);

        let progressing = format!("StatefulSet \"{name}\" revision {pod_hash}");
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
        } else {
            c::set(
                &mut conds,
                Cond::Progressing,
                TRUE,
                c::RS_UPDATED,
                format!("{progressing} is progressing."),
                now,
                false,
            );
        }

        c::set_paused(&mut conds, paused, aborted, now, &mut self.events);
        c::set_completed(&mut conds, completed, available >= replicas, now);
        status.conditions = Some(conds);
    }
}
