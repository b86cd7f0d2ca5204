//! One reconcile of a Rollout driving a StatefulSet: the checks of what can be driven, the
//! first adoption, a new update (a new update revision), a rollback to the stable revision,
//! an abort and the steady state; the steps of an update in progress are `steps.rs`', its
//! analysis `analysis.rs`'.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::{CanaryStrategy, Rollout, RolloutConditionType as Cond};
use sluice_api::time::whole_seconds;

use super::model::Sts;
use super::{POD_RECHECK, StatefulSetObserved, UPDATED_STATEFUL_SET, stateful_set_name};
use crate::conditions::{self as c, TRUE};
use crate::controller_revision::{
    REVISION_LABEL, find_revision, pod_is_ready, revision_number, revision_template,
};
use crate::observed::{AnalysisTemplates, Observed};
use crate::plan::{Action, Event, Plan, set_requeue};
use crate::update_analysis::{AnalysisState, UpdateRuns, Verdict};
use crate::waits::Wait;
use crate::{phase, steps};

/// How soon an invalid Rollout is looked at again (what made it invalid may be the
/// StatefulSet, which may appear or change), as for every InvalidSpec.
const INVALID_SPEC_RECHECK: std::time::Duration = std::time::Duration::from_secs(20);

/// Decides what to do for a Rollout that opted in ([`super::STATEFULSET`]).
pub fn reconcile(observed: &Observed) -> Plan {
    let ro = &observed.rollout;
    let now = whole_seconds(observed.now);
    let name = ro.metadata.name.as_deref().unwrap_or_default();
    let mut plan = Plan {
        status: ro.status.clone().unwrap_or_default(),
        ..Default::default()
    };
    plan.status.observed_generation = ro.metadata.generation.map(|g| g.to_string());
    // The phase is computed as for any canary, with the StatefulSet's size as the Rollout's.
    let mut sized = ro.clone();
    let checked = check(ro, observed.stateful_set.as_ref()).and_then(|found| {
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
        Ok((sts, revisions, canary)) => {
            let mut conds = plan.status.conditions.take().unwrap_or_default();
            c::remove(&mut conds, Cond::InvalidSpec);
            plan.status.conditions = Some(conds);
            sized.spec.replicas = Some(sts.replicas());
            Update {
                ro,
                sts,
                revisions,
                canary,
                now,
                analysis_runs: &observed.analysis_runs,
                analysis_templates: &observed.analysis_templates,
                pods: &observed.pods,
                revision: 0,
                analysis: AnalysisState::default(),
                step_verdict: None,
                background: Verdict::Missing,
                edit: Edit::default(),
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

/// What this version can drive: a valid spec and an existing StatefulSet with the
/// `RollingUpdate` strategy. `Err` is the InvalidSpec message.
fn check<'a>(
    ro: &'a Rollout,
    observed: Option<&'a StatefulSetObserved>,
) -> Result<(Sts<'a>, &'a [Value], &'a CanaryStrategy), String> {
    if let Some(problem) = sluice_api::validation::check_rollout(ro).blocking() {
        return Err(problem.to_string());
    }
    let name = stateful_set_name(ro).unwrap_or_default();
    let canary = ro
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .ok_or("a canary strategy is required to drive a StatefulSet")?;
    let Some(object) = observed.and_then(|o| o.stateful_set.as_ref()) else {
        return Err(format!("statefulsets.apps \"{name}\" not found"));
    };
    let sts = Sts(object);
    if sts.strategy_type() != "RollingUpdate" {
        return Err(format!(
            "StatefulSet \"{name}\": spec.updateStrategy.type: Unsupported value: \"{}\": \
             supported values: \"RollingUpdate\" (a partition means nothing to {0})",
            sts.strategy_type()
        ));
    }
    let revisions = observed.map_or(&[][..], |o| o.revisions.as_slice());
    Ok((sts, revisions, canary))
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

/// The StatefulSet's fields a reconcile changes; all go in one write (two writes at the same
/// resourceVersion would make the second conflict).
#[derive(Debug, Default)]
pub(super) struct Edit {
    pub partition: Option<i32>,
    /// The stable revision's template, with the hash of that revision (an abort).
    pub template: Option<(Value, String)>,
}

/// One reconcile of a valid Rollout and its StatefulSet.
pub(super) struct Update<'a> {
    pub ro: &'a Rollout,
    pub sts: Sts<'a>,
    pub revisions: &'a [Value],
    pub canary: &'a CanaryStrategy,
    pub now: Timestamp,
    pub analysis_runs: &'a [AnalysisRun],
    pub analysis_templates: &'a AnalysisTemplates,
    /// The StatefulSet's pods, read only while an abort rolls them back ([`super::pods_wanted`]).
    pub pods: &'a [Pod],
    /// The ControllerRevision number of the update's revision: the runs' revision.
    pub revision: i64,
    /// The analysis bookkeeping of this reconcile.
    pub analysis: AnalysisState,
    /// The verdict of the current step's run, read before the steps move, with its step.
    pub step_verdict: Option<(i32, Verdict)>,
    pub background: Verdict,
    pub edit: Edit,
    pub events: Vec<Event>,
}

impl Update<'_> {
    fn run(mut self, plan: &mut Plan) {
        let Some((update, current)) = self.sts.revisions() else {
            // The StatefulSet controller has not reported its revisions yet.
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
            self.fill_counts(&mut plan.status, None);
            return;
        };
        let (update, current) = (update.to_string(), current.to_string());
        self.notice_revision(plan, &update, &current);
        let status = &mut plan.status;
        let pod_hash = status.current_pod_hash.clone().unwrap_or_default();
        let new_is_stable = status.stable_rs.as_deref() == Some(pod_hash.as_str());
        // A full promotion overrides an abort, as in Argo.
        if status.promote_full == Some(true) && status.abort == Some(true) && !new_is_stable {
            status.abort = None;
            status.aborted_at = None;
        }
        self.revision = revision_number(find_revision(self.revisions, self.sts.name(), &pod_hash));
        let mut aborted = status.abort == Some(true) && !new_is_stable;
        let steps_len = steps::steps(self.canary).len() as i32;
        if new_is_stable {
            status.abort = None;
            status.aborted_at = None;
            status.promote_full = None;
            status.current_step_index = Some(steps_len);
            self.close_partition_when_settled();
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
            s.stable_rs == s.current_pod_hash && self.sts.all_updated()
        };
        if !completed && !aborted && plan.waits.is_empty() {
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
        }
        self.fill_counts(&mut plan.status, Some((&update, &current)));
        let revision = self.revision;
        self.conditions(plan, aborted, completed, revision);
        self.write(plan);
        plan.events.append(&mut self.events);
    }

    /// The first look at the StatefulSet, a new update revision (the user edited the
    /// template: the steps start over) or a return to the stable one (a rollback, or the
    /// template an abort restored).
    fn notice_revision(&mut self, plan: &mut Plan, update: &str, current: &str) {
        let status = &mut plan.status;
        let steps_len = steps::steps(self.canary).len() as i32;
        let step_hash = steps::step_hash(self.canary);
        let revision_of =
            |hash: &str| revision_number(find_revision(self.revisions, self.sts.name(), hash));
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
    /// the StatefulSet, and the partition stays where it was, so the StatefulSet controller
    /// rolls back exactly the pods that were updated, ordinal by ordinal.
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
            match find_revision(self.revisions, self.sts.name(), &stable)
                .and_then(revision_template)
            {
                // Already written, the StatefulSet controller not yet caught up: once is enough.
                Some(template) if template == self.sts.0["spec"]["template"] => {}
                Some(template) => self.edit.template = Some((template, stable)),
                None => self.events.push(Event::warning(
                    "StableRevisionMissing",
                    format!(
                        "ControllerRevision \"{}-{stable}\" not found: the template of the \
                         stable revision cannot be restored",
                        self.sts.name()
                    ),
                )),
            }
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
        } else if !self.close_partition_when_settled() {
            self.evict_stuck_pods(plan, pod_hash);
            set_requeue(&mut plan.requeue_after, POD_RECHECK);
        }
    }

    /// With the stable template back, the StatefulSet controller replaces the aborted
    /// revision's pods one by one, but it waits for a pod that is not Ready before it touches
    /// any other (Kubernetes' "forced rollback": the pods of a template that never got ready
    /// have to be deleted by hand). Those pods are evicted, so the rollback goes on.
    fn evict_stuck_pods(&mut self, plan: &mut Plan, aborted: &str) {
        let revision = format!("{}-{aborted}", self.sts.name());
        for pod in self.pods {
            let on_aborted = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_LABEL))
                == Some(&revision);
            if !on_aborted || pod.metadata.deletion_timestamp.is_some() || pod_is_ready(pod) {
                continue;
            }
            let name = pod.metadata.name.clone().unwrap_or_default();
            self.events.push(Event::normal(
                "EvictedStuckPod",
                format!(
                    "Evicted pod {name}: it runs the aborted revision {aborted} and is not ready, \
                     and the StatefulSet controller waits for it before rolling back"
                ),
            ));
            plan.actions.push(Action::EvictPod {
                name,
                uid: pod.metadata.uid.clone(),
            });
        }
    }

    /// Once every pod runs the current revision, the partition goes back to the replica count:
    /// the next template edit then updates no pod before a step asks for it. Returns whether
    /// the pods are settled.
    pub(super) fn close_partition_when_settled(&mut self) -> bool {
        let settled = self.sts.all_updated();
        let replicas = self.sts.replicas();
        if settled && self.sts.partition().unwrap_or(0) < replicas {
            self.edit.partition = Some(replicas);
        }
        settled
    }

    /// The plan's one write of the StatefulSet: the object as read, with the partition and
    /// template changed, carrying the resourceVersion it was read at.
    fn write(&mut self, plan: &mut Plan) {
        let edit = std::mem::take(&mut self.edit);
        if edit.partition.is_none() && edit.template.is_none() {
            return;
        }
        let mut object = self.sts.0.clone();
        let name = self.sts.name().to_string();
        // The status is not the Rollout's to write, and the API server ignores it here.
        if let Some(fields) = object.as_object_mut() {
            fields.remove("status");
        }
        if let Some(partition) = edit.partition {
            let from = self
                .sts
                .partition()
                .map_or("unset".to_string(), |p| p.to_string());
            object["spec"]["updateStrategy"]["type"] = "RollingUpdate".into();
            object["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = partition.into();
            self.events.push(Event::normal(
                UPDATED_STATEFUL_SET,
                format!("Set the partition of StatefulSet {name} to {partition} (from {from})"),
            ));
        }
        if let Some((template, hash)) = edit.template {
            object["spec"]["template"] = template;
            self.events.push(Event::normal(
                UPDATED_STATEFUL_SET,
                format!("Restored the template of StatefulSet {name} to revision {hash}"),
            ));
        }
        plan.actions.push(Action::UpdateStatefulSet {
            name,
            object: Box::new(object),
        });
    }
}
