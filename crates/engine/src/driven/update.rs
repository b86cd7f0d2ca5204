//! One reconcile of a Rollout driving a workload: the checks of what can be driven, the
//! first adoption, a new update (a new update revision), a rollback to the stable revision,
//! an abort and the steady state; the steps of an update in progress are `steps.rs`', its
//! analysis `analysis.rs`'.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::{CanaryStrategy, Rollout, RolloutConditionType as Cond};
use sluice_api::time::whole_seconds;

use super::Driven;
use crate::conditions::{self as c, TRUE};
use crate::controller_revision::{find_revision, revision_number, revision_template};
use crate::observed::{AnalysisTemplates, Observed};
use crate::plan::{Event, Plan, set_requeue};
use crate::update_analysis::{AnalysisState, UpdateRuns, Verdict};
use crate::waits::Wait;
use crate::{phase, steps};

/// How soon a Rollout waiting on the workload's pods looks again, besides the watch of the
/// workload that wakes it on each change.
pub const POD_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// How soon an invalid Rollout is looked at again (what made it invalid may be the workload,
/// which may appear or change), as for every InvalidSpec.
const INVALID_SPEC_RECHECK: std::time::Duration = std::time::Duration::from_secs(20);

/// What a kind's check found: the workload, its ControllerRevisions, the canary strategy; or
/// the InvalidSpec message.
pub(crate) type Checked<'a, W> = Result<(W, &'a [Value], &'a CanaryStrategy), String>;

/// Decides what to do for a Rollout that opted in, with `checked` what its kind's check found.
pub(crate) fn reconcile<'a, W: Driven>(observed: &'a Observed, checked: Checked<'a, W>) -> Plan {
    let ro = &observed.rollout;
    let now = whole_seconds(observed.now);
    let name = ro.metadata.name.as_deref().unwrap_or_default();
    let mut plan = Plan {
        status: ro.status.clone().unwrap_or_default(),
        ..Default::default()
    };
    plan.status.observed_generation = ro.metadata.generation.map(|g| g.to_string());
    // The phase is computed as for any canary, with the workload's size as the Rollout's.
    let mut sized = ro.clone();
    let checked = checked.and_then(|found| {
        // Every AnalysisTemplate the analyses name exists and they merge, as for any Rollout.
        UpdateRuns {
            ro,
            now,
            pod_hash: "",
            stable_hash: None,
            runs: &observed.analysis_runs,
            templates: &observed.analysis_templates,
        }
        .check_analysis_templates()
        .map(|()| found)
    });
    match checked {
        Err(message) => set_invalid_spec(&mut plan, name, message, now),
        Ok((workload, revisions, canary)) => {
            let mut conds = plan.status.conditions.take().unwrap_or_default();
            c::remove(&mut conds, Cond::InvalidSpec);
            plan.status.conditions = Some(conds);
            sized.spec.replicas = Some(workload.size());
            Update {
                ro,
                w: workload,
                revisions,
                canary,
                now,
                analysis_runs: &observed.analysis_runs,
                analysis_templates: &observed.analysis_templates,
                revision: 0,
                analysis: AnalysisState::default(),
                step_verdict: None,
                background: Verdict::Missing,
                events: Vec::new(),
            }
            .run(&mut plan);
        }
    }
    let (phase, message) = phase::calculate(&sized, &plan.status);
    plan.status.phase = Some(phase);
    plan.status.message = (!message.is_empty()).then_some(message);
    if plan.status.abort == Some(true) {
        let message = plan.status.message.clone().unwrap_or_default();
        plan.waits.insert(0, Wait::Aborted { message });
    }
    if plan.status.conditions.as_ref().is_some_and(Vec::is_empty) {
        plan.status.conditions = None;
    }
    plan
}

/// The validation every kind makes first: the Rollout's spec, and a canary strategy.
pub(crate) fn check_spec<'a>(ro: &'a Rollout, kind: &str) -> Result<&'a CanaryStrategy, String> {
    if let Some(problem) = sluice_api::validation::check_rollout(ro).blocking() {
        return Err(problem.to_string());
    }
    ro.spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .ok_or_else(|| format!("a canary strategy is required to drive a {kind}"))
}

fn set_invalid_spec(plan: &mut Plan, name: &str, message: String, now: Timestamp) {
    set_requeue(&mut plan.requeue_after, INVALID_SPEC_RECHECK);
    let message = format!("The Rollout \"{name}\" is invalid: {message}");
    plan.waits = vec![Wait::InvalidSpec {
        message: message.clone(),
    }];
    let mut conds = plan.status.conditions.take().unwrap_or_default();
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

/// One reconcile of a valid Rollout and its workload.
pub(super) struct Update<'a, W> {
    pub ro: &'a Rollout,
    pub w: W,
    pub revisions: &'a [Value],
    pub canary: &'a CanaryStrategy,
    pub now: Timestamp,
    pub analysis_runs: &'a [AnalysisRun],
    pub analysis_templates: &'a AnalysisTemplates,
    /// The ControllerRevision number of the update's revision: the runs' revision.
    pub revision: i64,
    /// The analysis bookkeeping of this reconcile.
    pub analysis: AnalysisState,
    /// The verdict of the current step's run, read before the steps move, with its step.
    pub step_verdict: Option<(i32, Verdict)>,
    pub background: Verdict,
    pub events: Vec<Event>,
}

impl<W: Driven> Update<'_, W> {
    fn run(mut self, plan: &mut Plan) {
        let Some((update, current)) = self.w.revisions() else {
            // The workload's controller has not reported its revisions yet.
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
            self.fill_counts(&mut plan.status, None);
            return;
        };
        self.notice_revision(plan, &update, &current);
        let status = &mut plan.status;
        let pod_hash = status.current_pod_hash.clone().unwrap_or_default();
        let new_is_stable = status.stable_rs.as_deref() == Some(pod_hash.as_str());
        // A full promotion overrides an abort, as in Argo.
        if status.promote_full == Some(true) && status.abort == Some(true) && !new_is_stable {
            status.abort = None;
            status.aborted_at = None;
        }
        // A full promotion skips whatever the update was waiting for, as for a ReplicaSet
        // canary: a pause step's condition left behind kept the finished update Paused.
        if status.promote_full == Some(true) && !new_is_stable {
            status.pause_conditions = None;
            status.controller_pause = None;
        }
        self.revision = revision_number(find_revision(self.revisions, self.w.name(), &pod_hash));
        let mut aborted = status.abort == Some(true) && !new_is_stable;
        let steps_len = steps::steps(self.canary).len() as i32;
        if new_is_stable {
            status.abort = None;
            status.aborted_at = None;
            status.promote_full = None;
            status.current_step_index = Some(steps_len);
            self.w.settle();
        } else if !aborted {
            // Verdicts first: a Failed or Error run aborts before any step moves.
            self.read_verdicts(plan);
            if plan.status.abort != Some(true) {
                self.step_machine(plan, &update);
                self.start_background_analysis(plan);
            }
            aborted = plan.status.abort == Some(true);
        }
        if aborted {
            self.abort(plan, &update, &pod_hash);
        }
        self.settle_analysis(plan);
        let completed = {
            let s = &plan.status;
            s.stable_rs == s.current_pod_hash && self.w.all_updated()
        };
        if !completed && !aborted && plan.waits.is_empty() {
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
        }
        self.fill_counts(&mut plan.status, Some((&update, &current)));
        let revision = self.revision;
        self.conditions(plan, aborted, completed, revision);
        self.w.write(plan, &mut self.events);
        plan.events.append(&mut self.events);
    }

    /// The first look at the workload, a new update revision (the user edited the
    /// template: the steps start over) or a return to the stable one (a rollback, or the
    /// template an abort restored).
    fn notice_revision(&mut self, plan: &mut Plan, update: &str, current: &str) {
        let status = &mut plan.status;
        let steps_len = steps::steps(self.canary).len() as i32;
        let step_hash = steps::step_hash(self.canary);
        let revision_of =
            |hash: &str| revision_number(find_revision(self.revisions, self.w.name(), hash));
        if status.stable_rs.is_none() {
            // Nothing to roll from: the revision all pods run (or ran before the update in
            // progress) is the stable one.
            status.stable_rs = Some(current.to_string());
            status.current_step_hash = Some(step_hash.clone());
            if update == current {
                status.current_pod_hash = Some(update.to_string());
                status.current_step_index = Some(steps_len);
                self.events.push(Event::normal(
                    "RolloutCompleted",
                    format!(
                        "Rollout completed update to revision {} ({update}): Initial deploy",
                        revision_of(update)
                    ),
                ));
                return;
            }
        }
        let stable = status.stable_rs.clone().unwrap_or_default();
        if status.current_pod_hash.as_deref() != Some(update) {
            if update == stable && status.abort == Some(true) {
                // The template the abort restored: still the aborted update.
            } else if update == stable {
                status.current_pod_hash = Some(update.to_string());
                status.current_step_index = Some(steps_len);
                status.pause_conditions = None;
                status.controller_pause = None;
                status.promote_full = None;
                self.events
                    .push(Event::normal("SkipSteps", "Rollback to stable revision"));
            } else {
                status.current_pod_hash = Some(update.to_string());
                status.current_step_index = Some(0);
                status.current_step_hash = Some(step_hash.clone());
                status.abort = None;
                status.aborted_at = None;
                status.promote_full = None;
                status.pause_conditions = None;
                status.controller_pause = None;
                self.events.push(Event::normal(
                    "RolloutUpdated",
                    format!("Rollout updated to revision {}", revision_of(update)),
                ));
            }
        }
        // A changed step list starts the steps of the update in progress over.
        if status.current_step_hash.as_deref() != Some(step_hash.as_str()) {
            if status.current_pod_hash.as_deref() != Some(stable.as_str()) {
                status.current_step_index = Some(0);
                status.pause_conditions = None;
                status.controller_pause = None;
            }
            status.current_step_hash = Some(step_hash);
        }
    }

    /// Back to the stable revision: its template (from its ControllerRevision) goes back into
    /// the workload, and once the workload's controller has made it the update revision, the
    /// workload rolls back exactly the pods that were updated ([`Driven::roll_back`]).
    ///
    /// The template is written only once the abort is recorded in the Rollout's status (a
    /// user's abort is; an analysis verdict's is recorded by this reconcile's status write):
    /// were the status write to fail after the template went back, the next reconcile would
    /// see the stable template and no abort, and take it for a rollback.
    fn abort(&mut self, plan: &mut Plan, update: &str, pod_hash: &str) {
        let recorded = self
            .ro
            .status
            .as_ref()
            .is_some_and(|s| s.abort == Some(true));
        let status = &mut plan.status;
        status.pause_conditions = None;
        status.controller_pause = None;
        status.current_step_index = Some(0);
        if status.aborted_at.is_none() {
            status.aborted_at = Some(Time(self.now));
        }
        let stable = status.stable_rs.clone().unwrap_or_default();
        if update == pod_hash && !recorded {
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
        } else if update == pod_hash {
            match find_revision(self.revisions, self.w.name(), &stable).and_then(revision_template)
            {
                // Already written, the workload's controller not yet caught up: once is enough.
                Some(template) if &template == self.w.template() => {}
                Some(template) => self.w.restore_template(template, stable),
                None => self.events.push(Event::warning(
                    "StableRevisionMissing",
                    format!(
                        "ControllerRevision \"{}-{stable}\" not found: the template of the \
                         stable revision cannot be restored",
                        self.w.name()
                    ),
                )),
            }
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
        } else if !self.w.roll_back(pod_hash, &stable, plan, &mut self.events) {
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
        }
    }
}
