//! Analysis of an update of a driven workload: `analysis` steps and the background analysis, with the
//! runs and verdicts every update uses (`crate::update_analysis`): a Failed or Error run
//! aborts the update, an Inconclusive one pauses it until a user resumes (a new run measures)
//! or aborts. The runs carry the update revision's hash as their pod-template hash and its
//! ControllerRevision's number as their revision.

use sluice_api::rollout::{
    CanaryStepAction, RolloutAnalysis, RolloutAnalysisRunStatus, RolloutStatus,
};

use super::Driven;
use super::update::Update;
use crate::plan::{Action, Plan};
use crate::steps;
use crate::update_analysis::{Role, UpdateRuns, Verdict};
use crate::waits::Wait;

/// The hashes a run is made for: the update's, and the stable one.
fn hashes(status: &RolloutStatus) -> (String, Option<String>) {
    (
        status.current_pod_hash.clone().unwrap_or_default(),
        status.stable_rs.clone(),
    )
}

fn recorded_step_run(status: &RolloutStatus) -> Option<&RolloutAnalysisRunStatus> {
    status
        .canary
        .as_ref()
        .and_then(|c| c.current_step_analysis_run_status.as_ref())
}

impl<'a, W: Driven> Update<'a, W> {
    /// The Rollout's runs, for the update to `pod_hash`.
    pub(super) fn runs<'b>(&self, pod_hash: &'b str, stable: Option<&'b str>) -> UpdateRuns<'b>
    where
        'a: 'b,
    {
        UpdateRuns {
            ro: self.ro,
            now: self.now,
            pod_hash,
            stable_hash: stable,
            runs: self.analysis_runs,
            templates: self.analysis_templates,
        }
    }

    /// Reads the verdicts of the current step's run and of the background run before the
    /// steps move: a Failed or Error run sets the abort in this reconcile.
    pub(super) fn read_verdicts(&mut self, plan: &mut Plan) {
        let status = &mut plan.status;
        let (pod_hash, stable) = hashes(status);
        let runs = self.runs(&pod_hash, stable.as_deref());
        runs.supersede_aborted_runs(self.revision, status, &mut self.analysis);
        let index = status.current_step_index.unwrap_or(0);
        let at_analysis_step = steps::current_step(self.canary, index)
            .is_some_and(|s| matches!(s.action(), Some(CanaryStepAction::Analysis(_))));
        if at_analysis_step {
            let verdict = runs.analysis_verdict(
                Role::Step(index),
                self.revision,
                status,
                &mut self.events,
                &mut self.analysis,
            );
            self.step_verdict = Some((index, verdict));
        } else if let Some(c) = status.canary.as_mut() {
            c.current_step_analysis_run_status = None;
        }
        if self.canary.analysis.is_some() {
            self.background = runs.analysis_verdict(
                Role::Background,
                self.revision,
                status,
                &mut self.events,
                &mut self.analysis,
            );
        }
    }

    /// Whether an Inconclusive run holds the update (nothing moves until a user resumes or
    /// aborts); says so in the plan's waits.
    pub(super) fn held_by_analysis(&self, plan: &mut Plan) -> bool {
        let held = crate::update_analysis::paused_on_analysis(&plan.status);
        if held {
            plan.waits
                .push(crate::update_analysis::analysis_pause_wait(&plan.status));
        }
        held
    }

    /// An `analysis` step: done once its run is Successful. Without a run (the step was just
    /// reached, or a user resumed after an Inconclusive one) the run is created, unless the
    /// update is paused. Returns whether the step is done.
    pub(super) fn analysis_step(
        &mut self,
        plan: &mut Plan,
        analysis: &RolloutAnalysis,
        index: i32,
    ) -> bool {
        let (pod_hash, stable) = hashes(&plan.status);
        let runs = self.runs(&pod_hash, stable.as_deref());
        let verdict = match self.step_verdict.take() {
            Some((at, verdict)) if at == index => verdict,
            // Reached in this reconcile: its run is read now.
            _ => runs.analysis_verdict(
                Role::Step(index),
                self.revision,
                &mut plan.status,
                &mut self.events,
                &mut self.analysis,
            ),
        };
        match verdict {
            Verdict::Passed => true,
            Verdict::Missing => {
                let unpaused = plan
                    .status
                    .pause_conditions
                    .as_ref()
                    .is_none_or(Vec::is_empty);
                if unpaused
                    && runs.start_analysis(
                        Role::Step(index),
                        analysis,
                        self.revision,
                        plan,
                        &mut self.analysis,
                    )
                    && let Some(Action::CreateAnalysisRun { run }) = plan.actions.last()
                {
                    let run = run.metadata.name.clone().unwrap_or_default();
                    plan.waits.push(Wait::AnalysisRunning { run });
                }
                false
            }
            Verdict::Pending => {
                let run = recorded_step_run(&plan.status)
                    .and_then(|r| r.name.clone())
                    .unwrap_or_default();
                plan.waits.push(Wait::AnalysisRunning { run });
                false
            }
            Verdict::Inconclusive => {
                plan.waits
                    .push(crate::update_analysis::analysis_pause_wait(&plan.status));
                false
            }
            // The abort is acted on once the steps stop.
            Verdict::Failed => false,
        }
    }

    /// The background analysis runs from its starting step until the update completes; it is
    /// created when there is none and nothing pauses the update.
    pub(super) fn start_background_analysis(&mut self, plan: &mut Plan) {
        let Some(background) = self.canary.analysis.as_ref() else {
            return;
        };
        let status = &plan.status;
        let due = self.background == Verdict::Missing
            && status.promote_full != Some(true)
            && status.abort != Some(true)
            && status.stable_rs != status.current_pod_hash
            && status.current_step_index.unwrap_or(0) >= background.starting_step.unwrap_or(0)
            && status.pause_conditions.as_ref().is_none_or(Vec::is_empty);
        if !due {
            return;
        }
        let (pod_hash, stable) = hashes(status);
        self.runs(&pod_hash, stable.as_deref()).start_analysis(
            Role::Background,
            &background.analysis,
            self.revision,
            plan,
            &mut self.analysis,
        );
    }

    /// After the decisions: the runs created are recorded in the status, a resume acted on
    /// ends the controller's pause, and runs nothing waits on are terminated (finished ones
    /// beyond the history limits deleted).
    pub(super) fn settle_analysis(&mut self, plan: &mut Plan) {
        let status = &mut plan.status;
        if self.analysis.resumed && status.pause_conditions.as_ref().is_none_or(Vec::is_empty) {
            status.controller_pause = None;
        }
        self.analysis.record_started(status);
        let (pod_hash, stable) = hashes(status);
        self.runs(&pod_hash, stable.as_deref())
            .settle_analysis_runs(plan, &self.analysis);
    }
}
