//! Mutation check: plant a bug in the write path (a plan transformed before it is applied,
//! often one of the original controller's bugs) and show that the invariants catch it within
//! a small seed budget. A test passes when the checker *fails* the faulty run; each prints its
//! first caught seed's report. [`CAUGHT_BY`] and the modules' tables name, for every invariant
//! the checker knows, the test that shows it catching its bug, and a test fails when one has
//! none (docs/invariants.md has the table with the seeds each took).

mod config_rollouts;
mod daemon_sets;
mod replica_sets;
mod runs_and_writers;

use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::PauseReason;
use sluice_controller::cluster::{ClusterAccess, WriteError};
use sluice_controller::loops::apply::{Applied, apply_plan};
use sluice_engine::observed::TemplateKey;
use sluice_engine::{Action, Plan};
use sluice_sim::controller::BoxFuture;
use sluice_sim::invariants::{
    ALL, ANNOTATION_NEVER_EMPTY, FAILED_EXPERIMENT_ABORTS, INCONCLUSIVE_PAUSES,
    NO_LINGERING_EXPERIMENTS, NOT_RECREATED_WHILE_INCONCLUSIVE, PAUSE_LIFTED_BY_USERS_ONLY,
    PAUSE_STEP_HELD,
};
use sluice_sim::net::SimWriter;
use sluice_sim::{ApplyFn, Outcome, run, scenarios};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};

/// Argo 1.7.0/1.7.1's conflict path (`updateReplicaSetFallbackToPatch`): on a 409 it re-sent
/// the write as a patch with no resourceVersion, copying each annotation's value from the
/// labels, where it is not, so every annotation was written as "".
struct FaultyWriter {
    inner: SimWriter,
}

fn without_precondition(patch: &Value) -> Value {
    let mut p = patch.clone();
    if let Some(meta) = p.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.shift_remove("resourceVersion");
    }
    p
}

impl ClusterAccess for FaultyWriter {
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
        match self.inner.patch_replica_set(ns, name, patch).await {
            Err(WriteError::Conflict) => {
                let mut retry = without_precondition(patch);
                if let Some(a) = retry
                    .pointer_mut("/metadata/annotations")
                    .and_then(Value::as_object_mut)
                {
                    for v in a.values_mut() {
                        *v = Value::String(String::new());
                    }
                }
                self.inner.patch_replica_set(ns, name, &retry).await
            }
            other => other,
        }
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
        self.inner.patch_rollout_status(ns, name, patch).await
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

fn blank_annotations(
    w: SimWriter,
    ro: Rollout,
    plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move { apply_plan(&FaultyWriter { inner: w }, &ro, &plan).await })
}

/// The first failing seed of `scenario` under `apply` within `budget` seeds.
fn first_failure(scenario: &str, apply: ApplyFn, budget: u64) -> Option<Outcome> {
    let scenario = scenarios::find(scenario).unwrap();
    (0..budget)
        .map(|seed| run(&scenario, seed, apply))
        .find(|o| !o.passed())
}

#[test]
fn argo_conflict_fallback_that_blanks_annotations_is_caught() {
    // Conflicts come from stale caches in every scenario, not only where they are injected.
    for scenario in [
        "write-conflict",
        "supersede",
        "bad-good-bad",
        "crash-mid-canary",
    ] {
        let failed = first_failure(scenario, blank_annotations, 5).unwrap_or_else(|| {
            panic!("{scenario}: the blanking fallback went unnoticed for 5 seeds")
        });
        println!("{}", failed.report());
        assert!(
            failed
                .violations
                .iter()
                .any(|v| v.invariant == ANNOTATION_NEVER_EMPTY),
            "caught, but not as a blanked annotation: {}",
            failed.report()
        );
    }
}

/// The seed budget of tests/ci.rs: a reintroduced bug must show within it.
const CI_SEEDS: u64 = 64;

/// Runs `scenario` under `apply` until a seed fails with a violation of `invariant`, and
/// returns how many seeds that took. Seeds that fail only by other invariants are passed over
/// (the bug shows first as a wrong end state on some schedules, which says nothing of whether
/// `invariant` can fail); they are printed, and some seed within the CI budget must show
/// `invariant` itself.
fn seeds_to_catch(scenario: &str, apply: ApplyFn, invariant: &str) -> u64 {
    let found = scenarios::find(scenario).unwrap();
    for seed in 0..CI_SEEDS {
        let outcome = run(&found, seed, apply);
        if outcome.passed() {
            continue;
        }
        println!("{}", outcome.report());
        if outcome.violations.iter().any(|v| v.invariant == invariant) {
            println!(
                "{scenario}: caught by {invariant} after {} seed(s)",
                seed + 1
            );
            return seed + 1;
        }
    }
    panic!("{scenario}: {invariant} did not catch it within {CI_SEEDS} seeds")
}

fn has_pause(plan: &Plan, reason: &PauseReason) -> bool {
    plan.status
        .pause_conditions
        .iter()
        .flatten()
        .any(|c| c.reason.as_ref() == Some(reason))
}

fn drop_pause(plan: &mut Plan, reason: &PauseReason) {
    if let Some(p) = plan.status.pause_conditions.as_mut() {
        p.retain(|c| c.reason.as_ref() != Some(reason));
    }
}

/// An Inconclusive background verdict that does not pause: the plan records the verdict but
/// loses its `InconclusiveAnalysisRun` pause, so the update carries on as if promoted.
fn promote_instead_of_pausing(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    drop_pause(&mut plan, &PauseReason::InconclusiveAnalysisRun);
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

/// Argo before #3873: while the update sits paused on an Inconclusive background run, the
/// controller measures again with a new run, though nobody resumed.
fn measure_again(w: SimWriter, ro: Rollout, plan: Plan) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move {
        let inconclusive = plan
            .status
            .canary
            .as_ref()
            .and_then(|c| c.current_background_analysis_run_status.as_ref())
            .filter(|r| r.status == Some(AnalysisPhase::Inconclusive))
            .and_then(|r| r.name.clone());
        if let Some(name) = inconclusive
            && has_pause(&plan, &PauseReason::InconclusiveAnalysisRun)
        {
            let runs = w.list_analysis_runs("default").await?;
            if let Some(run) = runs
                .iter()
                .find(|r| r.metadata.name.as_ref() == Some(&name))
            {
                let mut again: AnalysisRun = run.clone();
                again.metadata.name = Some(format!("{name}.9"));
                again.metadata.uid = None;
                again.metadata.resource_version = None;
                again.metadata.creation_timestamp = None;
                again.status = None;
                // Once is enough; a second attempt finds the name taken.
                let _ = w.create_analysis_run("default", &again).await;
            }
        }
        apply_plan(&w, &ro, &plan).await
    })
}

/// The controller lifts the Inconclusive pause by itself, as if a user had resumed.
fn resume_by_itself(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    let was_paused = ro.status.as_ref().is_some_and(|s| {
        s.pause_conditions
            .iter()
            .flatten()
            .any(|c| c.reason == Some(PauseReason::InconclusiveAnalysisRun))
    });
    if was_paused {
        drop_pause(&mut plan, &PauseReason::InconclusiveAnalysisRun);
    }
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

/// A timed pause step that runs out before its time while the update is paused on an
/// Inconclusive run.
fn expire_pause_step(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    if has_pause(&plan, &PauseReason::InconclusiveAnalysisRun)
        && has_pause(&plan, &PauseReason::CanaryPauseStep)
    {
        drop_pause(&mut plan, &PauseReason::CanaryPauseStep);
        plan.status.current_step_index = plan.status.current_step_index.map(|i| i + 1);
    }
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

#[test]
fn inconclusive_analysis_that_promotes_instead_of_pausing_is_caught() {
    seeds_to_catch(
        "inconclusive-background-analysis",
        promote_instead_of_pausing,
        INCONCLUSIVE_PAUSES,
    );
}

#[test]
fn inconclusive_run_measured_again_is_caught() {
    seeds_to_catch(
        "inconclusive-background-analysis",
        measure_again,
        NOT_RECREATED_WHILE_INCONCLUSIVE,
    );
}

#[test]
fn inconclusive_pause_lifted_by_the_controller_is_caught() {
    seeds_to_catch(
        "inconclusive-background-analysis",
        resume_by_itself,
        PAUSE_LIFTED_BY_USERS_ONLY,
    );
}

#[test]
fn pause_step_running_out_early_under_inconclusive_is_caught() {
    seeds_to_catch(
        "inconclusive-background-analysis",
        expire_pause_step,
        PAUSE_STEP_HELD,
    );
}

/// A Failed or Errored Experiment read as a pass: instead of aborting, the update goes on to
/// the step after the experiment step.
fn promote_past_a_failed_experiment(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    let observed = ro.status.clone().unwrap_or_default();
    let at_experiment = ro
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.steps.as_ref())
        .and_then(|s| s.get(usize::try_from(observed.current_step_index.unwrap_or(0)).ok()?))
        .is_some_and(|s| s.experiment.is_some());
    if at_experiment && observed.abort != Some(true) && plan.status.abort == Some(true) {
        plan.status.abort = None;
        plan.status.aborted_at = None;
        plan.status.current_step_index = observed.current_step_index.map(|i| i + 1);
    }
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

/// Experiments the update no longer waits on are left running: no terminate is sent.
fn leave_experiments_running(
    w: SimWriter,
    ro: Rollout,
    mut plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    plan.actions
        .retain(|a| !matches!(a, Action::TerminateExperiment { .. }));
    Box::pin(async move { apply_plan(&w, &ro, &plan).await })
}

#[test]
fn an_update_that_goes_past_a_failed_experiment_is_caught() {
    seeds_to_catch(
        "experiment-step",
        promote_past_a_failed_experiment,
        FAILED_EXPERIMENT_ABORTS,
    );
}

#[test]
fn an_experiment_left_running_after_its_step_is_caught() {
    seeds_to_catch(
        "interrupted-experiment",
        leave_experiments_running,
        NO_LINGERING_EXPERIMENTS,
    );
}

/// Each invariant shown able to fail in this file, and the test that shows it.
const CAUGHT_BY: &[(&str, &str)] = &[
    (
        ANNOTATION_NEVER_EMPTY,
        "argo_conflict_fallback_that_blanks_annotations_is_caught",
    ),
    (
        INCONCLUSIVE_PAUSES,
        "inconclusive_analysis_that_promotes_instead_of_pausing_is_caught",
    ),
    (
        NOT_RECREATED_WHILE_INCONCLUSIVE,
        "inconclusive_run_measured_again_is_caught",
    ),
    (
        PAUSE_LIFTED_BY_USERS_ONLY,
        "inconclusive_pause_lifted_by_the_controller_is_caught",
    ),
    (
        PAUSE_STEP_HELD,
        "pause_step_running_out_early_under_inconclusive_is_caught",
    ),
    (
        FAILED_EXPERIMENT_ABORTS,
        "an_update_that_goes_past_a_failed_experiment_is_caught",
    ),
    (
        NO_LINGERING_EXPERIMENTS,
        "an_experiment_left_running_after_its_step_is_caught",
    ),
];

/// Every invariant the checker knows has a planted bug it is shown to catch: a vacuous
/// invariant and a correct controller look the same.
#[test]
fn every_invariant_is_shown_able_to_fail() {
    let tables = [
        CAUGHT_BY,
        replica_sets::CAUGHT_BY,
        runs_and_writers::CAUGHT_BY,
        daemon_sets::CAUGHT_BY,
        config_rollouts::CAUGHT_BY,
    ];
    let sources = [
        include_str!("mutation.rs"),
        include_str!("mutation/replica_sets.rs"),
        include_str!("mutation/runs_and_writers.rs"),
        include_str!("mutation/daemon_sets.rs"),
        include_str!("mutation/config_rollouts.rs"),
    ]
    .concat();
    let mut missing = Vec::new();
    for invariant in ALL {
        let tests: Vec<&str> = tables
            .iter()
            .flat_map(|t| t.iter())
            .filter(|(i, _)| i == invariant)
            .map(|(_, t)| *t)
            .collect();
        if tests.is_empty() {
            missing.push(invariant.to_string());
        }
        for test in tests {
            assert!(
                sources.contains(&format!("#[test]\nfn {test}()")),
                "{invariant}: no test named {test}"
            );
        }
    }
    assert!(
        missing.is_empty(),
        "invariants no planted bug is shown to trip: {missing:?}"
    );
}
