//! What the analysis scenarios share: a web metric they steer, and the step runs in order.

use kube::api::ListParams;
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_testenv::harness::TestNamespace;

/// The AnalysisTemplate `health`: a web metric measured twice a second apart, Successful on
/// `{"status": "ok"}` and Failed on `{"status": "bad"}` from `url` (an `HttpStub` the test
/// steers).
pub fn web_health_template(url: &str) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "health"},
        "spec": {"metrics": [{
            "name": "web",
            "interval": "1s",
            "count": 2,
            "successCondition": "result.status == 'ok'",
            "failureCondition": "result.status == 'bad'",
            "provider": {"web": {"url": url}}
        }]}
    })
    .to_string()
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
