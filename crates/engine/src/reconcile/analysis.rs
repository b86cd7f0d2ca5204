//! Analysis during a ReplicaSet update: the verdicts of the runs the update uses now (the
//! runs themselves, and what a verdict does, are `crate::update_analysis`'s).

use sluice_api::rollout::{CanaryStepAction, RolloutStatus};

use super::World;
use super::spec::Strategy;
use crate::plan::Event;
use crate::steps;
#[cfg(test)]
pub(super) use crate::update_analysis::SUPERSEDED_BY_RETRY;
pub(super) use crate::update_analysis::{
    AnalysisState, Role, UpdateRuns, Verdict, inconclusive_run,
};

impl<'a> World<'a> {
    /// The Rollout's runs, for the update to the new ReplicaSet's pod-template hash.
    pub(super) fn runs(&self) -> UpdateRuns<'a> {
        let stable_hash = self
            .ro
            .status
            .as_ref()
            .and_then(|s| s.stable_rs.as_deref())
            .or_else(|| {
                self.stable_rs
                    .and_then(|rs| crate::observed::ReplicaSetExt::pod_hash(rs))
            });
        UpdateRuns {
            ro: self.ro,
            now: self.now,
            pod_hash: &self.spec.pod_hash,
            stable_hash,
            runs: self.analysis_runs,
            templates: self.analysis_templates,
        }
    }
}

/// The verdicts of the runs the update may wait on; `Missing` where there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Verdicts {
    pub(super) step: Verdict,
    /// The current experiment step's Experiment.
    pub(super) experiment: Verdict,
    pub(super) background: Verdict,
    pub(super) pre_promotion: Verdict,
    pub(super) post_promotion: Verdict,
}

impl Default for Verdicts {
    fn default() -> Self {
        Self {
            step: Verdict::Missing,
            experiment: Verdict::Missing,
            background: Verdict::Missing,
            pre_promotion: Verdict::Missing,
            post_promotion: Verdict::Missing,
        }
    }
}

impl World<'_> {
    /// Reads (and acts on) the verdict of every run the update currently uses.
    pub(super) fn read_verdicts(
        &self,
        revision: i64,
        status: &mut RolloutStatus,
        events: &mut Vec<Event>,
        state: &mut AnalysisState,
    ) -> Verdicts {
        self.runs().supersede_aborted_runs(revision, status, state);
        let mut v = Verdicts::default();
        match &self.spec.strategy {
            Strategy::Canary(canary) => {
                let index = status.current_step_index.unwrap_or(0);
                let at_analysis_step = steps::current_step(canary, index)
                    .is_some_and(|s| matches!(s.action(), Some(CanaryStepAction::Analysis(_))));
                if at_analysis_step {
                    v.step = self.runs().analysis_verdict(
                        Role::Step(index),
                        revision,
                        status,
                        events,
                        state,
                    );
                } else if let Some(c) = status.canary.as_mut() {
                    c.current_step_analysis_run_status = None;
                }
                if canary.analysis.is_some() {
                    v.background = self.runs().analysis_verdict(
                        Role::Background,
                        revision,
                        status,
                        events,
                        state,
                    );
                }
                v.experiment = self.experiment_verdict(revision, status, events, state);
            }
            Strategy::BlueGreen(bg) => {
                if bg.pre_promotion_analysis.is_some() {
                    v.pre_promotion = self.runs().analysis_verdict(
                        Role::PrePromotion,
                        revision,
                        status,
                        events,
                        state,
                    );
                }
                if bg.post_promotion_analysis.is_some() {
                    v.post_promotion = self.runs().analysis_verdict(
                        Role::PostPromotion,
                        revision,
                        status,
                        events,
                        state,
                    );
                }
            }
        }
        v
    }
}

/// A blue-green promotion analysis still measuring is what the update waits for.
pub(super) fn promotion_analysis_waits(
    u: &super::Update,
    bgs: &sluice_api::rollout::BlueGreenStatus,
    plan: &mut crate::Plan,
) {
    for (verdict, run) in [
        (
            &u.verdicts.pre_promotion,
            &bgs.pre_promotion_analysis_run_status,
        ),
        (
            &u.verdicts.post_promotion,
            &bgs.post_promotion_analysis_run_status,
        ),
    ] {
        if *verdict == Verdict::Pending
            && let Some(run) = run.as_ref().and_then(|r| r.name.clone())
        {
            plan.waits.push(crate::Wait::AnalysisRunning { run });
        }
    }
}
