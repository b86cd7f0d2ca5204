//! One reconcile of a Rollout: from the observed world to a [`Plan`]. This module only
//! orchestrates; each job has a module of its own:
//!
//! - `prepare`: validation, the strategy, the pod-template hash (or an adopted one);
//! - `world`: the ReplicaSets of one reconcile sorted into their roles;
//! - `history`: revision numbers and `revisionHistoryLimit`;
//! - `analysis`: the AnalysisRuns an update needs and what their verdicts do to it;
//! - `canary` and `bluegreen`: the two strategies (`scale_down_delay`: blue-green's delayed
//!   scale-down);
//! - `scaling` and `restart`: ReplicaSet sizes, status counts, `spec.restartAt`;
//! - `pause`: pause conditions by reason;
//! - `progress`: the conditions (Available, Progressing and its deadline, Paused, Completed,
//!   Healthy);
//! - `services`: a canary's canary and stable Services, and Services the Rollout no longer
//!   names;
//! - `metadata`: ephemeral pod metadata of new ReplicaSets and of those whose role changed.
//!
//! Order of decisions: validate; identify the new, stable and older ReplicaSets; carry the
//! status over a template or step-list change; settle abort and pause; size every ReplicaSet;
//! advance the step machine; then compute counts, conditions and phase; last, bring the
//! ephemeral pod metadata of ReplicaSets whose role changed up to date.

mod analysis;
mod bluegreen;
mod canary;
mod coalesce;
mod experiment_step;
mod fast_undo;
mod history;
mod metadata;
mod ping_pong;
mod prepare;
mod progress;
mod referenced_workload;
mod restart;
mod rollback_window;
mod routed_canary;
mod scale_down_delay;
mod scaling;
mod services;
mod spec;
mod step_plugin;
#[cfg(test)]
mod tests;
mod traffic;
mod world;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::common::ConditionStatus;
use sluice_api::rollout::{RolloutConditionType as Cond, RolloutStatus};
use sluice_api::time::whole_seconds;

use crate::conditions::{self as c, TRUE};
use crate::observed::{Observed, ReplicaSetExt};
use crate::plan::{Event, Plan};
use crate::waits::Wait;
use crate::{phase, steps};
use analysis::{AnalysisState, Verdicts};
pub use fast_undo::FAST_UNDO;
pub use prepare::SPEC_WARNING;
use prepare::{adopt_equal_template, first_problem, prepare_valid, spec_warning};
use progress::{Progress, counts_of_status};
use spec::Strategy;
use world::World;

pub use traffic::{
    dependent_references as router_dependent_references, references as router_references,
    selections as router_selections,
};

/// Whether this version of Sluice drives the Rollout's spec: `Err` carries the `InvalidSpec`
/// message it would get (its first problem, or what is not supported yet). Objects the
/// Rollout names (Services, templates, router objects) are not looked at.
pub fn supports(rollout: &sluice_api::Rollout) -> Result<(), String> {
    if let Some(problem) = first_problem(rollout) {
        return Err(problem);
    }
    // What a StatefulSet or a DaemonSet cannot do is refused by validation; the rest needs
    // the workload.
    if crate::statefulset::stateful_set_name(rollout).is_some()
        || crate::daemonset::daemon_set_name(rollout).is_some()
    {
        return Ok(());
    }
    // A template a `workloadRef` names is another object: any template stands for it here.
    let mut stand_in = rollout.clone();
    if stand_in.spec.workload_ref.is_some() {
        stand_in.spec.template.get_or_insert_with(Default::default);
    }
    prepare_valid(&stand_in).map(|_| ())
}

/// Decides what to do for one Rollout.
pub fn reconcile(observed: &Observed) -> Plan {
    reconcile_with(observed, &Settings::default())
}

/// How the controller is set up to decide, beyond what it observes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// How long a status change that only reports an update's progress (counts, messages)
    /// may wait for the next write; zero writes every change, as Argo does. See
    /// `reconcile/coalesce.rs`.
    pub status_write_interval: std::time::Duration,
}

/// [`reconcile`], with the controller's [`Settings`].
pub fn reconcile_with(observed: &Observed, settings: &Settings) -> Plan {
    // A Rollout driving a StatefulSet has no ReplicaSets: its own, smaller, decision.
    if crate::statefulset::stateful_set_name(&observed.rollout).is_some() {
        return crate::statefulset::reconcile(observed);
    }
    // So has a Rollout driving a DaemonSet (a StatefulSet's annotation beside it is refused).
    if crate::daemonset::daemon_set_name(&observed.rollout).is_some() {
        return crate::daemonset::reconcile(observed);
    }
    let now = whole_seconds(observed.now);
    let ro = &observed.rollout;
    let name = ro.metadata.name.as_deref().unwrap_or_default();
    let old_status = ro.status.clone().unwrap_or_default();
    let mut plan = Plan {
        status: old_status.clone(),
        ..Default::default()
    };
    plan.events
        .extend(spec_warning(ro, old_status.observed_generation.as_deref()));
    plan.status.observed_generation = ro.metadata.generation.map(|g| g.to_string());

    // A template taken from a referenced workload is resolved in memory, after validation
    // (which looks at the Rollout's own, empty, template).
    plan.status.workload_observed_generation = None;
    // So is a template whose ConfigMaps and Secrets are read from copies (config rollouts).
    let mut config_copies = Vec::new();
    let prepared = match first_problem(ro) {
        Some(problem) => Err(problem),
        None => crate::workload::resolve(ro, observed.workload.as_ref()).and_then(|resolved| {
            let resolved = resolved.map(|rollout| Observed {
                rollout,
                ..observed.clone()
            });
            let resolved = match (crate::config_rollout::enabled(ro), &observed.config) {
                (true, Some(config)) => {
                    let base = resolved.as_ref().unwrap_or(observed);
                    let (rollout, copies) = crate::config_rollout::resolve(base, config)?;
                    config_copies = copies;
                    Some(Observed {
                        rollout,
                        ..base.clone()
                    })
                }
                _ => resolved,
            };
            let prepared = prepare_valid(resolved.as_ref().map_or(ro, |o| &o.rollout))?;
            Ok((prepared, resolved))
        }),
    };
    match prepared {
        Ok((mut prepared, resolved)) => {
            let observed = resolved.as_ref().unwrap_or(observed);
            adopt_equal_template(&mut prepared, observed);
            let mut conds = plan.status.conditions.take().unwrap_or_default();
            c::remove(&mut conds, Cond::InvalidSpec);
            plan.status.conditions = Some(conds);
            let mut world = World::new(observed, &prepared, now);
            match world.run(&mut plan) {
                Ok(()) => {
                    referenced_workload::decide(ro, &world, observed, &old_status, &mut plan);
                    if let Some(config) = &observed.config {
                        // The copies exist, and are held, before a ReplicaSet whose pods read
                        // them.
                        let (claims, owners) =
                            crate::config_rollout::owner_writes(observed, config, &plan.actions);
                        plan.actions
                            .splice(0..0, config_copies.into_iter().chain(claims));
                        plan.actions.extend(owners);
                    }
                }
                Err(message) => set_invalid_spec(&mut plan, name, message, now),
            }
        }
        Err(message) => set_invalid_spec(&mut plan, name, message, now),
    }

    let (phase, message) = phase::calculate(ro, &plan.status);
    plan.status.phase = Some(phase);
    crate::duration::track(ro, &old_status, &mut plan.status, &plan.events, now);
    // Go omits an empty message; writing "" would also be refused by some API servers.
    plan.status.message = (!message.is_empty()).then_some(message);
    if plan.status.abort == Some(true) {
        let message = plan.status.message.clone().unwrap_or_default();
        plan.waits.insert(0, Wait::Aborted { message });
    }
    if plan.status.conditions.as_ref().is_some_and(Vec::is_empty) {
        plan.status.conditions = None;
    }
    // Progress bookkeeping in the middle of an update waits for the next write that matters
    // (or the interval's end, when the Rollout is looked at again).
    let rules = coalesce::Rules::of(&ro.spec, settings.status_write_interval);
    let held_since = observed.progress_held_since;
    if let Some(wait) = coalesce::may_wait(&old_status, &plan.status, rules, held_since, now) {
        plan.status = old_status;
        plan.progress_held = true;
        // What the held status would report (a promotion's RolloutCompleted) goes out with
        // it: the next reconcile decides the same from the same status and reports it then.
        // What the actions write is reported now, as they are.
        plan.events.retain(Event::reports_a_write);
        crate::plan::set_requeue(&mut plan.requeue_after, wait);
    }
    plan.order_writes();
    plan
}

/// How soon a Rollout with an invalid spec is looked at again, as Argo re-queues them: what
/// made it invalid may be another object (a template, a Service) that appears later. Template
/// changes also wake the Rollouts that name them at once (the controller watches templates).
pub const INVALID_SPEC_RECHECK: std::time::Duration = std::time::Duration::from_secs(20);

/// A spec this version cannot act on: `InvalidSpec` says why, in Argo's form
/// `The Rollout "NAME" is invalid: <field error>`.
fn set_invalid_spec(plan: &mut Plan, name: &str, message: String, now: Timestamp) {
    crate::plan::set_requeue(&mut plan.requeue_after, INVALID_SPEC_RECHECK);
    let mut conds = plan.status.conditions.take().unwrap_or_default();
    let message = format!("The Rollout \"{name}\" is invalid: {message}");
    plan.waits = vec![Wait::InvalidSpec {
        message: message.clone(),
    }];
    c::set(
        &mut conds,
        Cond::InvalidSpec,
        TRUE,
        c::INVALID_SPEC,
        message,
        now,
        false,
    );
    plan.status.conditions = Some(conds);
}

/// The events that announce a new update: the revision recorded on the Rollout
/// (`RolloutUpdated`), steps skipped on a rollback (`SkipSteps`) and the Completed condition
/// turning False (`RolloutNotCompleted`).
struct Announcement {
    updated: Option<Event>,
    skip_steps: Option<Event>,
    not_completed: Option<Event>,
    /// `RolloutResumed`, when the new template or step list lifted a pause.
    resumed: Option<Event>,
    /// The new ReplicaSet is created in this reconcile.
    created: bool,
}

/// Puts the announcement of a new update among the reconcile's events where Argo reports it.
/// Argo records the revision first (`RolloutUpdated`), after creating a missing ReplicaSet (at
/// 0 replicas: `NewReplicaSetCreated` follows); then, in the same pass, routes a blue-green
/// preview Service to the new ReplicaSet and writes the reset status: `SkipSteps` for a
/// rollback that needs none, `RolloutNotCompleted`, `RolloutResumed` for a pause the reset
/// lifted; it scales in later passes. `start` is where the strategy's events begin, `at`
/// where they reach the end of that pass (after the creation and the preview Service, before
/// any scaling).
fn announce_update(events: &mut Vec<Event>, a: Announcement, start: usize, at: usize) {
    let mut at = at.min(events.len());
    let start = start.min(at);
    let announcing = a.updated.is_some() || a.not_completed.is_some();
    if let Some(updated) = a.updated {
        let created_at = events[start..at]
            .iter()
            .position(|e| e.reason == "NewReplicaSetCreated")
            .filter(|_| a.created)
            .map_or(start, |i| start + i);
        events.insert(created_at, updated);
        at += 1;
    }
    let announced = a.skip_steps.into_iter().chain(a.not_completed);
    events.splice(at..at, announced.chain(a.resumed));
    // The routers' weights of the new update are recorded, as Argo reports them, after the
    // update is announced: Argo reconciles the routers once the new ReplicaSet exists.
    if announcing {
        let end = at
            + events[at..]
                .iter()
                .take_while(|e| is_announcement(e))
                .count();
        let (moved, kept): (Vec<Event>, Vec<Event>) = events
            .drain(..end)
            .partition(|e| e.reason == "TrafficWeightUpdated");
        let rest: Vec<Event> = std::mem::take(events);
        events.extend(kept.into_iter().chain(moved).chain(rest));
    }
}

/// The events [`announce_update`] puts where a new update is announced.
fn is_announcement(e: &Event) -> bool {
    matches!(
        e.reason,
        "SkipSteps" | "RolloutNotCompleted" | "RolloutResumed"
    )
}

/// What the common part of a reconcile settled, for the strategy-specific part.
struct Update {
    revision: i64,
    new_is_stable: bool,
    aborted: bool,
    manually_paused: bool,
    /// Back to a revision within `spec.rollbackWindow`, or by `undo --fast`: no steps, pauses
    /// or analyses.
    rollback_window: bool,
    /// `undo --fast` asked for this update (`rollback_window` is set too).
    fast_undo: bool,
    /// `promote --full`: no analysis is started or read.
    promote_full: bool,
    verdicts: Verdicts,
}

/// What a strategy did in one reconcile, as progress counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Outcome {
    /// A ReplicaSet was created or scaled, or a pod evicted.
    scaled: bool,
    /// A canary step completed, or a blue-green update was promoted.
    advanced: bool,
    /// Where in the reconcile's events the announcement of a new update belongs, when the
    /// strategy says (see [`announce_update`]).
    announce_at: Option<usize>,
}

impl World<'_> {
    fn run(&mut self, plan: &mut Plan) -> Result<(), String> {
        let services = self.blue_green_services()?;
        let canary_services = self.canary_services()?;
        let spec = self.spec;
        let routers = match spec.canary().traffic_routing.as_ref() {
            Some(_) if matches!(spec.strategy, Strategy::Canary(_)) => {
                let desired = self.router_desired("", "", 0);
                traffic::Routers::resolve(
                    self.ro,
                    self.router_versions,
                    self.router_objects,
                    self.service_roles(true),
                    &desired,
                )?
            }
            _ => traffic::Routers::none(),
        };
        self.routed_hashes = traffic::routed_hashes(self, &routers);
        self.routed_canary_weight = traffic::routed_canary_weight(self, &routers);
        self.runs().check_analysis_templates()?;
        self.release_unnamed_services(plan);
        let old = plan.status.clone();
        let mut status_value = std::mem::take(&mut plan.status);
        let status = &mut status_value;
        let is_canary = matches!(self.spec.strategy, Strategy::Canary(_));
        let steps_len = steps::steps(self.spec.canary()).len() as i32;
        let mut events = Vec::new();

        let template_changed = self.start_over_on_change(status);

        // The first revision of a Rollout, or one whose stable ReplicaSet is gone, has nothing
        // to roll from: it becomes stable at once and skips the steps.
        let mut initial_deploy = false;
        if self.stable_rs.is_none() && self.older.iter().all(|rs| rs.spec_replicas() == 0) {
            initial_deploy = old.stable_rs.as_deref() != Some(self.spec.pod_hash.as_str());
            if initial_deploy && is_canary {
                ping_pong::flip(self.spec.canary(), status);
            }
            status.stable_rs = Some(self.spec.pod_hash.clone());
            self.stable_rs = self.new_rs;
        }
        let new_is_stable = status.stable_rs.as_deref() == Some(self.spec.pod_hash.as_str());
        // Argo records a step index only for a canary with steps.
        if new_is_stable && is_canary {
            status.current_step_index = (steps_len > 0).then_some(steps_len);
        }
        let revision = self.revision(plan);
        self.revision = revision;
        let mut announcement = Announcement {
            updated: (self.annotate_rollout_revision(revision, plan) && template_changed).then(
                || {
                    Event::normal(
                        "RolloutUpdated",
                        format!("Rollout updated to revision {revision}"),
                    )
                },
            ),
            not_completed: (template_changed && self.announces_not_completed(&old, is_canary))
                .then(|| {
                    Event::normal(
                        "RolloutNotCompleted",
                        format!(
                            "Rollout not completed, started update to revision {revision} ({})",
                            self.spec.pod_hash
                        ),
                    )
                }),
            skip_steps: self.skip_steps_event(&old, status, template_changed),
            resumed: None,
            created: self.new_rs.is_none(),
        };

        // A full promotion overrides an abort, as in Argo: `promote --full` on an aborted
        // update takes it straight to the new pods.
        if status.promote_full == Some(true) && status.abort == Some(true) && !new_is_stable {
            status.abort = None;
            status.aborted_at = None;
        }
        // Analysis verdicts come first: a Failed run aborts, an Inconclusive one pauses.
        let mut analysis = AnalysisState::default();
        let fast_undo = status.abort != Some(true) && !new_is_stable && self.fast_undo();
        let rollback_window = fast_undo
            || (status.abort != Some(true) && !new_is_stable && self.rollback_within_window());
        // As Argo, a full promotion skips analysis: a failed run no longer aborts it.
        let verdicts_from = events.len();
        let verdicts = if status.abort == Some(true)
            || new_is_stable
            || rollback_window
            || status.promote_full == Some(true)
        {
            Verdicts::default()
        } else {
            self.read_verdicts(revision, status, &mut events, &mut analysis)
        };
        let verdict_events = verdicts_from..events.len();
        if is_canary {
            self.clear_step_plugins_after_retry(status, status.abort == Some(true));
            self.record_step_plugin_answers(status, &mut events, &mut analysis);
        }
        let aborted = self.settle_abort(status, new_is_stable);
        if is_canary {
            let promoted = new_is_stable || status.promote_full == Some(true);
            self.wind_down_step_plugins(status, aborted, promoted, plan);
        }
        let manually_paused = self.ro.spec.paused == Some(true);
        if status.promote_full == Some(true) && !aborted {
            // Promote-full skips whatever the rollout was waiting for.
            status.pause_conditions = None;
            status.controller_pause = None;
        }

        let update = Update {
            revision,
            new_is_stable,
            aborted,
            manually_paused,
            rollback_window,
            fast_undo,
            promote_full: status.promote_full == Some(true),
            verdicts,
        };
        let strategy_events = events.len();
        let (outcome, completed) = match &self.spec.strategy {
            Strategy::Canary(_) => {
                // With dynamicStableScale or a gradual abort, an aborted canary keeps its
                // Service until the router has drained it.
                let draining = aborted
                    && (spec.canary().dynamic_stable_scale == Some(true)
                        || spec.gradual_abort.is_some())
                    && !routers.is_empty()
                    && status
                        .canary
                        .as_ref()
                        .and_then(|c| c.weights.as_ref())
                        .and_then(|w| w.canary.as_ref())
                        .and_then(|c| c.weight)
                        .is_some_and(|w| w > 0);
                self.route_canary_services(
                    &canary_services,
                    aborted && !draining,
                    plan,
                    &mut events,
                );
                let outcome =
                    self.canary(status, plan, &mut events, &update, &mut analysis, &routers);
                if !self.experiments.is_empty() {
                    let over =
                        update.aborted || update.new_is_stable || status.promote_full == Some(true);
                    self.wind_down_experiments(status, update.revision, over, plan);
                }
                (outcome, self.canary_completed(status))
            }
            Strategy::BlueGreen(_) => {
                let outcome =
                    self.blue_green(&services, status, plan, &mut events, &update, &mut analysis);
                (outcome, self.blue_green_completed(status))
            }
        };
        // Stable as read, not as this reconcile decides: the annotation goes in the Rollout's
        // metadata write, which can land before the status that completes the undo, and a
        // reconcile in between must still see why it skipped the steps.
        self.clear_fast_undo(plan, new_is_stable);
        // Not done and no step or gate holds it: the pods are what it waits for.
        if !completed && !aborted && plan.waits.is_empty() {
            plan.waits.extend(self.pods_wait());
        }
        let announce_at = outcome.announce_at.unwrap_or_else(|| {
            events[strategy_events..]
                .iter()
                .position(|e| e.reason == "NewReplicaSetCreated")
                .map_or(strategy_events, |i| strategy_events + i + 1)
        });
        if initial_deploy {
            events.push(Event::normal(
                "RolloutCompleted",
                format!(
                    "Rollout completed update to revision {revision} ({}): Initial deploy",
                    self.spec.pod_hash
                ),
            ));
        }
        if analysis.resumed && status.pause_conditions.as_ref().is_none_or(Vec::is_empty) {
            // The resume has been acted on (a new run measures): the controller's pause ends.
            status.controller_pause = None;
        }
        analysis.record_started(status);
        self.runs().settle_analysis_runs(plan, &analysis);
        let progressed = outcome.scaled
            || outcome.advanced
            || counts_of_status(status) != counts_of_status(&old);
        let aborted_by_analysis = analysis.abort_message.is_some();
        let deadline = self.conditions(
            status,
            &mut events,
            &mut plan.requeue_after,
            Progress {
                aborted,
                abort_message: analysis.abort_message.take(),
                created: self.new_rs.is_none() && !manually_paused,
                progressed,
                completed,
                revision,
            },
        );
        // A pause the new template or step list lifted: Argo says so with the reset status, in
        // the pass that notices them.
        let start_over = template_changed || status.current_step_hash != old.current_step_hash;
        if let Some(i) = events[announce_at..]
            .iter()
            .position(|e| e.reason == "RolloutResumed")
            .filter(|_| start_over)
        {
            announcement.resumed = Some(events.remove(announce_at + i));
        }
        announce_update(&mut events, announcement, strategy_events, announce_at);
        analysis::order_verdict_events(
            &mut events,
            verdict_events,
            aborted_by_analysis,
            !is_canary,
        );
        if manually_paused {
            plan.waits.insert(0, Wait::PausedByUser);
        }
        plan.waits.extend(deadline);
        plan.events.extend(events);
        plan.status = status_value;
        self.sync_pod_metadata(plan);
        self.confirm_counted_replica_sets(plan);
        Ok(())
    }

    /// Whether Argo says `RolloutNotCompleted` on noticing a new pod template: when its
    /// Completed condition turns False, i.e. the new pods are not the stable ones and it was
    /// not False already (an update superseded mid-way is announced once). Argo does so for a
    /// canary's first revision too (its first status, without a step hash, is reset as for
    /// a new template before the promotion), not for a blue-green one's (stable in its first
    /// status).
    fn announces_not_completed(&self, old: &RolloutStatus, is_canary: bool) -> bool {
        let was_not_completed = c::find(
            old.conditions.as_deref().unwrap_or_default(),
            Cond::Completed,
        )
        .is_some_and(|cond| cond.status == Some(ConditionStatus::False));
        (old.current_pod_hash.is_some() || is_canary)
            && !was_not_completed
            && old.stable_rs.as_deref() != Some(self.spec.pod_hash.as_str())
    }

    /// Argo's `SkipSteps` event, when a canary's new template or step list (`status` already
    /// has the new step hash) goes to an existing ReplicaSet that needs no steps: the stable
    /// one, or an active one within the rollback window.
    fn skip_steps_event(
        &self,
        old: &RolloutStatus,
        status: &RolloutStatus,
        template_changed: bool,
    ) -> Option<Event> {
        let Strategy::Canary(canary) = &self.spec.strategy else {
            return None;
        };
        let steps_changed = old.current_step_hash != status.current_step_hash;
        let new_rs = self.new_rs?;
        if !(template_changed || steps_changed) || steps::steps(canary).is_empty() {
            return None;
        }
        if old.stable_rs.as_deref() == Some(self.spec.pod_hash.as_str()) {
            Some(Event::normal("SkipSteps", "Rollback to stable ReplicaSets"))
        } else if self.fast_undo() {
            Some(Event::normal(
                "SkipSteps",
                "Fast undo: steps, pauses and analyses skipped",
            ))
        } else if self.rollback_within_window() && new_rs.spec_replicas() > 0 {
            Some(Event::normal(
                "SkipSteps",
                "Rollback to active ReplicaSets within RollbackWindow",
            ))
        } else {
            None
        }
    }

    /// A new pod template starts a new update: steps from the beginning, no abort, no pause.
    /// A changed step list starts the steps over. Returns whether the template changed.
    fn start_over_on_change(&self, status: &mut RolloutStatus) -> bool {
        let is_canary = matches!(self.spec.strategy, Strategy::Canary(_));
        let template_changed =
            status.current_pod_hash.as_deref() != Some(self.spec.pod_hash.as_str());
        let step_hash = is_canary.then(|| steps::step_hash(self.spec.canary()));
        let steps_changed = status.current_step_hash != step_hash;
        if template_changed || steps_changed {
            // No index for a canary without steps (nor for blue-green), as in Argo.
            let has_steps = is_canary && !steps::steps(self.spec.canary()).is_empty();
            status.current_step_index = has_steps.then_some(0);
            status.pause_conditions = None;
            status.controller_pause = None;
            if let Some(canary) = status.canary.as_mut() {
                canary.step_plugin_statuses = None;
            }
        }
        if template_changed {
            status.abort = None;
            status.aborted_at = None;
            status.promote_full = None;
            status.current_pod_hash = Some(self.spec.pod_hash.clone());
            if let Some(bg) = status.blue_green.as_mut() {
                bg.scale_up_preview_check_point = None;
            }
        }
        status.current_step_hash = step_hash;
        template_changed
    }

    /// Abort: back to the stable pods, no pause; `abortedAt` records the first moment. Once
    /// the new pods are stable there is nothing to abort. Returns whether the update is
    /// aborted.
    fn settle_abort(&self, status: &mut RolloutStatus, new_is_stable: bool) -> bool {
        let aborted = status.abort == Some(true) && !new_is_stable;
        if aborted {
            status.pause_conditions = None;
            status.controller_pause = None;
            // Back to the first step of a canary with steps; a blue-green Rollout has none.
            if !steps::steps(self.spec.canary()).is_empty() {
                status.current_step_index = Some(0);
            }
            if status.aborted_at.is_none() {
                status.aborted_at = Some(Time(self.now));
            }
        } else {
            status.aborted_at = None;
            if new_is_stable {
                status.abort = None;
            }
        }
        aborted
    }
}
