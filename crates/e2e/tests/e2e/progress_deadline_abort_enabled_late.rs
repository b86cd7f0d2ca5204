//! progressDeadlineAbort turned on after the deadline already passed aborts the update, as
//! Argo 1.10 does (it evaluates progressDeadlineAbort on every status write).

use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabling_progress_deadline_abort_after_the_timeout_aborts() {
    let (_env, ns, _controller) = setup("deadline-abort-late").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "dl",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({"progressDeadlineSeconds": 5}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "dl", RolloutPhase::Healthy, TIMEOUT).await;
    let bad = "registry.invalid/does-not-exist:v2";
    set_image(&api, "dl", bad).await;
    let ro = wait_phase(&api, "dl", RolloutPhase::Degraded, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.abort, None, "no abort without progressDeadlineAbort");
    let message = status.message.unwrap_or_default();
    assert!(
        message.starts_with("ProgressDeadlineExceeded: ReplicaSet \"dl-")
            && message.ends_with("\" has timed out progressing."),
        "{message}"
    );
    // The bad canary pod stays while not aborted.
    let by_image = replicas_by_image(&ns, "dl").await;
    assert_eq!(by_image.get(bad).map(|c| c.0), Some(1), "{by_image:?}");

    api.patch(
        "dl",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"progressDeadlineAbort": true}})),
    )
    .await
    .unwrap();
    let ro = harness::wait_for("aborted", TIMEOUT, || async {
        let ro = api.get("dl").await?;
        if ro.status.as_ref().and_then(|s| s.abort) == Some(true) {
            Ok(ro)
        } else {
            anyhow::bail!("{:?}", ro.status.as_ref().map(|s| &s.message))
        }
    })
    .await
    .unwrap();
    let status = ro.status.unwrap();
    assert!(status.aborted_at.is_some());
    // Argo's words once the abort is handled: the revision only (the timeout was told by the
    // condition before, and by the abort's first event).
    harness::wait_for("the abort's message", TIMEOUT, || async {
        let ro = api.get("dl").await?;
        let message = ro.status.and_then(|s| s.message).unwrap_or_default();
        anyhow::ensure!(
            message == "RolloutAborted: Rollout aborted update to revision 2",
            "{message}"
        );
        Ok(())
    })
    .await
    .unwrap();
    wait_replicas(&ns, "dl", &[("app:v1", 2)], TIMEOUT).await;
}
