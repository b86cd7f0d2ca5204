//! A Rollout driving a DaemonSet, gated by analysis: an `analysis` step between two node counts
//! (a web metric served by the test) and a background analysis from the second step. A good
//! metric lets the update through, node by node, and the background run ends with it; a bad
//! one fails the step's run after the first node, the update is aborted, and that node comes
//! back to the stable revision. Sampled all along: never more nodes on the update than the
//! step in force allows (the run holds the second step back until it passed).

use anyhow::bail;
use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::json;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::analysis::{run_phase, runs_of, web_template};
use sluice_e2e::harness::wait_for;
use sluice_e2e::*;
use sluice_testenv::http_stub::HttpStub;

use super::daemonset_canary_walks_its_nodes::{
    NAME, NODES, daemon_set_up, rollout_with, sample_until, set_image, status, update_hash,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_analysis_gates_its_nodes() {
    let (_env, ns, _controller) = setup("ds-analysis").await;
    let (nodes, a) = daemon_set_up(&ns).await;
    let api = rollouts(&ns);
    // The step's metric, and the background one (which stays good).
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    let watched = HttpStub::start().await.unwrap();
    watched.respond_json(200, &json!({"status": "ok"}));
    // Four measurements a second apart: the step with one node updated lasts three seconds,
    // long enough for the sampling to see it on a loaded machine (with two it lasted one, and
    // was missed).
    ns.apply_yaml(&web_template("health", &metric.url("/health"), Some(4)))
        .await
        .unwrap();
    ns.apply_yaml(&web_template("watch", &watched.url("/watch"), None))
        .await
        .unwrap();
    ns.apply_yaml(&rollout_with(json!({"strategy": {"canary": {
        "steps": [
            {"setWeight": 25},
            {"analysis": {"templates": [{"templateName": "health"}]}},
            {"setWeight": 50}
        ],
        "analysis": {"templates": [{"templateName": "watch"}], "startingStep": 1}
    }}})))
    .await
    .unwrap();
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(status(&api).await.stable_rs.as_deref(), Some(a.as_str()));
    // Steps 0-1: one node of four; 2: two; past the steps: all.
    let by_step = |step: Option<i32>| match step.unwrap_or(0) {
        0 | 1 => 1,
        2 => 2,
        _ => NODES,
    };

    // A good metric: one node, measured, then two, then every node.
    set_image(&ns, "nginx:1.20-alpine").await;
    let b = update_hash(&ns, "nginx:1.20-alpine").await;
    let seen = sample_until(&ns, &b, by_step, "measured update", |s| {
        s.phase == Some(RolloutPhase::Healthy) && s.on(&b) == NODES
    })
    .await;
    assert!(
        seen.iter().any(|s| s.step == Some(1) && s.on(&b) == 1),
        "the analysis step with one node updated: {seen:#?}"
    );
    let step_runs = runs_of(&ns, "Step", &b).await;
    assert_eq!(step_runs.len(), 1, "{step_runs:#?}");
    assert_eq!(run_phase(&step_runs[0]), Some(AnalysisPhase::Successful));
    // The background run measured beside the steps and ends with the update.
    let background = wait_for("the background run ended", TIMEOUT, || async {
        let runs = runs_of(&ns, "Background", &b).await;
        match runs.as_slice() {
            [run] if run_phase(run).is_some_and(|p| p.is_completed()) => Ok(run.clone()),
            _ => bail!("{runs:?}"),
        }
    })
    .await
    .unwrap();
    assert_eq!(
        background.spec.terminate,
        Some(true),
        "terminated at completion"
    );
    assert_eq!(status(&api).await.stable_rs.as_deref(), Some(b.as_str()));

    // A bad metric: the step's run fails with one node updated; the update is aborted, the
    // stable template goes back in, and the node returns to the stable revision.
    metric.respond_json(200, &json!({"status": "bad"}));
    set_image(&ns, "nginx:1.21-alpine").await;
    let c = update_hash(&ns, "nginx:1.21-alpine").await;
    sample_until(
        &ns,
        &c,
        |_| 1,
        "failed analysis",
        |s| {
            s.phase == Some(RolloutPhase::Degraded)
                && s.image == "nginx:1.20-alpine"
                && s.on(&b) == NODES
        },
    )
    .await;
    let failed = runs_of(&ns, "Step", &c).await;
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(run_phase(&failed[0]), Some(AnalysisPhase::Failed));
    let st = status(&api).await;
    assert_eq!(st.abort, Some(true));
    assert_eq!(st.stable_rs.as_deref(), Some(b.as_str()));
    let message = st.message.unwrap_or_default();
    assert!(
        message.starts_with("RolloutAborted: Rollout aborted update to revision 3: Step-based analysis phase error/failed: "),
        "{message}"
    );
    let ds: DaemonSet = ns.api().get(NAME).await.unwrap();
    assert_eq!(
        ds.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1.20-alpine"),
        "the stable template back"
    );
    nodes.stop().await;
}
