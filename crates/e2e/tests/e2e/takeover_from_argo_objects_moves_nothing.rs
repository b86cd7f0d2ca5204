//! Taking over from Argo Rollouts 1.9.1 moves nothing: starting from the objects Argo itself
//! wrote (`testdata/argo-objects/v1.9.1`, every captured moment: Healthy, paused at a step,
//! paused at a timed step, aborted, blue-green with a preview, blue-green within its
//! scale-down delay), Sluice starts and for 30 s (or until 5 s before the scale-down deadline,
//! for the moment within its delay) no ReplicaSet is created or scaled, no pod is replaced, no
//! Service selector and no recorded step, hash or pause changes, and no event claims an update.
//! Then the update finishes under Sluice. The same holds when the ReplicaSets carry the hashes
//! of Argo 1.8 and earlier.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::ListParams;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_api::pod_template_hash::{HashVersion, pod_template_hash_as};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::argo_objects::{self, Captured};
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::*;

/// How long nothing may move after Sluice starts.
const QUIET: Duration = Duration::from_secs(30);

/// Event reasons that would tell a team an update started or went on.
const UPDATE_REASONS: &[&str] = &[
    "RolloutUpdated",
    "NewReplicaSetCreated",
    "ScalingReplicaSet",
    "RolloutNotCompleted",
    "RolloutStepCompleted",
    "RolloutResumed",
    "SwitchService",
];

/// What must not move while Sluice takes over.
#[derive(Debug, PartialEq)]
struct Snapshot {
    replica_sets: BTreeMap<String, i32>,
    pods: BTreeSet<String>,
    selectors: BTreeMap<String, Option<BTreeMap<String, String>>>,
    status: Value,
}

async fn snapshot(ns: &TestNamespace, rollout: &str) -> anyhow::Result<Snapshot> {
    let lp = ListParams::default();
    let replica_sets = ns
        .api::<ReplicaSet>()
        .list(&lp)
        .await?
        .items
        .into_iter()
        .map(|rs| {
            let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            (rs.metadata.name.unwrap_or_default(), replicas)
        })
        .collect();
    let pods = ns
        .api::<Pod>()
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.uid)
        .collect();
    let selectors = ns
        .api::<Service>()
        .list(&lp)
        .await?
        .items
        .into_iter()
        .map(|s| {
            (
                s.metadata.name.unwrap_or_default(),
                s.spec.and_then(|s| s.selector),
            )
        })
        .collect();
    let ro = serde_json::to_value(ns.api::<Rollout>().get(rollout).await?)?;
    let s = &ro["status"];
    let status = json!({
        "currentPodHash": s["currentPodHash"],
        "stableRS": s["stableRS"],
        "currentStepIndex": s["currentStepIndex"],
        "currentStepHash": s["currentStepHash"],
        "abort": s["abort"],
        "pauseConditions": s["pauseConditions"].as_array().map(|p| {
            p.iter().map(|c| (c["reason"].clone(), c["startTime"].clone())).collect::<Vec<_>>()
        }),
        "controllerPause": s["controllerPause"],
        "canaryWeights": s["canary"]["weights"],
        "activeSelector": s["blueGreen"]["activeSelector"],
        "previewSelector": s["blueGreen"]["previewSelector"],
    });
    Ok(Snapshot {
        replica_sets,
        pods,
        selectors,
        status,
    })
}

/// Loads `captured`, lets Sluice take over, watches for [`QUIET`], then finishes the update.
async fn take_over(env: &TestEnv, captured: Captured) -> anyhow::Result<()> {
    let ns = TestNamespace::create(env, "takeover-argo").await?;
    match take_over_in(env, &ns, captured).await {
        Ok(()) => Ok(()),
        Err(e) => Err(e.context(ns.dump().await)),
    }
}

async fn take_over_in(env: &TestEnv, ns: &TestNamespace, captured: Captured) -> anyhow::Result<()> {
    let moment = captured.name.clone();
    let name = captured.rollout_name().to_owned();
    captured
        .load(ns)
        .await
        .context("loading the captured objects")?;
    let phase_before = observed_phase(&ns.api::<Rollout>().get(&name).await?);
    let before = snapshot(ns, &name).await?;

    let quiet = quiet_period(ns).await?;
    let _controller = start_controller(env, ns);
    let started = tokio::time::Instant::now();
    while started.elapsed() < quiet {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = snapshot(ns, &name).await?;
        ensure!(
            now == before,
            "{moment}: something moved after {:?}:\nbefore {before:#?}\nnow {now:#?}",
            started.elapsed()
        );
    }
    let ro = ns.api::<Rollout>().get(&name).await?;
    ensure!(
        observed_phase(&ro) == phase_before,
        "{moment}: phase {:?} became {:?}",
        phase_before,
        observed_phase(&ro)
    );
    let events = rollout_events(ns, &name).await;
    let claims: Vec<_> = events
        .iter()
        .filter(|(reason, _)| UPDATE_REASONS.contains(&reason.as_str()))
        .collect();
    ensure!(
        claims.is_empty(),
        "{moment}: events claim an update: {claims:?}"
    );

    finish(ns, &name, &moment).await
}

/// Brings the update of each moment to its end under Sluice.
async fn finish(ns: &TestNamespace, name: &str, moment: &str) -> anyhow::Result<()> {
    let api = ns.api::<Rollout>();
    let stable = api
        .get(name)
        .await?
        .status
        .and_then(|s| s.stable_rs)
        .unwrap_or_default();
    match moment {
        m if m.ends_with("canary-healthy") || m.ends_with("bluegreen-healthy") => {
            set_image(&api, name, "nginx:1.21-alpine").await;
            // Paused at the first step (canary) or with the preview up (blue-green).
            wait_for("the update to pause", TIMEOUT, || async {
                let ro = api.get(name).await?;
                anyhow::ensure!(observed_phase(&ro) == Some(RolloutPhase::Paused));
                Ok(())
            })
            .await?;
            if m.contains("canary") {
                promote_full(&api, name).await;
            } else {
                promote(&api, name).await;
            }
            wait_promoted(&api, name, &stable).await;
        }
        m if m.contains("within-scale-down-delay") => {
            // The delay runs out (moved close by the test): the old ReplicaSet goes to zero.
            wait_for(
                "the old ReplicaSet scaled down",
                Duration::from_secs(120),
                || async {
                    let ro = api.get(name).await?;
                    let stable = ro.status.and_then(|s| s.stable_rs).unwrap_or_default();
                    let others: Vec<i32> = ns
                        .api::<ReplicaSet>()
                        .list(&ListParams::default())
                        .await?
                        .items
                        .into_iter()
                        .filter(|rs| !rs.metadata.name.as_deref().unwrap_or("").ends_with(&stable))
                        .map(|rs| rs.spec.and_then(|s| s.replicas).unwrap_or(1))
                        .collect();
                    anyhow::ensure!(others.iter().all(|r| *r == 0), "{others:?}");
                    Ok(())
                },
            )
            .await?;
        }
        m if m.contains("bluegreen") => {
            promote(&api, name).await;
            wait_promoted(&api, name, &stable).await;
        }
        _ => {
            promote_full(&api, name).await;
            wait_promoted(&api, name, &stable).await;
        }
    }
    Ok(())
}

/// How long to watch that nothing moves: [`QUIET`], or until shortly before the earliest
/// scale-down deadline of the loaded ReplicaSets, when that comes sooner. Past it, scaling the
/// old ReplicaSet down is what Argo would do too; how soon it comes depends on how long the
/// loading took, which is seconds more on a loaded machine.
async fn quiet_period(ns: &TestNamespace) -> anyhow::Result<Duration> {
    let now = jiff::Timestamp::now();
    let deadlines = ns.api::<ReplicaSet>().list(&ListParams::default()).await?;
    let earliest = deadlines
        .items
        .iter()
        .filter_map(|rs| rs.metadata.annotations.as_ref()?.get("scale-down-deadline"))
        .filter_map(|at| at.parse::<jiff::Timestamp>().ok())
        .min();
    let Some(earliest) = earliest else {
        return Ok(QUIET);
    };
    let left = Duration::try_from(earliest.duration_since(now)).unwrap_or_default();
    let quiet = QUIET.min(left.saturating_sub(Duration::from_secs(5)));
    ensure!(
        quiet >= Duration::from_secs(15),
        "the scale-down deadline {earliest} is {left:?} away: too close to watch for a quiet period"
    );
    Ok(quiet)
}

/// The scale-down deadline of the captured blue-green moment is brought close, so that the
/// delay runs out soon after the quiet period instead of ten minutes later.
fn shorten_scale_down_delay(captured: &mut Captured) {
    // Loading moves every time by the distance from the capture to now.
    let Some(captured_at) = captured.capture_time() else {
        return;
    };
    let deadline = captured_at + jiff::SignedDuration::from_secs(55);
    for rs in &mut captured.replica_sets {
        if let Some(annotation) = rs
            .pointer_mut("/metadata/annotations/scale-down-deadline")
            .filter(|a| a.is_string())
        {
            *annotation = json!(deadline.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
        }
    }
}

/// The same moment as Argo 1.8 or an earlier release would have named it: every ReplicaSet
/// labelled with the hash of the encoders before Argo 1.9.
fn with_earlier_hashes(mut captured: Captured) -> Captured {
    let rs_hashes: Vec<(String, Value)> = captured
        .replica_sets
        .iter()
        .map(|rs| {
            let hash = rs["metadata"]["labels"]["rollouts-pod-template-hash"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (hash, rs["spec"]["template"].clone())
        })
        .collect();
    let current = captured.rollout["status"]["currentPodHash"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for (hash, mut template) in rs_hashes {
        let earlier = if hash == current {
            // The Rollout's own template: the hash Argo 1.8 gave it.
            pod_template_hash_as(
                &captured.rollout["spec"]["template"],
                None,
                HashVersion::BeforeArgo19,
            )
        } else {
            // An older revision's template is not in the Rollout any more: any other hash.
            template["metadata"]["labels"]
                .as_object_mut()
                .map(|l| l.remove("rollouts-pod-template-hash"));
            pod_template_hash_as(&template, None, HashVersion::BeforeArgo19)
        }
        .unwrap();
        captured.rehash(&hash, &earlier);
    }
    captured.name = format!("{}-before-argo-1.9", captured.name);
    captured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sluice_takes_over_every_captured_argo_moment_without_moving_anything() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let mut moments = Vec::new();
    for moment in argo_objects::MOMENTS {
        let mut captured = argo_objects::read(moment).unwrap();
        shorten_scale_down_delay(&mut captured);
        moments.push(captured);
    }
    for moment in ["canary-paused-step-1", "bluegreen-preview-paused"] {
        let captured = argo_objects::read(moment).unwrap();
        moments.push(with_earlier_hashes(captured));
    }
    let runs = moments.into_iter().map(|captured| {
        let env = env.clone();
        let moment = captured.name.clone();
        async move { (moment, take_over(&env, captured).await) }
    });
    let results = futures::future::join_all(runs).await;
    let failures: Vec<String> = results
        .into_iter()
        .filter_map(|(moment, r)| r.err().map(|e| format!("{moment}: {e:#}")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
