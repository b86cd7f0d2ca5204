//! Blue-green: the new ReplicaSet comes up beside the active one (behind the preview
//! Service), and the active Service is switched only once the new pods are all available.
//! Old ReplicaSets go away after `scaleDownDelaySeconds` (see `scale_down_delay`). The phases
//! of one reconcile: size the new and active ReplicaSets, route the preview Service, pass the
//! promotion gates and switch the active Service, scale down the previous ReplicaSets.

mod pause;

use crate::waits::Wait;
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use sluice_api::rollout::{BlueGreenStatus, BlueGreenStrategy, PauseReason, RolloutStatus};

use super::analysis::{AnalysisState, Role, Verdict};
use super::scale_down_delay::within_scale_down_delay;
use super::spec::Strategy;
use super::world::World;
use super::{Outcome, Update};
use crate::labels::{POD_TEMPLATE_HASH, SCALE_DOWN_DEADLINE};
use crate::observed::ReplicaSetExt;
use crate::pause::remove_pause;
use crate::plan::{Action, Event, Plan};

/// Default `scaleDownDelaySeconds` and `abortScaleDownDelaySeconds`.
const DEFAULT_SCALE_DOWN_DELAY: i32 = 30;

/// The Services a blue-green Rollout routes through.
pub(super) struct Services {
    active: Service,
    preview: Option<Service>,
}

/// What a blue-green reconcile works from, settled before its phases.
struct Facts<'b> {
    bg: &'b BlueGreenStrategy,
    services: &'b Services,
    /// The Rollout's name, for the managed-by annotation of switched Services.
    rollout: String,
    /// The pod hash of the current template.
    hash: String,
    /// The hash the active Service selected when observed.
    active_hash: Option<String>,
    /// The active Service already selects the current template's pods.
    is_active: bool,
    /// The preview is checked (promoted by a user or promote-full): scale to full size.
    checkpoint: bool,
    /// Back to a ReplicaSet whose pods are still up within its scale-down delay: a fast
    /// rollback, switched to as soon as it is fully available and stable at once (no pause,
    /// no pre- or post-promotion analysis), as Argo does.
    fast_tracked: bool,
    preview_count: i32,
    /// The size the new ReplicaSet is to have now.
    new_target: i32,
}

fn selected_hash(svc: &Service) -> Option<&str> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.get(POD_TEMPLATE_HASH))
        .map(String::as_str)
}

impl World<'_> {
    /// Looks up the Services a blue-green Rollout names; a missing one is a spec problem the
    /// user must fix, reported as such.
    pub(super) fn blue_green_services(&self) -> Result<Option<Services>, String> {
        let Strategy::BlueGreen(bg) = &self.spec.strategy else {
            return Ok(None);
        };
        let find = |field: &str, name: &str| {
            self.services
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name))
                .cloned()
                .ok_or_else(|| {
                    format!(
                        "spec.strategy.blueGreen.{field}: Invalid value: \"{name}\": service \"{name}\" not found"
                    )
                })
        };
        let active = find(
            "activeService",
            bg.active_service.as_deref().unwrap_or_default(),
        )?;
        let preview = match bg.preview_service.as_deref().filter(|n| !n.is_empty()) {
            Some(name) => Some(find("previewService", name)?),
            None => None,
        };
        Ok(Some(Services { active, preview }))
    }

    /// Blue-green sizing, promotion and Service switching, phase by phase.
    pub(super) fn blue_green(
        &mut self,
        services: &Option<Services>,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        analysis: &mut AnalysisState,
    ) -> Outcome {
        let (Some(services), Strategy::BlueGreen(bg)) = (services, &self.spec.strategy) else {
            return Outcome::default();
        };
        let bg: &BlueGreenStrategy = bg;
        let r = self.spec.replicas;
        let active_hash = selected_hash(&services.active).map(str::to_string);
        let mut bgs: BlueGreenStatus = status.blue_green.take().unwrap_or_default();
        bgs.active_selector = active_hash.clone();

        // Promotion state: a user promote clears the pause conditions we set.
        let any_pause = status
            .pause_conditions
            .as_ref()
            .is_some_and(|p| !p.is_empty());
        if status.controller_pause == Some(true) && !any_pause && !u.aborted {
            status.controller_pause = None;
            bgs.scale_up_preview_check_point = Some(true);
        }
        let checkpoint =
            bgs.scale_up_preview_check_point == Some(true) || status.promote_full == Some(true);
        let preview_count = bg.preview_replica_count.map_or(r, |n| n.clamp(0, r));
        let hash = self.spec.pod_hash.clone();
        let is_active = active_hash.as_deref() == Some(hash.as_str());
        let fast_tracked = !u.aborted
            && !u.new_is_stable
            && !is_active
            && (u.rollback_window
                || (!self.retrying_aborted_update(&hash)
                    && self
                        .new_rs
                        .is_some_and(|rs| within_scale_down_delay(rs, self.now))));
        let new_target = if u.new_is_stable || is_active || checkpoint || fast_tracked {
            r
        } else {
            preview_count
        };
        let f = Facts {
            bg,
            services,
            rollout: self.rollout_name().to_string(),
            hash,
            active_hash,
            is_active,
            checkpoint,
            fast_tracked,
            preview_count,
            new_target,
        };

        // In Argo's order: the new ReplicaSet is created and the preview Service routed to it;
        // the update is announced there (`announce_at`, by the caller); then the sizing.
        let scale_up = self.create_new(&f, plan, events, u);
        // As Argo, the preview Service stays where it is while a user pause or an Inconclusive
        // analysis halts the update.
        let halted = u.manually_paused || crate::update_analysis::paused_on_analysis(status);
        if halted {
            bgs.preview_selector = f
                .services
                .preview
                .as_ref()
                .and_then(|p| selected_hash(p).map(str::to_string))
                .or(bgs.preview_selector.take());
        } else {
            self.route_preview(&f, scale_up.is_some(), &mut bgs, plan, events);
        }
        let announce_at = events.len();
        let mut scaled = scale_up.is_some();
        events.extend(scale_up);
        scaled |= self.size_new_and_active(&f, plan, events, u);
        let promoted = self.promote(&f, status, &mut bgs, plan, events, u, analysis);
        scaled |= self.scale_down_previous(&f, status, &bgs, plan, events);
        self.clean_up_history(plan);
        if !u.aborted {
            scaled |= self.restart(status, plan);
        }

        status.blue_green = Some(bgs);
        let active_now = status
            .blue_green
            .as_ref()
            .and_then(|b| b.active_selector.clone());
        let active_rs = active_now
            .as_deref()
            .and_then(|h| self.all.iter().copied().find(|rs| rs.pod_hash() == Some(h)));
        self.fill_counts(status, active_rs);
        Outcome {
            scaled,
            advanced: promoted,
            announce_at: Some(announce_at),
        }
    }

    /// Whether the blue-green update is complete: the new ReplicaSet is stable, the active
    /// Service selects it, and its pods are all available.
    pub(super) fn blue_green_completed(&self, status: &RolloutStatus) -> bool {
        let active = status
            .blue_green
            .as_ref()
            .and_then(|b| b.active_selector.as_deref());
        status.stable_rs.as_deref() == Some(self.spec.pod_hash.as_str())
            && active == Some(self.spec.pod_hash.as_str())
            && self.new_rs.map_or(0, |rs| rs.available_replicas()) >= self.spec.replicas
    }

    /// Whether this reconcile is a retry of the aborted update to `hash` (the abort recorded,
    /// then cleared by the user). Its pods may still be up within abortScaleDownDelaySeconds;
    /// unlike a rollback they were never verified, so the retry is not fast-tracked (Argo
    /// would switch to them without pause or analysis).
    fn retrying_aborted_update(&self, hash: &str) -> bool {
        self.ro
            .status
            .as_ref()
            .is_some_and(|s| s.aborted_at.is_some() && s.current_pod_hash.as_deref() == Some(hash))
    }

    /// Creates the new ReplicaSet when there is none (unless aborted), at
    /// the size it is to have now. Returns the event of its scale-up, which Argo reports after
    /// routing the preview Service to it.
    fn create_new(
        &self,
        f: &Facts<'_>,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
    ) -> Option<Event> {
        // As Argo, also while a user pauses the Rollout: the pause holds the promotion only.
        if self.new_rs.is_some() || u.aborted {
            return None;
        }
        let anti = f.bg.anti_affinity.as_ref().zip(f.active_hash.as_deref());
        Some(self.create_new_replica_set(
            plan,
            events,
            u.revision,
            f.new_target,
            anti,
            u.new_is_stable,
        ))
    }

    /// Sizes the existing new ReplicaSet (preview size, or full once promoted or checked), and
    /// keeps the active one at full size until traffic has moved off it. Returns whether it
    /// scaled.
    fn size_new_and_active(
        &self,
        f: &Facts<'_>,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
    ) -> bool {
        let mut scaled = false;
        let new_target = f.new_target;
        match self.new_rs {
            None => {}
            Some(rs) if u.aborted => {
                // Aborted: the new pods go after abortScaleDownDelaySeconds (0 keeps them).
                let delay =
                    f.bg.abort_scale_down_delay_seconds
                        .unwrap_or(DEFAULT_SCALE_DOWN_DELAY);
                if delay > 0 && rs.spec_replicas() > 0 {
                    scaled |= self.scale_down_after(plan, events, rs, delay);
                }
            }
            Some(rs) => {
                let mut extra = BTreeMap::new();
                // Needed again (a retry or a rollback to it): no longer going away. A fast
                // rollback keeps its deadline until the switch, which the deadline licenses (a
                // conflict between the two writes must not turn it into a paused update).
                if rs.annotation(SCALE_DOWN_DEADLINE).is_some() && !f.fast_tracked {
                    extra.insert(SCALE_DOWN_DEADLINE.to_string(), None);
                }
                // The revision it is being given in this reconcile (an undo's reused
                // ReplicaSet has its old one until the write), as Argo's event says.
                scaled |= self.scale_with(plan, events, rs, new_target, u.revision, extra);
            }
        }

        // The active ReplicaSet keeps full size until traffic has moved off it.
        let active_rs = f
            .active_hash
            .as_deref()
            .and_then(|h| self.all.iter().copied().find(|rs| rs.pod_hash() == Some(h)));
        if let Some(rs) = active_rs
            && !f.is_active
        {
            let mut extra = BTreeMap::new();
            if rs.annotation(SCALE_DOWN_DEADLINE).is_some() {
                extra.insert(SCALE_DOWN_DEADLINE.to_string(), None);
            }
            let rev = rs.revision().unwrap_or(0);
            scaled |= self.scale_with(plan, events, rs, self.spec.replicas, rev, extra);
        }
        scaled
    }

    /// Preview Service: the new pods, even after an abort (as in Argo, the failed version stays
    /// reachable there for debugging), from the moment their ReplicaSet is created (`created`:
    /// in this plan); the active ones while there is no new ReplicaSet.
    fn route_preview(
        &self,
        f: &Facts<'_>,
        created: bool,
        bgs: &mut BlueGreenStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) {
        let Some(preview) = &f.services.preview else {
            return;
        };
        let want = if self.new_rs.is_none() && !created {
            f.active_hash.clone()
        } else {
            Some(f.hash.clone())
        };
        if let Some(want) = &want
            && selected_hash(preview) != Some(want.as_str())
        {
            self.switch_service(plan, events, preview, want, &f.rollout);
        }
        bgs.preview_selector = want;
    }

    /// Whether the new ReplicaSet is at `n` replicas, all of them available.
    fn saturated(&self, n: i32) -> bool {
        self.new_rs.is_some_and(|rs| {
            rs.status_is_current() && rs.spec_replicas() == n && rs.available_replicas() >= n
        })
    }

    /// The promotion gates, then the switch of the active Service; traffic back to stable
    /// after an abort past the switch. Returns whether the update was promoted.
    #[allow(clippy::too_many_arguments)]
    fn promote(
        &self,
        f: &Facts<'_>,
        status: &mut RolloutStatus,
        bgs: &mut BlueGreenStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        analysis: &mut AnalysisState,
    ) -> bool {
        let hash = &f.hash;
        // Decided before the switch clears the full promotion it may name.
        let completed = Event::normal(
            "RolloutCompleted",
            format!(
                "Rollout completed update to revision {} ({hash}): {}",
                u.revision,
                self.completion_reason(f, status, u)
            ),
        );
        let pre_passed = self.pre_promotion_passed(f, plan, u, analysis);
        let switch = self.switch_due(f, status, bgs, plan, events, u, pre_passed);
        let post_passed = self.post_promotion_passed(f, status, plan, u, analysis);
        super::analysis::promotion_analysis_waits(u, bgs, plan);
        let mut promoted = false;
        // Aborted after the switch (post-promotion analysis failed): traffic back to stable.
        if u.aborted
            && f.is_active
            && let Some(stable) = status.stable_rs.clone().filter(|s| s != hash)
            && self
                .all
                .iter()
                .any(|rs| rs.pod_hash() == Some(stable.as_str()))
        {
            self.switch_service(plan, events, &f.services.active, &stable, &f.rollout);
            bgs.active_selector = Some(stable);
        }
        // The switch may have landed while the rest of its plan did not (a later write got a
        // conflict): traffic is on the new pods, so the promotion is recorded now.
        if f.is_active
            && !u.aborted
            && post_passed
            && status.stable_rs.as_deref() != Some(hash.as_str())
            && self.targets_registered(plan, events)
        {
            remove_pause(status, &PauseReason::BlueGreenPause);
            status.controller_pause = None;
            status.promote_full = None;
            bgs.scale_up_preview_check_point = None;
            status.stable_rs = Some(hash.clone());
            events.push(completed.clone());
            promoted = true;
        }
        if switch {
            self.switch_service(plan, events, &f.services.active, hash, &f.rollout);
            bgs.active_selector = Some(hash.clone());
            bgs.scale_up_preview_check_point = None;
            remove_pause(status, &PauseReason::BlueGreenPause);
            status.controller_pause = None;
            status.promote_full = None;
            // With target-group verification the new pods become stable only once the load
            // balancer has them registered: a later reconcile records it (above).
            let verify_first = self.router_versions.aws_verify_target_group && !u.new_is_stable;
            if status.stable_rs.as_deref() != Some(hash.as_str()) && post_passed && !verify_first {
                events.push(completed);
            }
            if (post_passed && !verify_first) || u.new_is_stable {
                status.stable_rs = Some(hash.clone());
            }
            promoted = true;
        }
        promoted
    }

    /// Why the new pods become stable, as Argo's `RolloutCompleted` event gives it.
    fn completion_reason(&self, f: &Facts<'_>, status: &RolloutStatus, u: &Update) -> String {
        if status.promote_full == Some(true) {
            "Full promotion requested".into()
        } else if u.fast_undo {
            "Fast undo".into()
        } else if u.rollback_window {
            "Rollback within window".into()
        } else if self.skips_post_promotion(f, u) {
            // Argo 1.10's words for a rollback to pods within their scale-down delay, with or
            // without post-promotion analysis (1.9 said "Rollback to '<name>' within
            // scaleDownDelay", and only with one).
            "Fast rollback".into()
        } else {
            "Completed blue-green update".into()
        }
    }

    /// Whether this is a rollback to pods within their scale-down delay, which Argo makes
    /// stable without post-promotion analysis (as without pre-promotion analysis): at the
    /// switch, and after it while the ReplicaSet still has the deadline that licensed it (the
    /// switch landed, the status that records the promotion did not; the deadline goes in
    /// the plan that does).
    fn skips_post_promotion(&self, f: &Facts<'_>, u: &Update) -> bool {
        f.fast_tracked
            || (f.is_active
                && !u.aborted
                && !u.new_is_stable
                && self
                    .new_rs
                    .is_some_and(|rs| rs.annotation(SCALE_DOWN_DEADLINE).is_some()))
    }

    /// Pre-promotion analysis starts once the preview is up, and the switch waits for it.
    fn pre_promotion_passed(
        &self,
        f: &Facts<'_>,
        plan: &mut Plan,
        u: &Update,
        analysis: &mut AnalysisState,
    ) -> bool {
        let Some(pre) = &f.bg.pre_promotion_analysis else {
            return true;
        };
        // A full promotion skips analysis (its verdicts are not read): starting a run here
        // would start one on every pass.
        if f.fast_tracked || u.promote_full {
            return true;
        }
        let verdict = &u.verdicts.pre_promotion;
        if *verdict == Verdict::Missing
            && !f.is_active
            && !u.aborted
            && !u.new_is_stable
            && self.saturated(f.new_target)
        {
            self.runs()
                .start_analysis(Role::PrePromotion, pre, u.revision, plan, analysis);
        }
        verdict.passed()
    }

    /// Whether the active Service is to be switched to the new pods now: at once for a stable
    /// template or a fast rollback, otherwise once the preview is up, pre-promotion analysis
    /// has passed and the pause (a user's promote, or `autoPromotionSeconds`) is over. With a
    /// `previewReplicaCount`, the analysis and the pause happen at that size, and their end
    /// (the checkpoint) scales the preview up; the switch follows once it is fully available.
    #[allow(clippy::too_many_arguments)]
    fn switch_due(
        &self,
        f: &Facts<'_>,
        status: &mut RolloutStatus,
        bgs: &mut BlueGreenStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        pre_passed: bool,
    ) -> bool {
        let r = self.spec.replicas;
        if f.is_active || u.aborted || u.manually_paused || self.new_rs.is_none() {
            return false;
        }
        if u.new_is_stable || f.fast_tracked {
            // First deploy, back to the stable template, or a fast rollback: nothing to verify.
            return self.saturated(r);
        }
        if !f.checkpoint && f.preview_count < r {
            if self.saturated(f.preview_count)
                && pre_passed
                && self.pause_over(f, status, plan, events)
            {
                bgs.scale_up_preview_check_point = Some(true);
                remove_pause(status, &PauseReason::BlueGreenPause);
                status.controller_pause = None;
            }
            return false;
        }
        if !self.saturated(r) {
            plan.waits.extend(self.pods_wait());
            return false;
        }
        if !pre_passed {
            return false;
        }
        f.checkpoint || self.pause_over(f, status, plan, events)
    }

    /// The BlueGreenPause, entered once the preview is up and analysed: held until a user
    /// promotes (autoPromotionEnabled false) or for `autoPromotionSeconds`; none otherwise.
    /// Returns whether it is over.
    fn pause_over(
        &self,
        f: &Facts<'_>,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) -> bool {
        let delay = f.bg.auto_promotion_seconds.unwrap_or(0);
        if f.bg.auto_promotion_enabled == Some(false) {
            self.add_blue_green_pause(status, events);
            plan.waits.push(Wait::AwaitingPromotion { until: None });
            false
        } else if delay > 0 {
            let due = self.auto_promotion_due(status, events, plan, delay);
            if !due {
                let started = status
                    .pause_conditions
                    .iter()
                    .flatten()
                    .find(|p| p.reason.as_ref() == Some(&PauseReason::BlueGreenPause))
                    .and_then(|p| p.start_time.as_ref().map(|t| t.0))
                    .unwrap_or(self.now);
                let until = started
                    .checked_add(jiff::SignedDuration::from_secs(delay.into()))
                    .ok();
                plan.waits.push(Wait::AwaitingPromotion { until });
            }
            due
        } else {
            true
        }
    }

    /// Post-promotion analysis runs once traffic is on the new pods; only its success makes
    /// them stable. Until then the previous stable pods stay up to switch back to.
    fn post_promotion_passed(
        &self,
        f: &Facts<'_>,
        status: &RolloutStatus,
        plan: &mut Plan,
        u: &Update,
        analysis: &mut AnalysisState,
    ) -> bool {
        let Some(post) = &f.bg.post_promotion_analysis else {
            return true;
        };
        if u.rollback_window || u.promote_full || self.skips_post_promotion(f, u) {
            return true;
        }
        let verdict = &u.verdicts.post_promotion;
        if *verdict == Verdict::Missing
            && f.is_active
            && !u.aborted
            && !u.new_is_stable
            && status.stable_rs.as_deref() != Some(f.hash.as_str())
        {
            self.runs()
                .start_analysis(Role::PostPromotion, post, u.revision, plan, analysis);
        }
        verdict.passed()
    }

    /// Older ReplicaSets (neither new nor active nor stable) go after scaleDownDelaySeconds;
    /// at most scaleDownDelayRevisionLimit of them may wait, the newest first. Returns whether
    /// it scaled.
    fn scale_down_previous(
        &self,
        f: &Facts<'_>,
        status: &RolloutStatus,
        bgs: &BlueGreenStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
    ) -> bool {
        let delay =
            f.bg.scale_down_delay_seconds
                .unwrap_or(DEFAULT_SCALE_DOWN_DELAY);
        let keep_hashes: Vec<&str> = [
            Some(f.hash.as_str()),
            bgs.active_selector.as_deref(),
            status.stable_rs.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut older: Vec<&ReplicaSet> = self
            .all
            .iter()
            .copied()
            .filter(|rs| !rs.pod_hash().is_some_and(|h| keep_hashes.contains(&h)))
            .collect();
        older.sort_by_key(|rs| std::cmp::Reverse(rs.revision().unwrap_or(0)));
        let mut scaled = false;
        let mut waiting = 0;
        for rs in older {
            if rs.spec_replicas() == 0 {
                if rs.annotation(SCALE_DOWN_DEADLINE).is_some() {
                    let mut a = BTreeMap::new();
                    a.insert(SCALE_DOWN_DEADLINE.to_string(), None);
                    plan.actions.push(Action::AnnotateReplicaSet {
                        name: rs.name().to_string(),
                        resource_version: rs.metadata.resource_version.clone(),
                        annotations: a,
                    });
                }
                continue;
            }
            let may_wait =
                f.bg.scale_down_delay_revision_limit
                    .is_none_or(|limit| waiting < limit);
            if may_wait && delay > 0 {
                waiting += 1;
                scaled |= self.scale_down_after(plan, events, rs, delay);
            } else {
                let mut extra = BTreeMap::new();
                extra.insert(SCALE_DOWN_DEADLINE.to_string(), None);
                let rev = rs.revision().unwrap_or(0);
                scaled |= self.scale_with(plan, events, rs, 0, rev, extra);
            }
        }
        scaled
    }

    fn switch_service(
        &self,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        svc: &Service,
        hash: &str,
        rollout: &str,
    ) {
        let name = svc.metadata.name.clone().unwrap_or_default();
        let from = selected_hash(svc).unwrap_or_default().to_string();
        plan.actions.push(Action::SwitchService {
            name: name.clone(),
            resource_version: svc.metadata.resource_version.clone(),
            pod_hash: hash.to_string(),
            rollout: rollout.to_string(),
        });
        events.push(Event::normal(
            "SwitchService",
            format!("Switched selector for service '{name}' from '{from}' to '{hash}'"),
        ));
    }
}
