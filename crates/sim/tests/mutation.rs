//! Mutation check: reintroduce one of the original controller's bugs in the write path and
//! show that the invariants catch it within a small seed budget. The test passes when the
//! checker *fails* the faulty run.

use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplateSpec};
use sluice_controller::apply::{Applied, apply_plan};
use sluice_controller::writer::{ClusterWriter, WriteError};
use sluice_engine::Plan;
use sluice_engine::observed::TemplateKey;
use sluice_sim::controller::BoxFuture;
use sluice_sim::invariants::ANNOTATION_NEVER_EMPTY;
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

impl ClusterWriter for FaultyWriter {
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
