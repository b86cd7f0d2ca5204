//! Canary rollouts against the real control plane: the real ReplicaSet controller makes the
//! pods, the fake kubelet makes them Ready (or not), and Sluice drives the steps.

use std::time::{Duration, Instant};

use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::wait_for;
use sluice_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_canary_example_walks_every_step_with_argo_replica_counts() {
    let (_env, ns, _controller) = setup("canary-example").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&corpus_file("examples/rollout-canary.yaml"))
        .await
        .unwrap();
    wait_phase(&api, "rollout-canary", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(
        &ns,
        "rollout-canary",
        &[("argoproj/rollouts-demo:blue", 5)],
        TIMEOUT,
    )
    .await;

    set_image(&api, "rollout-canary", "argoproj/rollouts-demo:yellow").await;
    // Step 0 setWeight 20 then an indefinite pause: 20% of 5 is one canary pod.
    let ro = wait_phase(&api, "rollout-canary", RolloutPhase::Paused, TIMEOUT).await;
    assert_eq!(ro.status.as_ref().unwrap().current_step_index, Some(1));
    wait_replicas(
        &ns,
        "rollout-canary",
        &[
            ("argoproj/rollouts-demo:blue", 4),
            ("argoproj/rollouts-demo:yellow", 1),
        ],
        TIMEOUT,
    )
    .await;
    promote(&api, "rollout-canary").await;

    // Each setWeight is followed by a timed pause; check the counts at every one of them.
    for (step, canary) in [(3, 2), (5, 3), (7, 4)] {
        wait_for_step(&api, "rollout-canary", step).await;
        wait_replicas(
            &ns,
            "rollout-canary",
            &[
                ("argoproj/rollouts-demo:blue", 5 - canary),
                ("argoproj/rollouts-demo:yellow", canary),
            ],
            TIMEOUT,
        )
        .await;
    }
    let ro = wait_phase(&api, "rollout-canary", RolloutPhase::Healthy, TIMEOUT).await;
    let status = ro.status.unwrap();
    assert_eq!(status.stable_rs, status.current_pod_hash);
    assert_eq!(status.current_step_index, Some(8));
    wait_replicas(
        &ns,
        "rollout-canary",
        &[("argoproj/rollouts-demo:yellow", 5)],
        TIMEOUT,
    )
    .await;
}

async fn wait_for_step(api: &kube::Api<sluice_api::Rollout>, name: &str, step: i32) {
    harness::wait_for(&format!("{name} at step {step}"), TIMEOUT, || async {
        let ro = api.get(name).await?;
        let s = ro.status.clone().unwrap_or_default();
        if s.current_step_index == Some(step) && observed_phase(&ro) == Some(RolloutPhase::Paused) {
            Ok(())
        } else {
            anyhow::bail!("step {:?} phase {:?}", s.current_step_index, s.phase)
        }
    })
    .await
    .unwrap();
}

/// Rev1 stable, Rev2 paused at a step, Rev3 applied: Rev3 completes and Rev2 goes to zero, at
/// every replica count (Argo 1.6.1-1.6.5 got stuck at 1-3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn superseding_revision_completes_and_scales_intermediate_to_zero() {
    let (_env, ns, _controller) = setup("supersede").await;
    let api = rollouts(&ns);
    let counts = [1, 2, 3, 4, 10];
    for r in counts {
        let name = format!("sup-{r}");
        let manifest = canary_rollout(
            &name,
            r,
            "app:rev1",
            json!([{"setWeight": 50}, {"pause": {}}]),
            json!({}),
        );
        ns.apply_yaml(&manifest).await.unwrap();
    }
    let all = futures::future::join_all(counts.map(|r| {
        let api = api.clone();
        let ns = &ns;
        async move {
            let name = format!("sup-{r}");
            wait_phase(&api, &name, RolloutPhase::Healthy, TIMEOUT).await;
            set_image(&api, &name, "app:rev2").await;
            wait_phase(&api, &name, RolloutPhase::Paused, TIMEOUT).await;
            set_image(&api, &name, "app:rev3").await;
            wait_phase(&api, &name, RolloutPhase::Paused, TIMEOUT).await;
            promote(&api, &name).await;
            wait_phase(&api, &name, RolloutPhase::Healthy, TIMEOUT).await;
            wait_replicas(ns, &name, &[("app:rev3", r)], TIMEOUT).await;
            let by_image = replicas_by_image(ns, &name).await;
            assert_eq!(
                by_image.get("app:rev2"),
                Some(&(0, 0)),
                "R={r}: {by_image:?}"
            );
        }
    }));
    all.await;
}

/// A revision whose pods never become Ready is aborted once the progress deadline passes; a
/// good revision after it completes; a second bad one is aborted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_revision_is_aborted_at_the_progress_deadline_every_time() {
    let (_env, ns, _controller) = setup("deadline").await;
    let api = rollouts(&ns);
    let deadline = 10;
    ns.apply_yaml(&canary_rollout(
        "dl",
        3,
        "app:good1",
        json!([{"setWeight": 34}, {"pause": {"duration": "2s"}}]),
        json!({"progressDeadlineSeconds": deadline, "progressDeadlineAbort": true}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "dl", RolloutPhase::Healthy, TIMEOUT).await;

    for (image, good) in [
        ("registry.invalid/does-not-exist:1", false),
        ("app:good2", true),
        ("registry.invalid/does-not-exist:2", false),
    ] {
        set_image(&api, "dl", image).await;
        let started = Instant::now();
        if good {
            wait_phase(&api, "dl", RolloutPhase::Healthy, TIMEOUT).await;
            continue;
        }
        // As Argo, the reconcile that finds the deadline passed sets the abort under the
        // timeout's message (Degraded, `ProgressDeadlineExceeded: ...`), and the next one
        // handles the abort (`RolloutAborted: ...`): the abort counts once it is handled.
        let ro = wait_for(
            &format!("{image}: the update aborted"),
            Duration::from_secs(deadline as u64 + 30),
            || async {
                let ro = api.get("dl").await?;
                let status = ro.status.clone().unwrap_or_default();
                let message = status.message.clone().unwrap_or_default();
                anyhow::ensure!(
                    observed_phase(&ro) == Some(RolloutPhase::Degraded)
                        && message.starts_with("RolloutAborted"),
                    "{:?}: {message}",
                    status.phase
                );
                Ok(ro)
            },
        )
        .await
        .unwrap();
        let took = started.elapsed();
        assert!(
            took <= Duration::from_secs(deadline as u64 + 8),
            "{image}: aborted after {took:?}, deadline {deadline}s"
        );
        assert_eq!(ro.status.unwrap().abort, Some(true));
        // Back on the stable pods, the bad ReplicaSet at zero.
        let by_image = replicas_by_image(&ns, "dl").await;
        let stable = if image.ends_with(":1") {
            "app:good1"
        } else {
            "app:good2"
        };
        wait_replicas(&ns, "dl", &[(stable, 3)], TIMEOUT).await;
        assert!(by_image.contains_key(image), "{by_image:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_then_retry_then_promote_completes() {
    let (_env, ns, _controller) = setup("abort-retry").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "ar",
        4,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "ar", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "ar", "app:v2").await;
    wait_phase(&api, "ar", RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(&ns, "ar", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;

    abort(&api, "ar").await;
    let ro = wait_phase(&api, "ar", RolloutPhase::Degraded, TIMEOUT).await;
    assert!(ro.status.unwrap().aborted_at.is_some());
    wait_replicas(&ns, "ar", &[("app:v1", 4)], TIMEOUT).await;

    retry(&api, "ar").await;
    wait_phase(&api, "ar", RolloutPhase::Paused, TIMEOUT).await;
    wait_replicas(&ns, "ar", &[("app:v1", 2), ("app:v2", 2)], TIMEOUT).await;
    promote(&api, "ar").await;
    wait_phase(&api, "ar", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "ar", &[("app:v2", 4)], TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_full_skips_the_remaining_steps() {
    let (_env, ns, _controller) = setup("promote-full").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "pf",
        4,
        "app:v1",
        json!([{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "pf", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "pf", "app:v2").await;
    wait_phase(&api, "pf", RolloutPhase::Paused, TIMEOUT).await;
    promote_full(&api, "pf").await;
    let ro = wait_phase(&api, "pf", RolloutPhase::Healthy, TIMEOUT).await;
    assert_eq!(ro.status.unwrap().current_step_index, Some(4));
    wait_replicas(&ns, "pf", &[("app:v2", 4)], TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_pause_holds_and_resume_continues() {
    let (_env, ns, _controller) = setup("pause-resume").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "pr",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {"duration": "1s"}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "pr", RolloutPhase::Healthy, TIMEOUT).await;
    pause(&api, "pr").await;
    set_image(&api, "pr", "app:v2").await;
    let ro = wait_phase(&api, "pr", RolloutPhase::Paused, TIMEOUT).await;
    assert_eq!(
        ro.status.unwrap().message.as_deref(),
        Some("manually paused")
    );
    // Held: still only the old pods after a few reconciles worth of time.
    let api2 = api.clone();
    harness::wait_for("a reconcile after the pause", TIMEOUT, || async {
        let ro = api2.get("pr").await?;
        let ok = ro
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_.as_ref().map(|t| t.as_str()) == Some("Paused"));
        if ok {
            Ok(())
        } else {
            anyhow::bail!("no Paused condition yet")
        }
    })
    .await
    .unwrap();
    // As Argo: the new template's ReplicaSet is created, at 0, and nothing grows while paused.
    assert_eq!(
        replicas_by_image(&ns, "pr").await.get("app:v2"),
        Some(&(0, 0))
    );
    resume(&api, "pr").await;
    wait_phase(&api, "pr", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "pr", &[("app:v2", 2)], TIMEOUT).await;
}

/// Going back to the stable template (what `undo` writes) finishes at once, without steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_to_the_stable_template_skips_the_steps() {
    let (_env, ns, _controller) = setup("undo").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "un",
        3,
        "app:v1",
        json!([{"setWeight": 34}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "un", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "un", "app:v2").await;
    wait_phase(&api, "un", RolloutPhase::Paused, TIMEOUT).await;
    set_image(&api, "un", "app:v1").await;
    wait_phase(&api, "un", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "un", &[("app:v1", 3)], TIMEOUT).await;
}

/// An invalid Rollout is Degraded with InvalidSpec; a valid one next to it still progresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_rollout_is_degraded_and_does_not_block_others() {
    let (_env, ns, _controller) = setup("invalid").await;
    let api = rollouts(&ns);
    // The selector does not match the template's labels.
    let mut bad: serde_json::Value = serde_json::from_str(&canary_rollout(
        "bad",
        2,
        "app:v1",
        json!([{"setWeight": 50}]),
        json!({}),
    ))
    .unwrap();
    bad["spec"]["selector"]["matchLabels"]["app"] = json!("something-else");
    ns.apply_yaml(&bad.to_string()).await.unwrap();
    ns.apply_yaml(&canary_rollout(
        "good",
        2,
        "app:v1",
        json!([{"setWeight": 50}]),
        json!({}),
    ))
    .await
    .unwrap();

    let ro = wait_phase(&api, "bad", RolloutPhase::Degraded, TIMEOUT).await;
    let status = ro.status.unwrap();
    // Argo's field error for a selector that does not select the template.
    let message = status.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with(
            "InvalidSpec: The Rollout \"bad\" is invalid: spec.template.metadata.labels: Invalid value: "
        ) && message.ends_with(": `selector` does not match template `labels`"),
        "{message}"
    );
    assert!(
        status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_.as_ref().map(|t| t.as_str()) == Some("InvalidSpec"))
    );
    wait_phase(&api, "good", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "good", "app:v2").await;
    wait_phase(&api, "good", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "good", &[("app:v2", 2)], TIMEOUT).await;
    assert!(replicas_by_image(&ns, "bad").await.is_empty());
}

/// `restart`: every pod older than `restartAt` is evicted, within maxUnavailable, and the
/// time is recorded in `status.restartedAt`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_replaces_every_pod_and_records_restarted_at() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{ListParams, Patch, PatchParams};

    let (_env, ns, _controller) = setup("restart").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "rs",
        3,
        "app:v1",
        json!([{"setWeight": 50}]),
        json!({"strategy": {"canary": {"maxUnavailable": 1, "steps": [{"setWeight": 50}]}}}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "rs", RolloutPhase::Healthy, TIMEOUT).await;
    let pods = ns.api::<Pod>();
    let before: Vec<String> = pods
        .list(&ListParams::default().labels("app=rs"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect();
    assert_eq!(before.len(), 3);

    let at = jiff::Timestamp::now().to_string();
    let at = format!("{}Z", &at[..19]);
    api.patch(
        "rs",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"restartAt": at}})),
    )
    .await
    .unwrap();
    harness::wait_for("restartedAt recorded and Healthy", TIMEOUT, || async {
        let ro = api.get("rs").await?;
        let s = ro.status.clone().unwrap_or_default();
        let recorded = s.restarted_at.map(|t| t.0.to_string());
        if recorded.as_deref() == Some(at.as_str())
            && observed_phase(&ro) == Some(RolloutPhase::Healthy)
        {
            Ok(())
        } else {
            anyhow::bail!("restartedAt {recorded:?} phase {:?}", s.phase)
        }
    })
    .await
    .unwrap();
    let after: Vec<String> = pods
        .list(&ListParams::default().labels("app=rs"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.uid)
        .collect();
    assert_eq!(after.len(), 3);
    assert!(
        after.iter().all(|u| !before.contains(u)),
        "all pods replaced"
    );
}
