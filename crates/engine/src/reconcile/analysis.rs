//! Analysis during a ReplicaSet update: the verdicts of the runs the update uses now (the
//! runs themselves, and what a verdict does, are `crate::update_analysis`'s).

use sluice_api::rollout::{CanaryStepAction, RolloutStatus};

use super::World;
use super::spec::Strategy;
use crate::plan::Event;
use crate::steps;
#[cfg(test)]
pub(super) use crate::update_analysis::SUPERSEDED_BY_RETRY;
pub(super) use crate::update_analysis::{AnalysisState, Role, UpdateRuns, Verdict};

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

/// Puts the `AnalysisRun<Phase>` events of this pass where Argo's passes put them. Argo reads
/// the runs' verdicts after it has reconciled the Services (and, for blue-green, scaled), and
/// handles an abort in the pass after the one that sees the run fail: its `RolloutAborted`
/// follows the failed run's event, and the Services and routers go back after it. Sluice
/// reads the verdicts first and acts on them in the same pass, so the events are moved:
/// - an abort this pass decided on a verdict: `RolloutAborted` right after the verdicts;
/// - otherwise, for blue-green, the verdicts after the pass's first scalings and Service
///   switches.
///
/// `verdicts` is where the verdicts' events are; only the events change order.
pub(super) fn order_verdict_events(
    events: &mut Vec<Event>,
    verdicts: std::ops::Range<usize>,
    aborted_by_analysis: bool,
    blue_green: bool,
) {
    let end = verdicts.end.min(events.len());
    if aborted_by_analysis {
        let aborted = events[end..]
            .iter()
            .rposition(|e| e.reason == crate::conditions::ROLLOUT_ABORTED);
        if let Some(i) = aborted {
            let event = events.remove(end + i);
            events.insert(end, event);
        }
        return;
    }
    if !blue_green {
        return;
    }
    let start = verdicts.start.min(end);
    let is_phase = |e: &Event| e.reason.starts_with("AnalysisRun");
    let phases: Vec<Event> = events[start..end]
        .iter()
        .filter(|e| is_phase(e))
        .cloned()
        .collect();
    if phases.is_empty() {
        return;
    }
    let kept: Vec<Event> = events[start..end]
        .iter()
        .filter(|e| !is_phase(e))
        .cloned()
        .collect();
    let after: Vec<Event> = events.drain(start..).skip(end - start).collect();
    let first_pass = after
        .iter()
        .take_while(|e| matches!(e.reason, "ScalingReplicaSet" | "SwitchService"))
        .count();
    events.extend(kept);
    events.extend(after[..first_pass].iter().cloned());
    events.extend(phases);
    events.extend(after[first_pass..].iter().cloned());
}
