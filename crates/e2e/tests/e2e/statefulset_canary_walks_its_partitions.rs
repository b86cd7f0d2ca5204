//! A Rollout driving a StatefulSet (`rollouts.sluice.dev/statefulset`) on the real
//! StatefulSet controller: a new image walks through the steps as partitions (25% of 4 pods:
//! ordinal 3; 50%: ordinals 2 and 3), pausing as any canary does, and completes with every pod
//! on the new revision and the partition closed again; a second update aborted after its first
//! step puts the stable revision's template back, keeps the partition, and the updated ordinal
//! returns to the stable revision while the Rollout stays Degraded. The pods on each revision
//! are sampled all along; the StatefulSet never runs more updated pods than its partition
//! allows. With an `analysis` step (a web metric served by the test) and a background
//! analysis, a good metric lets the update through its steps and the background run ends
//! with the update; a bad one aborts it after its first step, and the updated ordinal goes
//! back to the stable revision. An image that never gets ready times the update out; with
//! `progressDeadlineAbort` it is aborted, and the pod stuck on it is evicted so that the
//! StatefulSet controller (which waits for a pod that is not Ready) rolls back.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::analysis::{run_phase, runs_of, web_template};
use sluice_e2e::harness::{TestNamespace, wait_for};
use sluice_e2e::*;
use sluice_testenv::http_stub::HttpStub;

const NAME: &str = "db";
const REPLICAS: i32 = 4;
const REVISION_LABEL: &str = "controller-revision-hash";

fn stateful_set(image: &str) -> String {
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": REPLICAS,
            "serviceName": NAME,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "db", "image": image}]}
            }
        }
    })
    .to_string()
}

fn rollout() -> String {
    rollout_with(json!({"steps": [
        {"setWeight": 25}, {"pause": {}}, {"setWeight": 50}, {"pause": {"duration": "2s"}}
    ]}))
}

fn rollout_with(canary: serde_json::Value) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": NAME, "annotations": {"rollouts.sluice.dev/statefulset": NAME}},
        "spec": {"strategy": {"canary": canary}}
    })
    .to_string()
}

/// What one look at the cluster shows: the ready pods on each revision (by hash), the
/// partition, the StatefulSet's image, and the Rollout's step and phase.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sample {
    pods: BTreeMap<String, i32>,
    partition: Option<i64>,
    /// The StatefulSet's current revision: the one all pods ran before, or run once updated.
    current: String,
    image: String,
    step: Option<i32>,
    phase: Option<RolloutPhase>,
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn sample(ns: &TestNamespace) -> Sample {
    // The pods first: the partition only falls during an update, so a partition read after
    // them is never above the one they were replaced under.
    let pods: Api<Pod> = ns.api();
    let mut by_revision = BTreeMap::new();
    let list = pods
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await
        .unwrap();
    for pod in list.items.iter().filter(|p| is_ready(p)) {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let revision = labels.get(REVISION_LABEL).cloned().unwrap_or_default();
        let hash = revision
            .strip_prefix(&format!("{NAME}-"))
            .unwrap_or(&revision);
        *by_revision.entry(hash.to_string()).or_insert(0) += 1;
    }
    let sts: StatefulSet = ns.api().get(NAME).await.unwrap();
    let current = sts
        .status
        .and_then(|s| s.current_revision)
        .unwrap_or_default();
    let current = current
        .strip_prefix(&format!("{NAME}-"))
        .unwrap_or(&current)
        .to_string();
    let spec = sts.spec.unwrap();
    let partition = spec
        .update_strategy
        .and_then(|u| u.rolling_update)
        .and_then(|r| r.partition)
        .map(i64::from);
    let image = spec.template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default();
    // The Rollout is made once the StatefulSet's pods are up.
    let ro = rollouts(ns).get_opt(NAME).await.unwrap();
    let status = ro
        .as_ref()
        .and_then(|r| r.status.clone())
        .unwrap_or_default();
    Sample {
        pods: by_revision,
        partition,
        current,
        image,
        step: status.current_step_index,
        phase: ro.as_ref().and_then(observed_phase),
    }
}

/// Samples until `done` holds, printing and keeping each distinct sample; every sample obeys
/// the partition: until the update revision `new` is the StatefulSet's current one, no more
/// pods run it than the ordinals at or above the partition.
async fn sample_until(
    ns: &TestNamespace,
    new: Option<&str>,
    what: &str,
    done: impl Fn(&Sample) -> bool,
) -> Vec<Sample> {
    let mut seen: Vec<Sample> = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let s = sample(ns).await;
        if seen.last() != Some(&s) {
            eprintln!("{what}: {s:?}");
            let on_new = new
                .filter(|n| *n != s.current)
                .and_then(|n| s.pods.get(n))
                .copied()
                .unwrap_or(0);
            let allowed = i64::from(REPLICAS) - s.partition.unwrap_or(0).min(i64::from(REPLICAS));
            assert!(
                i64::from(on_new) <= allowed,
                "{what}: {on_new} pods on {new:?} above partition {:?}",
                s.partition
            );
            seen.push(s.clone());
        }
        if done(&s) {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not done; seen {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The hash of the StatefulSet's update revision once its controller reports `image` there.
async fn update_hash(ns: &TestNamespace, image: &str) -> String {
    let sts_api: Api<StatefulSet> = ns.api();
    wait_for("the update revision", TIMEOUT, || async {
        let sts = sts_api.get(NAME).await?;
        let generation = sts.metadata.generation;
        let status = sts.status.unwrap_or_default();
        let spec_image = sts.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .clone();
        if status.observed_generation != generation || spec_image.as_deref() != Some(image) {
            bail!("not observed yet");
        }
        let revision = status.update_revision.unwrap_or_default();
        Ok(revision
            .strip_prefix(&format!("{NAME}-"))
            .unwrap_or(&revision)
            .to_string())
    })
    .await
    .unwrap()
}

async fn set_image(ns: &TestNamespace, image: &str) {
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "db", "image": image}]}}}});
    ns.api::<StatefulSet>()
        .patch(NAME, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
}

fn pods(of: &[(&str, i32)]) -> BTreeMap<String, i32> {
    of.iter()
        .filter(|(_, n)| *n > 0)
        .map(|(h, n)| (h.to_string(), *n))
        .collect()
}

async fn status(api: &Api<Rollout>) -> sluice_api::rollout::RolloutStatus {
    api.get(NAME).await.unwrap().status.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_canary_walks_its_partitions() {
    let (_env, ns, _controller) = setup("sts-canary").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&stateful_set("nginx:1.19-alpine"))
        .await
        .unwrap();
    let a = update_hash(&ns, "nginx:1.19-alpine").await;
    sample_until(&ns, None, "pods up", |s| s.pods == pods(&[(&a, REPLICAS)])).await;

    // Adopted: the running revision is stable at once, and the partition closed.
    ns.apply_yaml(&rollout()).await.unwrap();
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    sample_until(&ns, None, "adopted", |s| s.partition == Some(4)).await;
    let st = status(&api).await;
    assert_eq!(st.stable_rs.as_deref(), Some(a.as_str()));
    assert_eq!(st.current_pod_hash.as_deref(), Some(a.as_str()));
    assert_eq!(st.selector.as_deref(), Some("app=db"));

    // A new image: setWeight 25 updates ordinal 3 only, then the pause holds it.
    set_image(&ns, "nginx:1.20-alpine").await;
    let b = update_hash(&ns, "nginx:1.20-alpine").await;
    assert_ne!(a, b);
    let seen = sample_until(&ns, Some(&b), "step 1", |s| {
        s.phase == Some(RolloutPhase::Paused) && s.pods == pods(&[(&a, 3), (&b, 1)])
    })
    .await;
    let last = seen.last().unwrap();
    assert_eq!((last.partition, last.step), (Some(3), Some(1)));
    assert!(
        seen.iter()
            .all(|s| s.pods.get(&b).copied().unwrap_or(0) <= 1)
    );
    let st = status(&api).await;
    assert_eq!(st.current_pod_hash.as_deref(), Some(b.as_str()));
    assert_eq!(st.stable_rs.as_deref(), Some(a.as_str()));
    assert_eq!(st.updated_replicas, Some(1));
    // Still there a while later: an indefinite pause waits for its promotion.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = sample(&ns).await;
    assert_eq!(
        (s.partition, s.step, s.pods.clone()),
        (Some(3), Some(1), pods(&[(&a, 3), (&b, 1)]))
    );

    // Promoted: setWeight 50 (ordinals 2 and 3), the timed pause, then every pod and the
    // partition closed again.
    promote(&api, NAME).await;
    let seen = sample_until(&ns, Some(&b), "promoted", |s| {
        s.phase == Some(RolloutPhase::Healthy)
            && s.pods == pods(&[(&b, REPLICAS)])
            && s.partition == Some(4)
    })
    .await;
    let at_half = seen
        .iter()
        .any(|s| s.partition == Some(2) && s.pods == pods(&[(&a, 2), (&b, 2)]));
    assert!(at_half, "50%: ordinals 2 and 3 on {b}: {seen:#?}");
    assert!(seen.iter().any(|s| s.partition == Some(0)), "{seen:#?}");
    assert!(
        seen.iter().any(|s| s.step == Some(3)),
        "the timed pause: {seen:#?}"
    );
    let st = status(&api).await;
    assert_eq!(st.stable_rs.as_deref(), Some(b.as_str()));
    assert_eq!(st.current_step_index, Some(4));
    assert_eq!(st.updated_replicas, Some(REPLICAS));

    // A second update, aborted after its first step.
    set_image(&ns, "nginx:1.21-alpine").await;
    let c = update_hash(&ns, "nginx:1.21-alpine").await;
    sample_until(&ns, Some(&c), "second update, step 1", |s| {
        s.phase == Some(RolloutPhase::Paused) && s.pods == pods(&[(&b, 3), (&c, 1)])
    })
    .await;
    abort(&api, NAME).await;
    // The stable template goes back in, the partition where it was.
    let reverted = sample_until(&ns, Some(&c), "aborted", |s| s.image == "nginx:1.20-alpine").await;
    let reverted = reverted.last().unwrap();
    assert_eq!(reverted.partition, Some(3), "{reverted:?}");
    // The status is written right after the StatefulSet.
    wait_phase(&api, NAME, RolloutPhase::Degraded, TIMEOUT).await;
    // Ordinal 3 rolls back to the stable revision, the others are not touched; once all are
    // on it, the partition closes for the next update. The Rollout stays aborted.
    let seen = sample_until(&ns, Some(&c), "rolled back", |s| {
        s.pods == pods(&[(&b, REPLICAS)]) && s.partition == Some(4)
    })
    .await;
    assert!(
        seen.iter()
            .all(|s| s.pods.get(&b).copied().unwrap_or(0) >= 3),
        "only ordinal 3 was replaced: {seen:#?}"
    );
    assert!(
        seen.iter().all(|s| s.phase == Some(RolloutPhase::Degraded)),
        "{seen:#?}"
    );
    let sts: StatefulSet = ns.api().get(NAME).await.unwrap();
    let sts_status = sts.status.unwrap();
    assert_eq!(
        sts_status.update_revision,
        Some(format!("{NAME}-{b}")),
        "the stable revision is the StatefulSet's again"
    );
    let ro = api.get(NAME).await.unwrap();
    let st = ro.status.clone().unwrap();
    assert_eq!(observed_phase(&ro), Some(RolloutPhase::Degraded));
    assert_eq!(st.abort, Some(true));
    assert_eq!(st.current_pod_hash.as_deref(), Some(c.as_str()));
    assert_eq!(st.stable_rs.as_deref(), Some(b.as_str()));
    assert!(
        st.message
            .as_deref()
            .is_some_and(|m| m.starts_with("RolloutAborted: Rollout aborted update to revision")),
        "{:?}",
        st.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_analysis_gates_the_partitions() {
    let (_env, ns, _controller) = setup("sts-analysis").await;
    let api = rollouts(&ns);
    // The step's metric, and the background one (which stays good).
    let metric = HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"status": "ok"}));
    let watched = HttpStub::start().await.unwrap();
    watched.respond_json(200, &json!({"status": "ok"}));
    ns.apply_yaml(&web_template("health", &metric.url("/health"), Some(2)))
        .await
        .unwrap();
    ns.apply_yaml(&web_template("watch", &watched.url("/watch"), None))
        .await
        .unwrap();
    ns.apply_yaml(&stateful_set("nginx:1.19-alpine"))
        .await
        .unwrap();
    let a = update_hash(&ns, "nginx:1.19-alpine").await;
    sample_until(&ns, None, "pods up", |s| s.pods == pods(&[(&a, REPLICAS)])).await;
    ns.apply_yaml(&rollout_with(json!({
        "steps": [
            {"setWeight": 25},
            {"analysis": {"templates": [{"templateName": "health"}]}},
            {"setWeight": 50}
        ],
        "analysis": {"templates": [{"templateName": "watch"}], "startingStep": 1}
    })))
    .await
    .unwrap();
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;

    // A good metric: ordinal 3 updated, measured, then half, then every pod.
    set_image(&ns, "nginx:1.20-alpine").await;
    let b = update_hash(&ns, "nginx:1.20-alpine").await;
    let seen = sample_until(&ns, Some(&b), "measured update", |s| {
        s.phase == Some(RolloutPhase::Healthy)
            && s.pods == pods(&[(&b, REPLICAS)])
            && s.partition == Some(4)
    })
    .await;
    assert!(
        seen.iter()
            .any(|s| s.step == Some(1) && s.partition == Some(3)),
        "the analysis step at partition 3: {seen:#?}"
    );
    // Nothing past partition 3 before the step's run passed.
    let step_runs = runs_of(&ns, "Step", &b).await;
    assert_eq!(step_runs.len(), 1, "{step_runs:#?}");
    assert_eq!(run_phase(&step_runs[0]), Some(AnalysisPhase::Successful));
    let revision = step_runs[0]
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("rollout.argoproj.io/revision"))
        .cloned();
    assert_eq!(
        revision.as_deref(),
        Some("2"),
        "the ControllerRevision's number"
    );
    let measured_at = step_runs[0]
        .status
        .as_ref()
        .and_then(|s| s.completed_at.as_ref())
        .map(|t| t.0);
    assert!(measured_at.is_some());
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

    // A bad metric: the step's run fails after ordinal 3 is updated; the update is aborted
    // and ordinal 3 rolls back.
    metric.respond_json(200, &json!({"status": "bad"}));
    set_image(&ns, "nginx:1.21-alpine").await;
    let c = update_hash(&ns, "nginx:1.21-alpine").await;
    let seen = sample_until(&ns, Some(&c), "failed analysis", |s| {
        s.phase == Some(RolloutPhase::Degraded)
            && s.pods == pods(&[(&b, REPLICAS)])
            && s.partition == Some(4)
    })
    .await;
    assert!(
        seen.iter()
            .all(|s| s.pods.get(&c).copied().unwrap_or(0) <= 1),
        "never past the first step: {seen:#?}"
    );
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
    let sts: StatefulSet = ns.api().get(NAME).await.unwrap();
    assert_eq!(
        sts.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1.20-alpine"),
        "the stable template back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_update_that_never_gets_ready_times_out_and_rolls_back() {
    let (_env, ns, _controller) = setup("sts-deadline").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&stateful_set("nginx:1.19-alpine"))
        .await
        .unwrap();
    let a = update_hash(&ns, "nginx:1.19-alpine").await;
    sample_until(&ns, None, "pods up", |s| s.pods == pods(&[(&a, REPLICAS)])).await;
    let mut rollout: serde_json::Value = serde_json::from_str(&rollout_with(
        json!({"steps": [{"setWeight": 25}, {"pause": {}}]}),
    ))
    .unwrap();
    rollout["spec"]["progressDeadlineSeconds"] = json!(8);
    rollout["spec"]["progressDeadlineAbort"] = json!(true);
    ns.apply_yaml(&rollout.to_string()).await.unwrap();
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    sample_until(&ns, None, "adopted", |s| s.partition == Some(4)).await;

    // An image that is never pulled: ordinal 3 is replaced and never ready.
    set_image(&ns, "nginx:does-not-exist").await;
    let bad = update_hash(&ns, "nginx:does-not-exist").await;
    let seen = sample_until(&ns, Some(&bad), "timed out and rolled back", |s| {
        s.phase == Some(RolloutPhase::Degraded)
            && s.image == "nginx:1.19-alpine"
            && s.pods == pods(&[(&a, REPLICAS)])
            && s.partition == Some(4)
    })
    .await;
    assert!(
        seen.iter().any(|s| s.partition == Some(3)),
        "the first step's partition: {seen:#?}"
    );
    let st = status(&api).await;
    assert_eq!(st.abort, Some(true));
    assert_eq!(st.stable_rs.as_deref(), Some(a.as_str()));
    assert_eq!(
        st.message.as_deref(),
        Some(
            "RolloutAborted: Rollout aborted update to revision 2: StatefulSet \"db\" has timed out progressing."
        )
    );
    let events = rollout_events(&ns, NAME).await;
    for reason in ["RolloutTimedOut", "RolloutAborted", "EvictedStuckPod"] {
        assert!(
            events.iter().any(|(r, _)| r == reason),
            "{reason} in {events:#?}"
        );
    }
}
