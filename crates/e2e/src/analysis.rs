//! What the analysis scenarios share: a web metric they steer, and the step runs in order.

use kube::api::ListParams;
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_testenv::harness::TestNamespace;

/// The AnalysisTemplate `health`: a web metric measured twice a second apart, Successful on
/// `{"status": "ok"}` and Failed on `{"status": "bad"}` from `url` (an `HttpStub` the test
/// steers).
pub fn web_health_template(url: &str) -> String {
    web_template("health", url, Some(2))
}

/// The AnalysisTemplate `name`: a web metric on `url`, `count` measurements a second apart
/// (none: until its run is terminated), Successful on `{"status": "ok"}` and Failed on
/// `{"status": "bad"}`.
pub fn web_template(name: &str, url: &str, count: Option<i32>) -> String {
    let mut metric = json!({
        "name": "web",
        "interval": "1s",
        "successCondition": "result.status == 'ok'",
        "failureCondition": "result.status == 'bad'",
        "provider": {"web": {"url": url}}
    });
    if let Some(count) = count {
        metric["count"] = count.into();
    }
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": name},
        "spec": {"metrics": [metric]}
    })
    .to_string()
}

/// The namespace's AnalysisRuns of `kind` (`Step` or `Background`) for the revision `hash`.
pub async fn runs_of(ns: &TestNamespace, kind: &str, hash: &str) -> Vec<AnalysisRun> {
    let selector = format!("rollout-type={kind},rollouts-pod-template-hash={hash}");
    ns.api::<AnalysisRun>()
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list the runs")
        .items
}

pub fn run_phase(run: &AnalysisRun) -> Option<AnalysisPhase> {
    run.status.as_ref().and_then(|s| s.phase.clone())
}

/// The namespace's step AnalysisRuns, oldest first (by creation, then name).
pub async fn step_runs(ns: &TestNamespace) -> Vec<AnalysisRun> {
    let mut runs = ns
        .api::<AnalysisRun>()
        .list(&ListParams::default().labels("rollout-type=Step"))
        .await
        .expect("list the step runs")
        .items;
    runs.sort_by_key(|r| {
        (
            r.metadata.creation_timestamp.as_ref().map(|t| t.0),
            r.metadata.name.clone(),
        )
    });
    runs
}
