//! The BlueGreenPause: entered once the preview is up and analysed, and, with
//! `autoPromotionSeconds`, ended by the clock.

use std::time::Duration;

use sluice_api::rollout::{PauseReason, RolloutStatus};

use crate::pause::{add_pause, has_pause};
use crate::plan::{Event, Plan, set_requeue};
use crate::reconcile::world::World;

impl World<'_> {
    pub(super) fn add_blue_green_pause(&self, status: &mut RolloutStatus, events: &mut Vec<Event>) {
        if has_pause(status, &PauseReason::BlueGreenPause) {
            return;
        }
        events.push(add_pause(status, PauseReason::BlueGreenPause, self.now));
    }

    /// autoPromotionSeconds: pause on arrival, promote once the pause is that old.
    pub(super) fn auto_promotion_due(
        &self,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        plan: &mut Plan,
        delay_secs: i32,
    ) -> bool {
        let started = status
            .pause_conditions
            .iter()
            .flatten()
            .find(|p| p.reason.as_ref() == Some(&PauseReason::BlueGreenPause))
            .and_then(|p| p.start_time.as_ref().map(|t| t.0));
        let Some(started) = started else {
            self.add_blue_green_pause(status, events);
            set_requeue(
                &mut plan.requeue_after,
                Duration::from_secs(delay_secs as u64),
            );
            return false;
        };
        let elapsed = Duration::try_from(self.now.duration_since(started)).unwrap_or_default();
        let delay = Duration::from_secs(delay_secs.max(0) as u64);
        if elapsed >= delay {
            true
        } else {
            set_requeue(&mut plan.requeue_after, delay - elapsed);
            false
        }
    }
}
