//! Analysis during an update, whatever the workload (ReplicaSets, or a StatefulSet's
//! partitions): which AnalysisRun plays each role for the update, creating it, what its verdict
//! does to the update, and the runs to terminate or delete afterwards.
//!
//! - Failed or Error aborts the update.
//! - Inconclusive pauses it (`InconclusiveAnalysisRun`) on that run: no new run is created and
//!   the update is held (a timed pause step may still run out) until a user resumes or aborts.
//!   A resume measures again with a new run, as Argo does; a retry after an abort too.
//! - The current run of a role is the one the status records; a finished run it does not
//!   record belongs to an earlier attempt.
//! - Runs that are no longer needed are terminated; finished ones beyond the history limits
//!   are deleted.

use std::collections::BTreeSet;

use jiff::Timestamp;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::{
    PauseReason, Rollout, RolloutAnalysis, RolloutAnalysisRunStatus, RolloutStatus,
};

use crate::analysis::{self as build, RunKind};
use crate::labels::{POD_TEMPLATE_HASH, REVISION};
use crate::observed::{AnalysisTemplates, TemplateKey};
use crate::pause::{add_pause, has_pause};
use crate::plan::{Action, Event, Plan};

/// The Rollout's AnalysisRuns, and what a run made for its update now needs: the update's
/// pod-template hash (or StatefulSet revision hash) and the stable one.
pub(crate) struct UpdateRuns<'a> {
    pub ro: &'a Rollout,
    pub now: Timestamp,
    /// The hash of the update's pods: the runs' `rollouts-pod-template-hash` label.
    pub pod_hash: &'a str,
    /// The stable hash for `podTemplateHashValue: Stable`.
    pub stable_hash: Option<&'a str>,
    /// Every AnalysisRun of the Rollout.
    pub runs: &'a [AnalysisRun],
    pub templates: &'a AnalysisTemplates,
}

/// Default number of finished successful and unsuccessful runs kept per Rollout.
const DEFAULT_RUN_HISTORY_LIMIT: usize = 5;

/// The part a run plays in the update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Step(i32),
    Background,
    PrePromotion,
    PostPromotion,
}

impl Role {
    pub(crate) fn kind(self) -> RunKind {
        match self {
            Role::Step(index) => RunKind::Step { index },
            Role::Background => RunKind::Background,
            Role::PrePromotion => RunKind::PrePromotion,
            Role::PostPromotion => RunKind::PostPromotion,
        }
    }

    /// How Argo names the analysis in abort messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Role::Step(_) => "Step-based analysis",
            Role::Background => "Background analysis",
            Role::PrePromotion => "Blue/green pre-promotion analysis",
            Role::PostPromotion => "Blue/green post-promotion analysis",
        }
    }
}

/// What a run's state means for the update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No run yet.
    Missing,
    /// Measuring.
    Pending,
    /// Successful.
    Passed,
    /// Inconclusive: the update is paused on it.
    Inconclusive,
    /// Failed or Error: the update is aborted.
    Failed,
}

impl Verdict {
    /// Whether the update may go past this analysis.
    pub(crate) fn passed(&self) -> bool {
        matches!(self, Verdict::Passed)
    }
}

/// The analysis bookkeeping of one reconcile.
#[derive(Debug, Default)]
pub(crate) struct AnalysisState {
    /// Runs the update still waits on or measures with: never terminated.
    needed: BTreeSet<String>,
    /// Why the update was aborted by an analysis, for the Progressing condition.
    pub(crate) abort_message: Option<String>,
    /// A user resumed an update paused on an Inconclusive run in this reconcile: the
    /// analysis measures again.
    pub(crate) resumed: bool,
    /// Runs created in this reconcile, by role.
    started: Vec<(Role, String)>,
    /// Runs of an aborted attempt to mark at a retry, with their resourceVersions.
    superseded: Vec<(String, Option<String>)>,
}

impl AnalysisState {
    /// Records the runs created in this reconcile in the status at once, so that the next
    /// reconcile knows them as the current runs of their roles.
    pub(crate) fn record_started(&self, status: &mut RolloutStatus) {
        for (role, name) in &self.started {
            *record_slot(status, *role) = Some(RolloutAnalysisRunStatus {
                name: Some(name.clone()),
                status: Some(AnalysisPhase::Pending),
                message: None,
            });
        }
    }
}

/// Argo's event for a run seen in a new phase: `AnalysisRun<Phase>`, a warning for Failed and
/// Error.
fn phase_event(
    role: Role,
    name: &str,
    now: &AnalysisPhase,
    previous: Option<&RolloutAnalysisRunStatus>,
) -> Event {
    let before = previous
        .and_then(|p| p.status.as_ref())
        .map_or_else(|| "NoPreviousStatus".to_string(), |p| p.to_string());
    let kind = match role {
        Role::Step(_) => "Step",
        Role::Background => "Background",
        Role::PrePromotion => build::TYPE_PRE_PROMOTION,
        Role::PostPromotion => build::TYPE_POST_PROMOTION,
    };
    let reason = match now {
        AnalysisPhase::Pending => "AnalysisRunPending",
        AnalysisPhase::Running => "AnalysisRunRunning",
        AnalysisPhase::Successful => "AnalysisRunSuccessful",
        AnalysisPhase::Failed => "AnalysisRunFailed",
        AnalysisPhase::Error => "AnalysisRunError",
        AnalysisPhase::Inconclusive => "AnalysisRunInconclusive",
        AnalysisPhase::Other(_) => "AnalysisRun",
    };
    let message = format!("{kind} Analysis Run '{name}' Status New: '{now}' Previous: '{before}'");
    match now {
        AnalysisPhase::Failed | AnalysisPhase::Error => Event::warning(reason, message),
        _ => Event::normal(reason, message),
    }
}

fn phase(run: &AnalysisRun) -> Option<&AnalysisPhase> {
    run.status.as_ref().and_then(|s| s.phase.as_ref())
}

fn label<'r>(run: &'r AnalysisRun, key: &str) -> Option<&'r str> {
    run.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn annotation<'r>(run: &'r AnalysisRun, key: &str) -> Option<&'r str> {
    run.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn run_name(run: &AnalysisRun) -> &str {
    run.metadata.name.as_deref().unwrap_or_default()
}

fn is_finished(run: &AnalysisRun) -> bool {
    phase(run).is_some_and(AnalysisPhase::is_completed)
}

/// The status record of the run a role uses.
fn record_slot(status: &mut RolloutStatus, role: Role) -> &mut Option<RolloutAnalysisRunStatus> {
    match role {
        Role::Step(_) => {
            &mut status
                .canary
                .get_or_insert_with(Default::default)
                .current_step_analysis_run_status
        }
        Role::Background => {
            &mut status
                .canary
                .get_or_insert_with(Default::default)
                .current_background_analysis_run_status
        }
        Role::PrePromotion => {
            &mut status
                .blue_green
                .get_or_insert_with(Default::default)
                .pre_promotion_analysis_run_status
        }
        Role::PostPromotion => {
            &mut status
                .blue_green
                .get_or_insert_with(Default::default)
                .post_promotion_analysis_run_status
        }
    }
}

/// Annotation on the AnalysisRuns of an aborted attempt, set when the update is retried: they
/// are history, never the current run of the retried update (which measures afresh, as Argo
/// does). Its value is the time of the retry.
pub const SUPERSEDED_BY_RETRY: &str = "rollouts.sluice.dev/superseded-by-retry";

/// When the update was aborted, if this reconcile follows a retry: the abort was lifted while
/// `abortedAt` still records it. Runs created by then belong to the aborted attempt.
pub(crate) fn retried_after(status: &RolloutStatus) -> Option<jiff::Timestamp> {
    if status.abort == Some(true) {
        return None;
    }
    status.aborted_at.as_ref().map(|t| t.0)
}

fn created(run: &AnalysisRun) -> Option<jiff::Timestamp> {
    run.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// A run of an aborted attempt: marked so at a retry, or created before the abort being
/// retried now.
fn superseded(run: &AnalysisRun, retried_after: Option<jiff::Timestamp>) -> bool {
    annotation(run, SUPERSEDED_BY_RETRY).is_some()
        || retried_after.is_some_and(|at| created(run).is_none_or(|c| c <= at))
}

impl<'a> UpdateRuns<'a> {
    /// The run playing `role` for the current pod template and revision, if there is one: the
    /// newest of the run the status records for the role and the runs not asked to terminate
    /// (one whose record was lost, or one created by a reconcile that saw the Rollout newer
    /// than this one did). Runs of an aborted attempt are never current after a retry.
    pub(crate) fn analysis_run(
        &self,
        role: Role,
        revision: i64,
        recorded: Option<&str>,
        retried_after: Option<jiff::Timestamp>,
    ) -> Option<&'a AnalysisRun> {
        let runs = self.role_runs(role, revision);
        // The status names a run of this role and revision that the cache does not hold
        // yet (created by the last reconcile, after a resume): the finished runs before it
        // are done with. Falling back on one of them would pause again on the very
        // Inconclusive run a user just resumed from; without a current run the reconcile
        // asks for the recorded one again, and its 409 waits for the cache.
        let record_unseen = recorded.is_some_and(|name| {
            self.names_role_run(name, role, revision) && !runs.iter().any(|r| run_name(r) == name)
        });
        runs.into_iter()
            .filter(|r| !superseded(r, retried_after))
            .filter(|r| Some(run_name(r)) == recorded || r.spec.terminate != Some(true))
            .filter(|r| !(record_unseen && is_finished(r)))
            .max_by_key(|r| (created(r), run_name(r).to_string()))
    }

    /// Whether `name` is one this Rollout gives a run for `role` at `revision` of the current
    /// pod template (the base name, or it with a collision suffix).
    fn names_role_run(&self, name: &str, role: Role, revision: i64) -> bool {
        let rollout = self.ro.metadata.name.as_deref().unwrap_or_default();
        let base = build::run_name(rollout, self.pod_hash, &revision.to_string(), role.kind());
        build::is_named_after(name, &base)
    }

    /// At a retry, marks the runs of the aborted attempt (see [`SUPERSEDED_BY_RETRY`]).
    pub(crate) fn supersede_aborted_runs(
        &self,
        revision: i64,
        status: &RolloutStatus,
        state: &mut AnalysisState,
    ) {
        let Some(at) = retried_after(status) else {
            return;
        };
        let revision = revision.to_string();
        for run in self.runs.iter() {
            let ours = label(run, POD_TEMPLATE_HASH) == Some(self.pod_hash)
                && annotation(run, REVISION) == Some(revision.as_str());
            if ours
                && annotation(run, SUPERSEDED_BY_RETRY).is_none()
                && created(run).is_none_or(|c| c <= at)
            {
                state.superseded.push((
                    run_name(run).to_string(),
                    run.metadata.resource_version.clone(),
                ));
            }
        }
    }

    /// The runs made for `role` for the current pod template and revision.
    fn role_runs(&self, role: Role, revision: i64) -> Vec<&'a AnalysisRun> {
        let kind = role.kind();
        let revision = revision.to_string();
        self.runs
            .iter()
            .filter(|r| label(r, crate::analysis::ROLLOUT_TYPE) == Some(kind.label()))
            .filter(|r| label(r, POD_TEMPLATE_HASH) == Some(self.pod_hash))
            .filter(|r| match role {
                Role::Step(i) => {
                    label(r, crate::analysis::STEP_INDEX) == Some(i.to_string().as_str())
                }
                _ => true,
            })
            .filter(|r| annotation(r, REVISION) == Some(revision.as_str()))
            .filter(|r| r.metadata.deletion_timestamp.is_none())
            .collect()
    }

    /// Reads the verdict of the run playing `role`, and acts on it: abort on Failed or Error,
    /// pause on Inconclusive (or measure again when a user resumed). Records the run in the
    /// status and marks it needed.
    pub(crate) fn analysis_verdict(
        &self,
        role: Role,
        revision: i64,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        state: &mut AnalysisState,
    ) -> Verdict {
        let previous = record_slot(status, role).clone();
        let recorded = previous.as_ref().and_then(|p| p.name.as_deref());
        let Some(run) = self.analysis_run(role, revision, recorded, retried_after(status)) else {
            *record_slot(status, role) = None;
            return Verdict::Missing;
        };
        let name = run_name(run).to_string();
        state.needed.insert(name.clone());
        let message = run
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .filter(|m| !m.is_empty());
        // As Argo: an event for each phase the run is seen in, against the one recorded.
        if let Some(now) = phase(run) {
            let changed = previous.as_ref().is_none_or(|p| {
                p.name.as_deref() == Some(name.as_str()) && p.status.as_ref() != Some(now)
            });
            if changed {
                events.push(phase_event(role, &name, now, previous.as_ref()));
            }
        }
        *record_slot(status, role) = Some(RolloutAnalysisRunStatus {
            name: Some(name.clone()),
            status: phase(run).cloned().or(Some(AnalysisPhase::Pending)),
            message: message.clone(),
        });
        match phase(run) {
            Some(AnalysisPhase::Successful) => Verdict::Passed,
            Some(AnalysisPhase::Failed | AnalysisPhase::Error) if pauses_on_failure(self.ro) => {
                let seen = seen_as(&previous, &name, |p| {
                    matches!(p, AnalysisPhase::Failed | AnalysisPhase::Error)
                });
                let reason = PauseReason::FailedAnalysisRun;
                self.pause_on(role, reason, &name, seen, status, events, state)
            }
            Some(AnalysisPhase::Failed | AnalysisPhase::Error) => {
                status.abort = Some(true);
                // Argo names the analysis and both phases, whichever of them it was.
                state.abort_message = Some(format!(
                    "{} phase error/failed: {}",
                    role.describe(),
                    run.status
                        .as_ref()
                        .and_then(|s| s.message.as_deref())
                        .unwrap_or_default()
                ));
                Verdict::Failed
            }
            Some(AnalysisPhase::Inconclusive) => {
                let seen = seen_as(&previous, &name, |p| *p == AnalysisPhase::Inconclusive);
                let reason = PauseReason::InconclusiveAnalysisRun;
                self.pause_on(role, reason, &name, seen, status, events, state)
            }
            _ => Verdict::Pending,
        }
    }

    /// Pauses the update on the run `name` for `reason` (an Inconclusive run, or a failed one
    /// the Rollout asked to pause on), or measures again when a user resumed that pause:
    /// `seen` says the status already recorded this run in the phase that paused it.
    #[allow(clippy::too_many_arguments)]
    fn pause_on(
        &self,
        role: Role,
        reason: PauseReason,
        name: &str,
        seen: bool,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        state: &mut AnalysisState,
    ) -> Verdict {
        if has_pause(status, &reason) {
            return Verdict::Inconclusive;
        }
        // The rollout had paused on this very run, and the pause is gone while the
        // controller's pause flag is still up and no pause step or blue-green pause holds it:
        // a user resumed (promote, Argo CD's Resume). Argo measures again with a new run; an
        // unchanged metric pauses the update once more.
        let resumed = status.controller_pause == Some(true)
            && !has_pause(status, &PauseReason::CanaryPauseStep)
            && !has_pause(status, &PauseReason::BlueGreenPause);
        if seen && resumed {
            state.needed.remove(name);
            *record_slot(status, role) = None;
            state.resumed = true;
            return Verdict::Missing;
        }
        events.push(add_pause(status, reason, self.now));
        Verdict::Inconclusive
    }

    /// Creates the run for `role` from the Rollout's `analysis`, once. Returns whether it did;
    /// a run that cannot be built (a template is missing) is reported by
    /// [`UpdateRuns::check_analysis_templates`] before any decision is made.
    pub(crate) fn start_analysis(
        &self,
        role: Role,
        analysis: &RolloutAnalysis,
        revision: i64,
        plan: &mut Plan,
        state: &mut AnalysisState,
    ) -> bool {
        let Ok(run) = self.build_run(role, analysis, revision) else {
            return false;
        };
        let name = run_name(&run).to_string();
        state.needed.insert(name.clone());
        state.started.push((role, name.clone()));
        plan.actions
            .push(Action::CreateAnalysisRun { run: Box::new(run) });
        true
    }

    fn build_run(
        &self,
        role: Role,
        analysis: &RolloutAnalysis,
        revision: i64,
    ) -> Result<AnalysisRun, String> {
        let template = resolve_rollout_analysis(analysis, self.templates)?;
        let existing: BTreeSet<&str> = self.runs.iter().map(run_name).collect();
        let revision = revision.to_string();
        let mut run = build::build_analysis_run(build::RunRequest {
            rollout: self.ro,
            analysis,
            template,
            kind: role.kind(),
            latest_pod_hash: self.pod_hash,
            stable_pod_hash: self.stable_hash,
            revision: &revision,
        })?;
        // A name taken by an earlier run (a retry of the same revision) gets a suffix.
        let base = run_name(&run).to_string();
        let mut n = 1;
        while existing.contains(run_name(&run)) {
            run.metadata.name = Some(build::collision_name(&base, n));
            n += 1;
        }
        Ok(run)
    }

    /// Every template the Rollout's analyses need is present and they merge: otherwise the
    /// spec is invalid, and nothing is decided. The problem reads as Argo's controller reports
    /// it (a field error at the analysis's `templates`), found in its order.
    ///
    /// An analysis naming no templates is not a problem: Argo creates no run for it (and the
    /// step, promotion or post-promotion it gates waits, as Argo's do, until a person promotes),
    /// so neither does [`UpdateRuns::start_analysis`].
    pub(crate) fn check_analysis_templates(&self) -> Result<(), String> {
        for (path, analysis) in analyses_by_field(self.ro) {
            let refs = analysis.templates.as_deref().unwrap_or_default();
            if refs.is_empty() {
                continue;
            }
            let missing = refs
                .iter()
                .map(TemplateKey::of)
                .find(|key| !self.templates.contains_key(key));
            if let Some(key) = missing {
                return Err(format!(
                    "{path}: Invalid value: {:?}: {}",
                    key.name,
                    build::not_found(key.cluster_scope, &key.name)
                ));
            }
            if let Err(e) = resolve_rollout_analysis(analysis, self.templates) {
                // Argo shows the names of the templates, namespaced ones first, as Go prints a
                // list of strings.
                let names: Vec<&str> = [false, true]
                    .into_iter()
                    .flat_map(|cluster| {
                        refs.iter()
                            .filter(move |r| r.is_cluster_scoped() == cluster)
                            .map(|r| r.template_name.as_deref().unwrap_or_default())
                    })
                    .collect();
                return Err(format!(
                    "{path}: Invalid value: \"templateNames: [{}]\": {e}",
                    names.join(" ")
                ));
            }
        }
        Ok(())
    }

    /// Terminates the runs of this Rollout that nothing waits on any more, and deletes
    /// finished ones beyond the history limits.
    pub(crate) fn settle_analysis_runs(&self, plan: &mut Plan, state: &AnalysisState) {
        for (name, resource_version) in &state.superseded {
            let annotations =
                [(SUPERSEDED_BY_RETRY.to_string(), Some(self.now.to_string()))].into();
            plan.actions.push(Action::AnnotateAnalysisRun {
                name: name.clone(),
                resource_version: resource_version.clone(),
                annotations,
            });
        }
        for run in self.runs.iter() {
            let name = run_name(run);
            let terminating = run.spec.terminate == Some(true);
            if !state.needed.contains(name) && !is_finished(run) && !terminating {
                plan.actions.push(Action::TerminateAnalysisRun {
                    name: name.to_string(),
                });
            }
        }
        let limits = self.ro.spec.analysis.as_ref();
        let keep_ok = limits
            .and_then(|l| l.successful_run_history_limit)
            .map_or(DEFAULT_RUN_HISTORY_LIMIT, |n| n.max(0) as usize);
        let keep_bad = limits
            .and_then(|l| l.unsuccessful_run_history_limit)
            .map_or(DEFAULT_RUN_HISTORY_LIMIT, |n| n.max(0) as usize);
        let mut finished: Vec<&AnalysisRun> = self
            .runs
            .iter()
            .filter(|r| is_finished(r) && !state.needed.contains(run_name(r)))
            .collect();
        // Newest first.
        finished.sort_by_key(|r| {
            std::cmp::Reverse((
                r.metadata.creation_timestamp.as_ref().map(|t| t.0),
                run_name(r).to_string(),
            ))
        });
        let (ok, bad): (Vec<&AnalysisRun>, Vec<&AnalysisRun>) = finished
            .into_iter()
            .partition(|r| phase(r) == Some(&AnalysisPhase::Successful));
        for run in ok.iter().skip(keep_ok).chain(bad.iter().skip(keep_bad)) {
            plan.actions.push(Action::DeleteAnalysisRun {
                name: run_name(run).to_string(),
                uid: run.metadata.uid.clone(),
            });
        }
    }
}

/// The merged template of one of the Rollout's analyses, from the observed templates.
/// The Rollout's analyses with the path of their `templates`, in the order Argo's controller
/// looks their templates up: blue-green pre- then post-promotion, canary steps, then the
/// background analysis.
fn analyses_by_field(ro: &Rollout) -> Vec<(String, &RolloutAnalysis)> {
    let Some(strategy) = ro.spec.strategy.as_ref() else {
        return Vec::new();
    };
    let mut analyses = Vec::new();
    if let Some(bg) = &strategy.blue_green {
        for (field, analysis) in [
            ("prePromotionAnalysis", &bg.pre_promotion_analysis),
            ("postPromotionAnalysis", &bg.post_promotion_analysis),
        ] {
            if let Some(analysis) = analysis {
                analyses.push((
                    format!("spec.strategy.blueGreen.{field}.templates"),
                    analysis,
                ));
            }
        }
    } else if let Some(canary) = &strategy.canary {
        for (i, step) in canary.steps.iter().flatten().enumerate() {
            if let Some(analysis) = &step.analysis {
                analyses.push((
                    format!("spec.strategy.canary.steps[{i}].analysis.templates"),
                    analysis,
                ));
            }
        }
        if let Some(background) = &canary.analysis {
            analyses.push((
                "spec.strategy.canary.analysis.templates".to_owned(),
                &background.analysis,
            ));
        }
    }
    analyses
}

fn resolve_rollout_analysis(
    analysis: &RolloutAnalysis,
    templates: &AnalysisTemplates,
) -> Result<sluice_api::analysis::AnalysisTemplateSpec, String> {
    let refs = analysis.templates.clone().unwrap_or_default();
    if refs.is_empty() {
        return Err("an analysis names no templates".into());
    }
    let resolved = build::resolve_nested(&refs, |r| templates.get(&TemplateKey::of(r)).cloned())?;
    build::merge_templates(&resolved)
}

/// The run whose Inconclusive verdict holds the update: the step's, else the background one.
pub(crate) fn inconclusive_run(status: &RolloutStatus) -> String {
    let canary = status.canary.as_ref();
    let step = canary.and_then(|c| c.current_step_analysis_run_status.as_ref());
    let background = canary.and_then(|c| c.current_background_analysis_run_status.as_ref());
    step.filter(|r| {
        matches!(
            r.status,
            Some(AnalysisPhase::Inconclusive | AnalysisPhase::Failed | AnalysisPhase::Error)
        )
    })
    .or(background)
    .or(step)
    .and_then(|r| r.name.clone())
    .unwrap_or_default()
}

/// The Rollout's own annotation asking a failed or erroneous analysis to pause the update
/// rather than abort it (a person then promotes, which measures again, or aborts). Argo has
/// no such field and ignores the annotation.
pub const ON_ANALYSIS_FAILURE: &str = "rollouts.sluice.dev/on-analysis-failure";

/// Whether the Rollout asks a failed analysis to pause its update (`pause`) rather than abort.
fn pauses_on_failure(ro: &Rollout) -> bool {
    ro.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ON_ANALYSIS_FAILURE))
        .is_some_and(|v| v.trim() == "pause")
}

/// Whether the status recorded the run `name` in a phase `phase_matches`.
fn seen_as(
    previous: &Option<RolloutAnalysisRunStatus>,
    name: &str,
    phase_matches: impl Fn(&AnalysisPhase) -> bool,
) -> bool {
    previous.as_ref().is_some_and(|p| {
        p.name.as_deref() == Some(name) && p.status.as_ref().is_some_and(&phase_matches)
    })
}

/// Whether an analysis holds the update: a pause on an Inconclusive run, or on a failed one
/// the Rollout asked to pause on. Nothing moves until a person promotes or aborts.
pub(crate) fn paused_on_analysis(status: &RolloutStatus) -> bool {
    has_pause(status, &PauseReason::InconclusiveAnalysisRun)
        || has_pause(status, &PauseReason::FailedAnalysisRun)
}

/// What a pause on an analysis waits for, as `explain` tells it.
pub(crate) fn analysis_pause_wait(status: &RolloutStatus) -> crate::waits::Wait {
    let run = inconclusive_run(status);
    if has_pause(status, &PauseReason::FailedAnalysisRun) {
        crate::waits::Wait::AnalysisFailedPaused { run }
    } else {
        crate::waits::Wait::AnalysisInconclusive { run }
    }
}
