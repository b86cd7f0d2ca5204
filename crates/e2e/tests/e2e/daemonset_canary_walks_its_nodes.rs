//! A Rollout driving a DaemonSet (`rollouts.sluice.dev/daemonset`) on kube-controller-manager's
//! real DaemonSet controller, over four nodes of a fake kubelet of the test's own (only the
//! DaemonSet's pods, pinned to those nodes by the DaemonSet controller, are bound there). A new
//! image walks through the steps node by node: `setWeight: 25` is one node of four, the pause
//! holds it, `setCanaryScale.replicas: 3` three nodes, and past the steps every node runs the
//! new revision. The nodes on each revision are sampled all along: never more nodes run the
//! update than the step in force allows. A second update aborted after its first step puts the
//! stable revision's template back, and the one updated node comes back to the stable
//! revision while the Rollout stays Degraded; the other nodes' pods are never replaced. An
//! image that never gets ready times the update out, and with `progressDeadlineAbort` the
//! stuck node is brought back to the stable revision.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::*;
use sluice_testenv::fake_kubelet::{self, KubeletConfig};
use tokio::io::{AsyncBufReadExt as _, BufReader};

pub(super) const NAME: &str = "agent";
pub(super) const NODES: usize = 4;
const REVISION_LABEL: &str = "controller-revision-hash";
const NODE_LABEL: &str = "sluice.dev/e2e-daemonset-nodes";

/// The test's nodes, served by a fake kubelet in this process, and removed when dropped.
pub(super) struct Nodes {
    names: Vec<String>,
    kubelet: tokio::task::JoinHandle<()>,
    client: kube::Client,
}

impl Nodes {
    async fn start(ns: &TestNamespace) -> Nodes {
        let names: Vec<String> = (0..NODES).map(|i| format!("{}-{i}", ns.name())).collect();
        let client = ns.env().client();
        let config = KubeletConfig {
            node_name: names[0].clone(),
            extra_nodes: names[1..].to_vec(),
            node_labels: BTreeMap::from([(NODE_LABEL.to_string(), ns.name().to_string())]),
            bind_unpinned: false,
            ..KubeletConfig::default()
        };
        let kubelet = tokio::spawn({
            let client = client.clone();
            async move {
                if let Err(e) = fake_kubelet::run(client, config).await {
                    eprintln!("the test's fake kubelet stopped: {e:#}");
                }
            }
        });
        let nodes: Api<Node> = Api::all(client.clone());
        wait_for("the test's nodes", TIMEOUT, || async {
            let list = nodes
                .list(&ListParams::default().labels(&format!("{NODE_LABEL}={}", ns.name())))
                .await?;
            if list.items.len() < NODES {
                bail!("{} of {NODES} registered", list.items.len());
            }
            Ok(())
        })
        .await
        .unwrap();
        Nodes {
            names,
            kubelet,
            client,
        }
    }
}

impl Nodes {
    /// Stops the kubelet and removes the nodes (their pods went with the namespace's
    /// DaemonSet, or go with the nodes).
    pub(super) async fn stop(mut self) {
        self.kubelet.abort();
        let nodes: Api<Node> = Api::all(self.client.clone());
        for name in std::mem::take(&mut self.names) {
            let _ = nodes.delete(&name, &DeleteParams::default()).await;
        }
    }
}

/// A test that fails before [`Nodes::stop`] still removes its nodes, as far as the runtime
/// lets the deletions run.
impl Drop for Nodes {
    fn drop(&mut self) {
        self.kubelet.abort();
        let names = std::mem::take(&mut self.names);
        if names.is_empty() {
            return;
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        // The runtime is still up while the test's locals drop.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                for name in names {
                    let _ = nodes.delete(&name, &DeleteParams::default()).await;
                }
            });
        }
    }
}

fn daemon_set(ns: &TestNamespace, image: &str) -> String {
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME},
        "spec": {
            "selector": {"matchLabels": {"app": NAME}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "nodeSelector": {NODE_LABEL: ns.name()},
                    "containers": [{"name": NAME, "image": image}]
                }
            }
        }
    })
    .to_string()
}

fn rollout() -> String {
    rollout_with(json!({}))
}

/// The Rollout, with `extra` merged into its spec.
pub(super) fn rollout_with(extra: serde_json::Value) -> String {
    let mut rollout = json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": NAME, "annotations": {"rollouts.sluice.dev/daemonset": NAME}},
        "spec": {"strategy": {"canary": {"steps": [
            {"setWeight": 25}, {"pause": {}}, {"setCanaryScale": {"replicas": 3}},
            {"pause": {"duration": "2s"}}
        ]}}}
    });
    if let (Some(spec), Some(extra)) = (rollout["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    rollout.to_string()
}

/// One look at the cluster: the ready pods' revisions by node, the uid of each node's pod,
/// the DaemonSet's image, and the Rollout's step and phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sample {
    /// Node → revision of its ready pod.
    pub(super) nodes: BTreeMap<String, String>,
    pub(super) image: String,
    pub(super) step: Option<i32>,
    pub(super) phase: Option<RolloutPhase>,
}

impl Sample {
    pub(super) fn on(&self, revision: &str) -> usize {
        self.nodes.values().filter(|r| *r == revision).count()
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn pods(ns: &TestNamespace) -> Vec<Pod> {
    ns.api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await
        .unwrap()
        .items
}

async fn sample(ns: &TestNamespace) -> Sample {
    let mut nodes = BTreeMap::new();
    for pod in pods(ns).await.iter().filter(|p| is_ready(p)) {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let revision = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_LABEL))
            .cloned();
        if let (Some(node), Some(revision)) = (node, revision) {
            nodes.insert(node, revision);
        }
    }
    let ds: DaemonSet = ns.api().get(NAME).await.unwrap();
    let image = ds.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default();
    let ro = rollouts(ns).get_opt(NAME).await.unwrap();
    let status = ro
        .as_ref()
        .and_then(|r| r.status.clone())
        .unwrap_or_default();
    Sample {
        nodes,
        image,
        step: status.current_step_index,
        phase: ro.as_ref().and_then(observed_phase),
    }
}

/// Samples until `done` holds, keeping each distinct sample; in every sample at most
/// `allowed(step)` nodes run `new`.
pub(super) async fn sample_until(
    ns: &TestNamespace,
    new: &str,
    allowed: impl Fn(Option<i32>) -> usize,
    what: &str,
    done: impl Fn(&Sample) -> bool,
) -> Vec<Sample> {
    let mut seen: Vec<Sample> = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let s = sample(ns).await;
        if seen.last() != Some(&s) {
            eprintln!("{what}: {s:?}");
            assert!(
                s.on(new) <= allowed(s.step),
                "{what}: {} nodes on {new} at step {:?}",
                s.on(new),
                s.step
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

/// The hash of the DaemonSet's update revision (its newest ControllerRevision) once its
/// controller has seen `image`.
pub(super) async fn update_hash(ns: &TestNamespace, image: &str) -> String {
    let ds_api: Api<DaemonSet> = ns.api();
    let revisions: Api<ControllerRevision> = ns.api();
    wait_for("the update revision", TIMEOUT, || async {
        let ds = ds_api.get(NAME).await?;
        let observed = ds.status.as_ref().and_then(|s| s.observed_generation);
        let spec_image = ds.spec.unwrap().template.spec.unwrap().containers[0]
            .image
            .clone();
        if observed != ds.metadata.generation || spec_image.as_deref() != Some(image) {
            bail!("not observed yet");
        }
        let list = revisions
            .list(&ListParams::default().labels(&format!("app={NAME}")))
            .await?;
        let newest = list
            .items
            .iter()
            .max_by_key(|r| r.revision)
            .and_then(|r| r.metadata.name.clone())
            .unwrap_or_default();
        Ok(newest
            .strip_prefix(&format!("{NAME}-"))
            .unwrap_or(&newest)
            .to_string())
    })
    .await
    .unwrap()
}

pub(super) async fn set_image(ns: &TestNamespace, image: &str) {
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": NAME, "image": image}]}}}});
    ns.api::<DaemonSet>()
        .patch(NAME, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
}

pub(super) async fn status(api: &Api<Rollout>) -> sluice_api::rollout::RolloutStatus {
    api.get(NAME).await.unwrap().status.unwrap_or_default()
}

/// The uid of each node's pod.
async fn pod_uids(ns: &TestNamespace) -> BTreeMap<String, String> {
    pods(ns)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| Some((p.spec?.node_name?, p.metadata.uid?)))
        .collect()
}

/// What `kubectl sluice explain` says about the Rollout, and what the dashboard's explain
/// endpoint (the text its Rollout page shows) says, each named by its source.
async fn explained(env: &TestEnv, ns: &TestNamespace) -> [(&'static str, String); 2] {
    let cli = sluice_e2e::process::cli_binary().await.unwrap();
    let kubectl_sluice = || {
        let mut command = tokio::process::Command::new(&cli);
        command
            .arg("--kubeconfig")
            .arg(env.kubeconfig_path())
            .args(["-n", ns.name()]);
        command
    };
    let out = kubectl_sluice()
        .args(["explain", NAME])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let command = String::from_utf8(out.stdout).unwrap();

    let mut dashboard = kubectl_sluice()
        .args(["dashboard", "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut line = String::new();
    let stdout = dashboard.stdout.take().unwrap();
    tokio::time::timeout(TIMEOUT, BufReader::new(stdout).read_line(&mut line))
        .await
        .expect("the dashboard prints its address")
        .unwrap();
    // `Sluice dashboard at http://127.0.0.1:PORT/ (namespace NS)`
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let answer: serde_json::Value =
        reqwest::get(format!("{url}api/v1/rollouts/{}/{NAME}/explain", ns.name()))
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .json()
            .await
            .unwrap();
    let page = answer["text"].as_str().unwrap_or_default().to_string();
    [("kubectl sluice explain", command), ("the dashboard", page)]
}

/// The test's nodes, and the DaemonSet on them with a ready pod on each; its revision's hash.
pub(super) async fn daemon_set_up(ns: &TestNamespace) -> (Nodes, String) {
    let nodes = Nodes::start(ns).await;
    ns.apply_yaml(&daemon_set(ns, "nginx:1.19-alpine"))
        .await
        .unwrap();
    let a = update_hash(ns, "nginx:1.19-alpine").await;
    sample_until(ns, &a, |_| NODES, "pods up", |s| s.on(&a) == NODES).await;
    (nodes, a)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_canary_walks_its_nodes() {
    let (env, ns, _controller) = setup("ds-canary").await;
    let (nodes, a) = daemon_set_up(&ns).await;
    let api = rollouts(&ns);

    // Adopted: the running revision is stable at once.
    ns.apply_yaml(&rollout()).await.unwrap();
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;
    let st = status(&api).await;
    assert_eq!(st.stable_rs.as_deref(), Some(a.as_str()));
    assert_eq!(st.current_pod_hash.as_deref(), Some(a.as_str()));
    assert_eq!(st.selector.as_deref(), Some("app=agent"));

    // A new image: setWeight 25 is one node of four, then the pause holds it.
    set_image(&ns, "nginx:1.20-alpine").await;
    let b = update_hash(&ns, "nginx:1.20-alpine").await;
    assert_ne!(a, b);
    // Steps 0-1: one node; 2-3: three; past them: all four.
    let by_step = |step: Option<i32>| match step.unwrap_or(0) {
        0 | 1 => 1,
        2 | 3 => 3,
        _ => NODES,
    };
    let seen = sample_until(&ns, &b, by_step, "step 1", |s| {
        s.phase == Some(RolloutPhase::Paused) && s.on(&b) == 1 && s.on(&a) == 3
    })
    .await;
    assert_eq!(seen.last().unwrap().step, Some(1));
    let st = status(&api).await;
    assert_eq!(st.current_pod_hash.as_deref(), Some(b.as_str()));
    assert_eq!(st.stable_rs.as_deref(), Some(a.as_str()));
    assert_eq!(st.updated_replicas, Some(1));
    // Still there a while later: an indefinite pause waits for its promotion.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = sample(&ns).await;
    assert_eq!((s.step, s.on(&b)), (Some(1), 1));
    // `explain`, and the dashboard's page (which shows explain's answer), name each node's
    // revision.
    let updated = s
        .nodes
        .iter()
        .find(|(_, r)| **r == b)
        .map(|(n, _)| n.clone());
    for (source, text) in explained(&env, &ns).await {
        assert!(
            text.contains("DaemonSet \"agent\", by node:"),
            "{source}: {text}"
        );
        for (node, revision) in &s.nodes {
            let role = if Some(node) == updated.as_ref() {
                "update"
            } else {
                "stable"
            };
            let line = format!("  {node}: revision {revision} ({role}), ready\n");
            assert!(text.contains(&line), "{source} lacks {line:?}: {text}");
        }
    }

    // Promoted: three nodes, the timed pause, then every node.
    promote(&api, NAME).await;
    let seen = sample_until(&ns, &b, by_step, "promoted", |s| {
        s.phase == Some(RolloutPhase::Healthy) && s.on(&b) == NODES
    })
    .await;
    assert!(
        seen.iter().any(|s| s.step == Some(3) && s.on(&b) == 3),
        "three nodes through the timed pause: {seen:#?}"
    );
    let st = status(&api).await;
    assert_eq!(st.stable_rs.as_deref(), Some(b.as_str()));
    assert_eq!(st.current_step_index, Some(4));
    assert_eq!(st.updated_replicas, Some(NODES as i32));

    // A second update, aborted after its first step.
    set_image(&ns, "nginx:1.21-alpine").await;
    let c = update_hash(&ns, "nginx:1.21-alpine").await;
    let seen = sample_until(&ns, &c, by_step, "second update, step 1", |s| {
        s.phase == Some(RolloutPhase::Paused) && s.on(&c) == 1
    })
    .await;
    let updated_node = seen
        .last()
        .unwrap()
        .nodes
        .iter()
        .find(|(_, r)| **r == c)
        .map(|(n, _)| n.clone())
        .unwrap();
    let untouched: BTreeMap<String, String> = pod_uids(&ns)
        .await
        .into_iter()
        .filter(|(node, _)| *node != updated_node)
        .collect();
    abort(&api, NAME).await;
    // The stable template goes back in, and the updated node returns to the stable revision.
    sample_until(
        &ns,
        &c,
        |_| 1,
        "aborted",
        |s| s.image == "nginx:1.20-alpine" && s.on(&b) == NODES,
    )
    .await;
    wait_phase(&api, NAME, RolloutPhase::Degraded, TIMEOUT).await;
    let st = status(&api).await;
    assert_eq!(st.abort, Some(true));
    assert_eq!(st.stable_rs.as_deref(), Some(b.as_str()));
    let after = pod_uids(&ns).await;
    for (node, uid) in &untouched {
        assert_eq!(
            after.get(node),
            Some(uid),
            "the pod of {node} was never updated and is never replaced"
        );
    }
    nodes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_canary_that_never_gets_ready_is_aborted() {
    let (_env, ns, _controller) = setup("ds-deadline").await;
    let (nodes, a) = daemon_set_up(&ns).await;
    let api = rollouts(&ns);
    let aborting = json!({"progressDeadlineSeconds": 8, "progressDeadlineAbort": true});
    ns.apply_yaml(&rollout_with(aborting)).await.unwrap();
    wait_phase(&api, NAME, RolloutPhase::Healthy, TIMEOUT).await;

    // An image that is never pulled: the first step's node gets a pod that is never ready.
    let bad = "registry.invalid/does-not-exist:1";
    set_image(&ns, bad).await;
    let b = update_hash(&ns, bad).await;
    wait_phase(&api, NAME, RolloutPhase::Degraded, TIMEOUT).await;
    let st = status(&api).await;
    assert_eq!(st.abort, Some(true), "{st:?}");
    let progressing = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == Some(sluice_api::rollout::RolloutConditionType::Progressing))
        .and_then(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        progressing.contains("has timed out progressing"),
        "{progressing}"
    );
    // The stuck pod is evicted and its node comes back on the stable revision; no sample ever
    // has a ready pod on the bad revision, nor another node leaving the stable one.
    let seen = sample_until(
        &ns,
        &b,
        |_| 0,
        "aborted",
        |s| s.image == "nginx:1.19-alpine" && s.on(&a) == NODES,
    )
    .await;
    assert!(
        seen.iter().all(|s| s.on(&a) >= NODES - 1),
        "one node at a time: {seen:#?}"
    );
    assert_eq!(status(&api).await.stable_rs.as_deref(), Some(a.as_str()));
    nodes.stop().await;
}
