//! Mutation tests of what the AnalysisRuns of an update, the Experiments' and StatefulSets'
//! of a canary, the notifications and the lease must satisfy: an Inconclusive verdict holding
//! the update, one run measuring per key, the runs at the end, the runs a resume makes, the
//! ReplicaSets an Experiment leaves, an analysis step gating a StatefulSet's partition and an
//! abort rolling it back, notifications sent at most and at least once, and one writer per
//! lease term. Each plants a bug in the Rollout loop's write path (a plan or a writer changed
//! before it is applied), but the last: the bug it plants is in the election loop, above any
//! write path, through a test-only switch of the simulation.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::rollout::{CanaryStep, PauseReason};
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_controller::loops::apply::{Applied, apply_plan};
use sluice_controller::loops::notification_driver::PENDING;
use sluice_engine::observed::TemplateKey;
use sluice_engine::{Action, Plan};
use sluice_sim::controller::BoxFuture;
use sluice_sim::invariants::stateful_sets::{ANALYSIS_GATES_THE_PARTITION, SETTLED};
use sluice_sim::invariants::{
    AT_LEAST_ONCE, AT_MOST_ONCE, NO_ORPHANED_EXPERIMENT_REPLICA_SETS, ONE_LIVE_RUN,
    ONE_WRITER_PER_TERM, PAUSED_UNTIL_PROMOTED, RUNS_AT_END, UPDATE_HELD,
};
use sluice_sim::net::SimWriter;

use super::{has_pause, seeds_to_catch};

fn steps(ro: &Rollout) -> Vec<CanaryStep> {
    ro.spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.steps.clone())
        .unwrap_or_default()
}

/// The step the observed Rollout is at, with its index.
fn observed_step(ro: &Rollout) -> Option<(i32, CanaryStep)> {
    let index = ro
        .status
        .as_ref()
        .and_then(|s| s.current_step_index)
        .unwrap_or(0);
    let step = steps(ro).get(usize::try_from(index).ok()?)?.clone();
    Some((index, step))
}

fn observed_pause(ro: &Rollout, reason: &PauseReason) -> bool {
    ro.status.as_ref().is_some_and(|s| {
        s.pause_conditions
            .iter()
            .flatten()
            .any(|c| c.reason.as_ref() == Some(reason))
    })
}

fn apply(w: SimWriter, ro: Rollout, plan: Plan) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

/// Pauses only at pause steps: while the update waits on an Inconclusive run, its `setWeight`
/// steps still complete one after the other, as if the `InconclusiveAnalysisRun` pause were
/// only a note until the next pause step.
fn weights_go_on_while_inconclusive(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    let paused = observed_pause(&ro, &PauseReason::InconclusiveAnalysisRun)
        && has_pause(&plan, &PauseReason::InconclusiveAnalysisRun);
    if let Some((index, step)) = observed_step(&ro)
        && paused
        && step.set_weight.is_some()
        && plan.status.abort != Some(true)
        && plan.status.current_step_index == Some(index)
    {
        plan.status.current_step_index = Some(index + 1);
    }
    apply(w, ro, plan)
}

#[test]
fn weight_steps_taken_while_inconclusive_are_caught() {
    seeds_to_catch(
        "inconclusive-background-analysis",
        weights_go_on_while_inconclusive,
        UPDATE_HELD,
    );
}

/// A run the Rollout's status does not record yet is taken for none: the background run is
/// started again under the next free name (Argo's `.1` on a collision), though the one found
/// measures the same thing. A record goes missing whenever a status write conflicts or the
/// reconcile decides from a Rollout its cache has not brought up to date.
fn start_an_unrecorded_run_again(
    w: SimWriter,
    ro: Rollout,
    plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    let recorded = |status: &sluice_api::rollout::RolloutStatus| {
        status
            .canary
            .as_ref()
            .and_then(|c| c.current_background_analysis_run_status.as_ref())
            .and_then(|r| r.name.clone())
    };
    let found = recorded(&plan.status).filter(|name| {
        ro.status.as_ref().and_then(recorded).is_none()
            && !plan.actions.iter().any(|a| match a {
                Action::CreateAnalysisRun { run } => run.metadata.name.as_ref() == Some(name),
                _ => false,
            })
    });
    Box::pin(async move {
        if let Some(name) = found {
            let runs = w.list_analysis_runs("default").await?;
            if let Some(run) = runs
                .iter()
                .find(|r| r.metadata.name.as_ref() == Some(&name))
            {
                let mut again = run.clone();
                again.metadata.name = Some(sluice_engine::analysis::collision_name(&name, 1));
                again.metadata.uid = None;
                again.metadata.resource_version = None;
                again.metadata.creation_timestamp = None;
                again.status = None;
                match w.create_analysis_run("default", &again).await {
                    // The name is taken: the twin was made by an earlier pass.
                    Ok(()) | Err(WriteError::Conflict) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        apply_plan(&w, &ro, &plan).await
    })
}

#[test]
fn a_run_started_again_beside_its_twin_is_caught() {
    seeds_to_catch(
        "inconclusive-background-analysis",
        start_an_unrecorded_run_again,
        ONE_LIVE_RUN,
    );
}

/// Runs nothing waits on any more are left measuring: no terminate is sent when their update
/// is superseded, rolled back or completed.
fn leave_runs_measuring(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    plan.actions
        .retain(|a| !matches!(a, Action::TerminateAnalysisRun { .. }));
    apply(w, ro, plan)
}

#[test]
fn a_run_left_measuring_after_its_update_is_caught() {
    seeds_to_catch(
        "superseded-background-analysis",
        leave_runs_measuring,
        RUNS_AT_END,
    );
}

/// A resume that does not measure again: the run a user's resume calls for is never created
/// and the status keeps naming the old Inconclusive run, so the update judges that run once
/// more and pauses on it again, one run where the resume should have made two. (Dropping only
/// the create is not this bug: the status then names the new run, and the next reconcile
/// asks for it again.)
fn resume_without_a_new_run(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    let inconclusive = ro.status.as_ref().and_then(|s| {
        let recorded = s
            .canary
            .as_ref()
            .and_then(|c| c.current_background_analysis_run_status.as_ref())
            .filter(|r| r.status == Some(sluice_api::common::AnalysisPhase::Inconclusive));
        (s.controller_pause == Some(true) && s.pause_conditions.as_ref().is_none_or(Vec::is_empty))
            .then_some(recorded)
            .flatten()
            .cloned()
    });
    if let Some(old) = inconclusive {
        plan.actions
            .retain(|a| !matches!(a, Action::CreateAnalysisRun { .. }));
        plan.status
            .canary
            .get_or_insert_with(Default::default)
            .current_background_analysis_run_status = Some(old);
    }
    apply(w, ro, plan)
}

#[test]
fn a_resume_that_does_not_measure_again_is_caught() {
    seeds_to_catch(
        "inconclusive-background-analysis",
        resume_without_a_new_run,
        PAUSED_UNTIL_PROMOTED,
    );
}

/// The Rollout lists itself as an owner of its Experiments' ReplicaSets too (a second owner
/// reference, not the controller, so that deleting the Rollout would take them): when it
/// deletes an Experiment, the garbage collector keeps them, an owner being left. (The scenario
/// deletes an Experiment in the seeds where a second update replaces the first.)
fn co_own_experiment_replica_sets(
    w: SimWriter,
    ro: Rollout,
    plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move {
        let uid = ro.metadata.uid.clone().unwrap_or_default();
        let name = ro.metadata.name.clone().unwrap_or_default();
        let experiments: Vec<String> = w
            .list_experiments("default")
            .await?
            .into_iter()
            .filter(|e| {
                e.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.controller == Some(true) && o.uid == uid)
            })
            .filter_map(|e| e.metadata.name)
            .collect();
        for rs in w.list_replica_sets("default").await? {
            let owners = rs.metadata.owner_references.clone().unwrap_or_default();
            let of_ours = owners.iter().any(|o| {
                o.controller == Some(true)
                    && o.kind == "Experiment"
                    && experiments.contains(&o.name)
            });
            if !of_ours || owners.iter().any(|o| o.uid == uid) {
                continue;
            }
            let mut refs = serde_json::to_value(&owners).unwrap_or(Value::Null);
            if let Some(list) = refs.as_array_mut() {
                list.push(json!({
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "Rollout",
                    "name": name,
                    "uid": uid,
                }));
            }
            let patch = json!({"metadata": {
                "resourceVersion": rs.metadata.resource_version,
                "ownerReferences": refs,
            }});
            let rs_name = rs.metadata.name.clone().unwrap_or_default();
            match w.patch_replica_set("default", &rs_name, &patch).await {
                // Changed or gone meanwhile: the next reconcile looks again.
                Ok(()) | Err(WriteError::Conflict | WriteError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        apply_plan(&w, &ro, &plan).await
    })
}

#[test]
fn experiment_replica_sets_kept_past_their_experiment_are_caught() {
    seeds_to_catch(
        "experiment-step",
        co_own_experiment_replica_sets,
        NO_ORPHANED_EXPERIMENT_REPLICA_SETS,
    );
}

/// An analysis step that does not wait for its verdict: the step completes once its run is
/// started, and the next weight lowers the partition while the run still measures.
fn analysis_step_without_waiting(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    if let Some((index, step)) = observed_step(&ro)
        && step.analysis.is_some()
        && plan.status.abort != Some(true)
        && plan.status.current_step_index == Some(index)
    {
        plan.status.current_step_index = Some(index + 1);
    }
    apply(w, ro, plan)
}

#[test]
fn a_partition_lowered_past_a_pending_analysis_is_caught() {
    seeds_to_catch(
        "statefulset-canary",
        analysis_step_without_waiting,
        ANALYSIS_GATES_THE_PARTITION,
    );
}

/// An abort that only stops the steps: the StatefulSet is left as it is, its template not set
/// back to the stable revision's, so the pods already updated keep the aborted revision.
fn abort_without_rolling_back(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    if plan.status.abort == Some(true) {
        plan.actions
            .retain(|a| !matches!(a, Action::UpdateStatefulSet { .. }));
    }
    apply(w, ro, plan)
}

#[test]
fn a_stateful_set_left_on_the_aborted_revision_is_caught() {
    seeds_to_catch("statefulset-canary", abort_without_rolling_back, SETTLED);
}

/// Takes the notifications loop's pending record for a leftover: the Rollout loop removes the
/// `notifications-pending` annotation with its own annotation write whenever it finds one,
/// so a leader that stops before sending leaves its successor nothing to take over.
fn prune_pending_notifications(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    let pending = ro
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PENDING));
    if pending {
        plan.actions.push(Action::AnnotateRollout {
            resource_version: ro.metadata.resource_version.clone(),
            annotations: [(PENDING.to_string(), None)].into(),
        });
    }
    apply(w, ro, plan)
}

#[test]
fn pending_notifications_dropped_by_the_rollout_loop_are_caught() {
    seeds_to_catch(
        "notify-canary-pause",
        prune_pending_notifications,
        AT_LEAST_ONCE,
    );
}

/// Argo 1.7's ReplicaSet conflict fallback (`updateReplicaSetFallbackToPatch`) carried over to
/// the Rollout's status: a status write refused with a 409 is made again without its
/// resourceVersion, after the Rollout's annotations are written back as the reconcile observed
/// them (so that the retry "keeps" them). A 409 there means somebody wrote the Rollout since:
/// often the notifications loop recording what it sent, which the write-back takes back, with
/// what was pending. Only the writes of a canary's plans are forwarded: its scenario has no
/// Experiment, router or StatefulSet.
struct StatusFallback {
    inner: SimWriter,
    observed: Rollout,
}

impl ClusterAccess for StatusFallback {
    fn may_write(&self) -> Result<(), WriteError> {
        self.inner.may_write()
    }

    async fn create_replica_set(&self, ns: &str, rs: &ReplicaSet) -> Result<(), WriteError> {
        self.inner.create_replica_set(ns, rs).await
    }

    async fn patch_replica_set(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.inner.patch_replica_set(ns, name, patch).await
    }

    async fn delete_replica_set(
        &self,
        ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.inner.delete_replica_set(ns, name, uid).await
    }

    async fn evict_pod(&self, ns: &str, name: &str, uid: Option<&str>) -> Result<(), WriteError> {
        self.inner.evict_pod(ns, name, uid).await
    }

    async fn patch_pod(&self, ns: &str, name: &str, patch: &Value) -> Result<(), WriteError> {
        self.inner.patch_pod(ns, name, patch).await
    }

    async fn get_service(&self, ns: &str, name: &str) -> Result<Option<Service>, WriteError> {
        self.inner.get_service(ns, name).await
    }

    async fn list_services(&self, ns: &str) -> Result<Vec<Service>, WriteError> {
        self.inner.list_services(ns).await
    }

    async fn patch_service(&self, ns: &str, name: &str, patch: &Value) -> Result<(), WriteError> {
        self.inner.patch_service(ns, name, patch).await
    }

    async fn list_pods(&self, ns: &str, selector: &str) -> Result<Vec<Pod>, WriteError> {
        self.inner.list_pods(ns, selector).await
    }

    async fn patch_rollout(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        self.inner.patch_rollout(ns, name, patch).await
    }

    async fn patch_rollout_status(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Option<String>, WriteError> {
        match self.inner.patch_rollout_status(ns, name, patch).await {
            Err(WriteError::Conflict) => {
                let annotations = &self.observed.metadata.annotations;
                let metadata = json!({"metadata": {"annotations": annotations}});
                self.inner.patch_rollout(ns, name, &metadata).await?;
                let mut retry = patch.clone();
                if let Some(meta) = retry.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.shift_remove("resourceVersion");
                }
                self.inner.patch_rollout_status(ns, name, &retry).await
            }
            other => other,
        }
    }

    async fn list_analysis_runs(&self, ns: &str) -> Result<Vec<AnalysisRun>, WriteError> {
        self.inner.list_analysis_runs(ns).await
    }

    async fn get_analysis_template(
        &self,
        ns: &str,
        key: &TemplateKey,
    ) -> Result<Option<AnalysisTemplateSpec>, WriteError> {
        self.inner.get_analysis_template(ns, key).await
    }

    async fn create_analysis_run(&self, ns: &str, run: &AnalysisRun) -> Result<(), WriteError> {
        self.inner.create_analysis_run(ns, run).await
    }

    async fn patch_analysis_run(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), WriteError> {
        self.inner.patch_analysis_run(ns, name, patch).await
    }

    async fn delete_analysis_run(
        &self,
        ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), WriteError> {
        self.inner.delete_analysis_run(ns, name, uid).await
    }
}

fn status_conflict_fallback(
    w: SimWriter,
    ro: Rollout,
    plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move {
        let observed = ro.clone();
        let w = StatusFallback { inner: w, observed };
        apply_plan(&w, &ro, &plan).await
    })
}

#[test]
fn a_status_fallback_that_takes_back_notification_records_is_caught() {
    seeds_to_catch(
        "notify-canary-pause",
        status_conflict_fallback,
        AT_MOST_ONCE,
    );
}

/// Argo #2117 (planted by a test-only switch of the simulation's election loop, see
/// `sluice_sim::lease::with_leaders_that_never_step_down`): a leader whose lease renewals
/// fail passes its renew deadline, "stops leading", and goes on reconciling and writing
/// beside the new leader.
#[test]
fn a_leader_that_goes_on_after_losing_its_lease_is_caught() {
    sluice_sim::lease::with_leaders_that_never_step_down(|| {
        seeds_to_catch(
            "lease-renewal-failure",
            sluice_sim::real_apply,
            ONE_WRITER_PER_TERM,
        )
    });
}

/// Each invariant shown able to fail in this module, and the test that shows it.
pub(crate) const CAUGHT_BY: &[(&str, &str)] = &[
    (
        UPDATE_HELD,
        "weight_steps_taken_while_inconclusive_are_caught",
    ),
    (
        ONE_LIVE_RUN,
        "a_run_started_again_beside_its_twin_is_caught",
    ),
    (
        PAUSED_UNTIL_PROMOTED,
        "a_resume_that_does_not_measure_again_is_caught",
    ),
    (
        RUNS_AT_END,
        "a_run_left_measuring_after_its_update_is_caught",
    ),
    (
        NO_ORPHANED_EXPERIMENT_REPLICA_SETS,
        "experiment_replica_sets_kept_past_their_experiment_are_caught",
    ),
    (
        AT_MOST_ONCE,
        "a_status_fallback_that_takes_back_notification_records_is_caught",
    ),
    (
        AT_LEAST_ONCE,
        "pending_notifications_dropped_by_the_rollout_loop_are_caught",
    ),
    (
        ONE_WRITER_PER_TERM,
        "a_leader_that_goes_on_after_losing_its_lease_is_caught",
    ),
    (
        ANALYSIS_GATES_THE_PARTITION,
        "a_partition_lowered_past_a_pending_analysis_is_caught",
    ),
    (
        SETTLED,
        "a_stateful_set_left_on_the_aborted_revision_is_caught",
    ),
];
