//! The canary strategy without traffic routing: replicas sized by the current step's weight,
//! and the step machine (setWeight, pause, analysis steps, background analysis) up to the
//! completion of the update.

use sluice_api::rollout::{
    CanaryStepAction, PauseReason, ReplicaProgressThresholdType, RolloutPause, RolloutStatus,
};

use super::analysis::{AnalysisState, Role, Verdict};
use super::scaling::counts_of;
use super::traffic::Routers;
use super::{Outcome, Update, World};
use crate::observed::ReplicaSetExt;
use crate::pause::{has_pause, remove_pause};
use crate::plan::{Event, Plan};
use crate::replicas::{self, BasicCanaryInputs};
use crate::steps;
use crate::waits::Wait;

impl World<'_> {
    /// Canary sizing and the step machine.
    pub(super) fn canary(
        &mut self,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        analysis: &mut AnalysisState,
        routers: &Routers<'_>,
    ) -> Outcome {
        if self.spec.canary().traffic_routing.is_some() {
            return self.routed_canary(status, plan, events, u, analysis, routers);
        }
        let weight = self.canary_weight(status, u);
        let scaled = self.size_canary(status, plan, events, u, weight);
        let at_desired = self.basic_at_desired(weight, u.new_is_stable);
        let advanced = self.step_machine(status, plan, events, u, analysis, at_desired);
        self.fill_counts(status, None);
        Outcome {
            scaled,
            advanced,
            announce_at: None,
        }
    }

    /// A canary with a traffic router: the counts the current step asks for, then the
    /// router writes (traffic follows pods that are up), then the ReplicaSets, then the steps.
    fn routed_canary(
        &mut self,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        analysis: &mut AnalysisState,
        routers: &Routers<'_>,
    ) -> Outcome {
        let previous = previous_weights(status);
        let step_counts = self.routed_counts(status, u, 0, None);
        let at_step_counts = self.routed_at_desired(&step_counts);
        let traffic = self.route_traffic(routers, status, plan, events, u, at_step_counts);
        // The counts keep what the weights recorded last time need, and what the weights this
        // plan writes need: a plan that puts traffic back on a ReplicaSet does not shrink it.
        let previous = match (previous, traffic.routed) {
            (Some((c, s)), Some((rc, rs))) => Some((c.max(rc), s.max(rs))),
            (p, r) => p.or(r),
        };
        let counts = self.routed_counts(status, u, traffic.weight, previous);
        let held = !u.aborted && crate::update_analysis::paused_on_analysis(status);
        // Held by an Inconclusive run, or paused by a user: nothing is resized. As Argo, a new
        // template while paused still gets its ReplicaSet, at no pods.
        let frozen = held || u.manually_paused;
        let scaled = if u.manually_paused && !held && !u.aborted && self.new_rs.is_none() {
            let canary = self.spec.canary();
            let anti = canary.anti_affinity.as_ref().zip(self.stable_hash());
            let _no_scaling =
                self.create_new_replica_set(plan, events, u.revision, 0, anti, u.new_is_stable);
            true
        } else {
            !frozen && self.size_routed_canary(status, plan, events, u, &counts)
        };
        let at_desired =
            !scaled && self.routed_at_desired(&counts) && traffic.verified != Some(false);
        let router_writes = plan.actions.iter().any(|a| {
            matches!(
                a,
                crate::Action::UpdateRouterObject { .. } | crate::Action::CreateRouterObject { .. }
            )
        });
        if !u.new_is_stable && (traffic.verified == Some(false) || router_writes) {
            plan.waits.push(Wait::WeightNotVerified {
                weight: traffic.weight,
            });
        }
        let advanced = self.step_machine(status, plan, events, u, analysis, at_desired);
        self.fill_counts(status, None);
        Outcome {
            scaled,
            advanced,
            announce_at: None,
        }
    }

    /// Whether the basic canary's ReplicaSets have the counts `weight` asks for.
    fn basic_at_desired(&self, weight: i32, new_is_stable: bool) -> bool {
        let new_counts = self.new_rs.map(counts_of).unwrap_or_default();
        let target = replicas::approximate_weighted_counts(
            self.spec.replicas,
            weight,
            100,
            self.spec.limits.max_surge,
        );
        self.new_rs.is_some_and(|rs| {
            rs.status_is_current()
                && rs.spec_replicas() == target.0
                && new_counts.available >= self.progress_threshold(target.0)
        }) && self.stable_rs.is_none_or(|rs| {
            new_is_stable || (rs.spec_replicas() == target.1 && rs.available_replicas() >= target.1)
        }) && self.older.iter().all(|rs| rs.spec_replicas() == 0)
    }

    /// Whether the canary update is complete: the new ReplicaSet is stable, at full size and
    /// all available.
    pub(super) fn canary_completed(&self, status: &RolloutStatus) -> bool {
        status.stable_rs.as_deref() == Some(self.spec.pod_hash.as_str())
            && status.updated_replicas.unwrap_or(0) == self.spec.replicas
            && status.replicas.unwrap_or(0) == self.spec.replicas
            && self.new_rs.map_or(0, |rs| rs.available_replicas()) >= self.spec.replicas
    }

    /// The share of the pods the new ReplicaSet is to have now: none once aborted, all once
    /// stable, promoted in full or rolled back within the window, the current step's weight
    /// otherwise.
    fn canary_weight(&self, status: &RolloutStatus, u: &Update) -> i32 {
        let step_index = status.current_step_index.unwrap_or(0);
        if u.aborted {
            0
        } else if u.new_is_stable || status.promote_full == Some(true) || u.rollback_window {
            100
        } else {
            steps::weight_at(self.spec.canary(), step_index)
        }
    }

    /// Sizes every ReplicaSet for `weight`, cleans up history and restarts pods; returns
    /// whether it scaled or evicted.
    fn size_canary(
        &mut self,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        weight: i32,
    ) -> bool {
        let (revision, new_is_stable, aborted, manually_paused) =
            (u.revision, u.new_is_stable, u.aborted, u.manually_paused);
        let other_spec_total: i32 = self.older.iter().map(|rs| rs.spec_replicas()).sum();
        let counts = replicas::basic_canary_counts(BasicCanaryInputs {
            replicas: self.spec.replicas,
            weight,
            limits: self.spec.limits,
            new_rs: self.new_rs.map(counts_of),
            stable_rs: self.stable_rs.map(counts_of),
            new_is_stable,
            other_spec_total,
        });

        let mut scaled = false;
        // Paused on an Inconclusive run, the pods stay as they are (Argo skips its ReplicaSet
        // reconcile): a pause step that runs out meanwhile must not scale to the next weight.
        let held = !aborted && crate::update_analysis::paused_on_analysis(status);
        // A user's pause (`spec.paused`) halts every resize, as Argo's does, also of an
        // aborted update; a new template still gets its ReplicaSet, created at 0.
        let halted = manually_paused;
        let stable = self
            .stable_rs
            .filter(|_| !held && !halted && !new_is_stable);
        // Argo sizes the stable ReplicaSet first and the new one in a later pass, from what
        // the first did: so while the stable one moves, the new one does not grow (it is
        // created at 0), and the sizes and `ScalingReplicaSet` events follow Argo's one by
        // one. A shrinking new ReplicaSet is not held back: that only ever makes room.
        let stable_moves = stable.is_some_and(|rs| rs.spec_replicas() != counts.stable);
        if self.new_rs.is_none() && !held {
            let anti = self
                .spec
                .canary()
                .anti_affinity
                .as_ref()
                .zip(self.stable_hash());
            let replicas = if stable_moves || halted {
                0
            } else {
                counts.canary
            };
            let scale_up =
                self.create_new_replica_set(plan, events, revision, replicas, anti, new_is_stable);
            events.extend((replicas > 0).then_some(scale_up));
            scaled = true;
        }
        if let Some(stable) = stable {
            let rev = stable.revision().unwrap_or(0);
            scaled |= self.scale(plan, events, stable, counts.stable, rev);
        }
        if let Some(rs) = self.new_rs
            && !held
            && !halted
            && !(stable_moves && counts.canary > rs.spec_replicas())
        {
            scaled |= self.scale(plan, events, rs, counts.canary, revision);
        }
        if halted {
            self.clean_up_history(plan);
            return scaled;
        }
        scaled |= self.scale_down_older(plan, events);
        self.clean_up_history(plan);
        if !aborted {
            scaled |= self.restart(status, plan);
        }
        scaled
    }

    /// Completes the current step when it is done, starts the analyses it needs, and makes
    /// the new ReplicaSet stable after the last step; returns whether a step (or the update)
    /// completed.
    fn step_machine(
        &mut self,
        status: &mut RolloutStatus,
        plan: &mut Plan,
        events: &mut Vec<Event>,
        u: &Update,
        analysis: &mut AnalysisState,
        at_desired: bool,
    ) -> bool {
        let (revision, new_is_stable, aborted, manually_paused) =
            (u.revision, u.new_is_stable, u.aborted, u.manually_paused);
        let steps_len = steps::steps(self.spec.canary()).len() as i32;
        // A full promotion (or a rollback within the window) skips what is left of the steps
        // at once, and the step index says so from the first reconcile, as Argo writes it.
        if (status.promote_full == Some(true) || u.rollback_window) && steps_len > 0 {
            status.current_step_index = Some(steps_len);
        }
        let step_index = status.current_step_index.unwrap_or(0);
        let mut step_advanced = false;

        // Paused on an Inconclusive analysis: the pods stay as they are and the update does not
        // complete until a user resumes or aborts. Only a timed pause step runs out meanwhile,
        // as in Argo, leaving `InconclusiveAnalysisRun` the pause that holds the update.
        let held_by_analysis = crate::update_analysis::paused_on_analysis(status);
        if held_by_analysis && !aborted {
            plan.waits
                .push(crate::update_analysis::analysis_pause_wait(status));
        }
        if held_by_analysis
            && !aborted
            && !manually_paused
            && !new_is_stable
            && status.promote_full != Some(true)
            && let Some(step) = steps::current_step(self.spec.canary(), step_index)
            && let Some(CanaryStepAction::Pause(pause)) = step.action()
            // No pause-step condition while the controller's pause is up reads as a resumed
            // pause step, in Argo as here; a timed one runs out by the clock.
            && (!has_pause(status, &PauseReason::CanaryPauseStep)
                || (pause.duration.is_some()
                    && self.pause_step(status, events, plan, pause, step_index)))
        {
            remove_pause(status, &PauseReason::CanaryPauseStep);
            status.current_step_index = Some(step_index + 1);
            events.push(Event::normal(
                "RolloutStepCompleted",
                format!(
                    "Rollout step {}/{} completed ({})",
                    step_index + 1,
                    steps_len,
                    crate::steps::describe(step.action())
                ),
            ));
            return true;
        }
        // A user's pause holds the steps, not the analyses: as Argo, the current step's
        // analysis and the background one start (and their verdicts count) meanwhile.
        if manually_paused
            && !aborted
            && !held_by_analysis
            && !new_is_stable
            && self.new_rs.is_some()
            && status.promote_full != Some(true)
        {
            if let Some(step) = steps::current_step(self.spec.canary(), step_index)
                && let Some(CanaryStepAction::Analysis(a)) = step.action()
                && u.verdicts.step == Verdict::Missing
                && status.pause_conditions.as_ref().is_none_or(Vec::is_empty)
            {
                self.runs()
                    .start_analysis(Role::Step(step_index), a, revision, plan, analysis);
            }
            if let Some(bga) = &self.spec.canary().analysis
                && u.verdicts.background == Verdict::Missing
                && past_starting_step(status.current_step_index, bga.starting_step)
            {
                self.runs().start_analysis(
                    Role::Background,
                    &bga.analysis,
                    revision,
                    plan,
                    analysis,
                );
            }
        }
        if !aborted
            && !manually_paused
            && !held_by_analysis
            && !new_is_stable
            && self.new_rs.is_some()
        {
            let promote_full = status.promote_full == Some(true) || u.rollback_window;
            if !promote_full && let Some(step) = steps::current_step(self.spec.canary(), step_index)
            {
                let complete = match step.action() {
                    Some(CanaryStepAction::SetWeight(_) | CanaryStepAction::SetCanaryScale(_)) => {
                        if !at_desired {
                            plan.waits.extend(self.pods_wait());
                        }
                        at_desired
                    }
                    // Applied to the routers in this reconcile (routing comes first).
                    Some(
                        CanaryStepAction::SetHeaderRoute(_) | CanaryStepAction::SetMirrorRoute(_),
                    ) => true,
                    Some(CanaryStepAction::Pause(pause)) => {
                        self.pause_step(status, events, plan, pause, step_index)
                    }
                    Some(CanaryStepAction::Experiment(x)) => {
                        let done = self.experiment_step(x, status, plan, events, revision);
                        if !done
                            && let Some(name) = status
                                .canary
                                .as_ref()
                                .and_then(|c| c.current_experiment.clone())
                        {
                            plan.waits.push(Wait::ExperimentRunning { name });
                        }
                        done
                    }
                    Some(CanaryStepAction::Analysis(a)) => match &u.verdicts.step {
                        Verdict::Missing => {
                            let unpaused =
                                status.pause_conditions.as_ref().is_none_or(Vec::is_empty);
                            if unpaused {
                                self.runs().start_analysis(
                                    Role::Step(step_index),
                                    a,
                                    revision,
                                    plan,
                                    analysis,
                                );
                            }
                            false
                        }
                        Verdict::Pending => {
                            let run = status
                                .canary
                                .as_ref()
                                .and_then(|c| c.current_step_analysis_run_status.as_ref())
                                .and_then(|r| r.name.clone())
                                .unwrap_or_default();
                            plan.waits.push(Wait::AnalysisRunning { run });
                            false
                        }
                        v => v.passed(),
                    },
                    Some(CanaryStepAction::Plugin(p)) => {
                        self.plugin_step(p, step_index, status, plan)
                    }
                    _ => false,
                };
                if complete {
                    remove_pause(status, &PauseReason::CanaryPauseStep);
                    status.controller_pause = None;
                    status.current_step_index = Some(step_index + 1);
                    step_advanced = true;
                    events.push(Event::normal(
                        "RolloutStepCompleted",
                        format!(
                            "Rollout step {}/{} completed ({})",
                            step_index + 1,
                            steps_len,
                            crate::steps::describe(step.action())
                        ),
                    ));
                }
            }
            // Background analysis, from its starting step on, until the update completes;
            // as in Argo it starts also while a pause step holds the update (it measures
            // the canary that is up meanwhile).
            if let Some(bga) = &self.spec.canary().analysis
                && u.verdicts.background == Verdict::Missing
                && !promote_full
                && past_starting_step(status.current_step_index, bga.starting_step)
            {
                self.runs().start_analysis(
                    Role::Background,
                    &bga.analysis,
                    revision,
                    plan,
                    analysis,
                );
            }
            // All steps done (or skipped by promote-full) and the new pods all up: it is stable.
            let past_steps = status.current_step_index.unwrap_or(0) >= steps_len || promote_full;
            if past_steps && !step_advanced && !at_desired {
                plan.waits.extend(self.pods_wait());
            }
            if past_steps && !step_advanced && at_desired {
                // Why it was promoted, in Argo's words and order of precedence.
                let why = if status.promote_full == Some(true) {
                    "Full promotion requested".to_string()
                } else if u.fast_undo {
                    "Fast undo".to_string()
                } else if u.rollback_window {
                    "Rollback within window".to_string()
                } else {
                    format!("Completed all {steps_len} canary steps")
                };
                status.stable_rs = Some(self.spec.pod_hash.clone());
                super::ping_pong::flip(self.spec.canary(), status);
                status.promote_full = None;
                status.current_step_index = (steps_len > 0).then_some(steps_len);
                events.push(Event::normal(
                    "RolloutCompleted",
                    format!(
                        "Rollout completed update to revision {revision} ({}): {why}",
                        self.spec.pod_hash
                    ),
                ));
                step_advanced = true;
            }
        }
        step_advanced
    }

    pub(super) fn progress_threshold(&self, desired: i32) -> i32 {
        let Some(t) = &self.spec.canary().replica_progress_threshold else {
            return desired;
        };
        let value = t.value.unwrap_or(100).max(0);
        match t.type_.as_ref() {
            Some(ReplicaProgressThresholdType::Pods) => value.min(desired),
            _ => {
                let v = (i64::from(desired) * i64::from(value) + 99) / 100;
                (v as i32).min(desired)
            }
        }
    }

    /// The first of the new and stable ReplicaSets whose pods are not all available.
    pub(super) fn pods_wait(&self) -> Option<Wait> {
        self.new_rs
            .iter()
            .chain(self.stable_rs.iter())
            .find(|rs| rs.available_replicas() < rs.spec_replicas())
            .map(|rs| Wait::PodsNotAvailable {
                replica_set: rs.name().to_string(),
                wanted: rs.spec_replicas(),
                available: rs.available_replicas(),
            })
    }

    /// Handles a pause step; returns whether it is complete. Records what it waits for.
    fn pause_step(
        &self,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        plan: &mut Plan,
        pause: &RolloutPause,
        step_index: i32,
    ) -> bool {
        crate::pause::pause_step(
            status,
            &mut plan.requeue_after,
            &mut plan.waits,
            events,
            pause,
            step_index,
            self.now,
        )
    }
}

/// `status.canary.weights` (canary, stable) as recorded before this reconcile.
fn previous_weights(status: &RolloutStatus) -> Option<(i32, i32)> {
    let w = status.canary.as_ref()?.weights.as_ref()?;
    let of = |d: &Option<sluice_api::rollout::WeightDestination>| {
        d.as_ref().and_then(|d| d.weight).unwrap_or(0)
    };
    Some((of(&w.canary), of(&w.stable)))
}

/// Whether a background analysis starting at `starting` may run at step `index`. A canary
/// without steps has no index, and, as in Argo, no step to wait for whatever `startingStep`
/// says.
fn past_starting_step(index: Option<i32>, starting: Option<i32>) -> bool {
    index.is_none_or(|i| i >= starting.unwrap_or(0))
}
