//! A stand-in for the kubelet of one node (or several), for a control plane without container
//! runtime.
//!
//! It registers a Ready [`Node`] (reporting the API server's version, as a kubelet of the same
//! release would), renews the node's Lease in `kube-node-lease` as a kubelet's heartbeat does,
//! binds every pending pod to it (there is no scheduler either; a pod pinned to a node by a
//! required node affinity on its name, as the DaemonSet controller pins its pods, is bound to
//! that node if it is one of this kubelet's, and left to its own kubelet otherwise),
//! and reports pod status as the [`rules`] decide. It also finishes the deletion of pods being
//! deleted, which a real kubelet does once their containers have stopped; without that they
//! would hang in `Terminating`.
//!
//! Pods are processed by a [`Controller`]: one watch over all pods feeds a local cache, at most
//! `concurrency` pods are handled at once, never the same pod twice at a time, and timed
//! transitions (a readiness delay, a job finishing) are requeued on the controller's timer
//! queue for the instant the rules name, so nothing is polled and nothing is re-listed.

pub mod metrics;
pub mod rules;
pub mod status;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use sluice_watch::TouchedWhenCached as _;
use tracing::{debug, info, warn};

use rules::{Phase, PodFacts, Timings, evaluate};
use status::{StatusContext, desired_status, needs_update};

/// How the fake kubelet behaves.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// The node unpinned pods are bound to.
    pub node_name: String,
    /// More nodes served by the same process (a DaemonSet needs several): only pods pinned to
    /// one of them are bound there.
    pub extra_nodes: Vec<String>,
    /// Labels of every node registered, beside the usual ones.
    pub node_labels: std::collections::BTreeMap<String, String>,
    /// Whether pods pinned to no node are bound to `node_name`; a second kubelet beside the
    /// local control plane's serves pinned pods only.
    pub bind_unpinned: bool,
    pub timings: Timings,
    /// Pods handled at once.
    pub concurrency: u16,
    /// The loopback port of the resource metrics API ([`metrics`]), if it is served.
    pub metrics_port: Option<u16>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            node_name: "fake-node-1".to_string(),
            extra_nodes: Vec::new(),
            node_labels: Default::default(),
            bind_unpinned: true,
            timings: Timings::default(),
            concurrency: 32,
            metrics_port: None,
        }
    }
}

/// The address the node reports and every pod gets as host IP.
const HOST_IP: &str = "127.0.0.1";
/// Slack added to timed requeues so the wake-up lands after the transition, not just before.
const REQUEUE_SLACK: Duration = Duration::from_millis(20);

struct Context {
    client: Client,
    config: KubeletConfig,
    /// The pods started here, by uid.
    pods: Mutex<HashMap<String, Tracked>>,
}

/// What the kubelet remembers of a pod it started.
struct Tracked {
    /// When it was started, to sub-second precision; `status.startTime` only keeps whole
    /// seconds and serves after a restart of the kubelet.
    start: Timestamp,
    /// The phase and readiness last reported, to log each transition once.
    reported: Option<(Phase, bool)>,
}

impl KubeletConfig {
    /// Every node served here, `node_name` first.
    pub fn nodes(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.node_name.as_str()).chain(self.extra_nodes.iter().map(String::as_str))
    }

    fn serves(&self, node: &str) -> bool {
        self.nodes().any(|n| n == node)
    }

    /// The node to bind an unbound pod to, if it is this kubelet's to bind.
    fn node_for(&self, pod: &Pod) -> Option<String> {
        match pinned_node(pod) {
            Some(node) => self.serves(&node).then_some(node),
            None => self.bind_unpinned.then(|| self.node_name.clone()),
        }
    }
}

/// The node a required node affinity on `metadata.name` pins the pod to: how the DaemonSet
/// controller places its pods, for the scheduler to bind. The engine reads the same field
/// (`sluice_engine::daemonset::node_pod`); the fake kubelet keeps its own reading, as it keeps
/// all of its code apart from the controller's, so that one mistake cannot hide itself.
fn pinned_node(pod: &Pod) -> Option<String> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name" && f.operator == "In")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}

impl Context {
    fn pods(&self) -> std::sync::MutexGuard<'_, HashMap<String, Tracked>> {
        self.pods.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn started_now(&self, uid: &str) {
        let tracked = Tracked {
            start: Timestamp::now(),
            reported: None,
        };
        self.pods().insert(uid.to_string(), tracked);
    }

    fn start_of(&self, uid: &str, pod: &Pod) -> Timestamp {
        let mut pods = self.pods();
        let tracked = pods.entry(uid.to_string()).or_insert_with(|| Tracked {
            start: pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map_or_else(Timestamp::now, |t| t.0),
            reported: None,
        });
        tracked.start
    }

    /// Records a report; true when it differs from the previous one.
    fn reported(&self, uid: &str, outcome: (Phase, bool)) -> bool {
        let mut pods = self.pods();
        let Some(tracked) = pods.get_mut(uid) else {
            return true;
        };
        tracked.reported.replace(outcome) != Some(outcome)
    }

    fn forget(&self, uid: &str) {
        self.pods().remove(uid);
    }
}

/// Registers the nodes and runs until the process gets SIGINT or SIGTERM.
pub async fn run(client: Client, config: KubeletConfig) -> anyhow::Result<()> {
    let mut heartbeats = Vec::new();
    for node in config.nodes() {
        register_node(&client, node, &config.node_labels).await?;
        info!(node = %node, "node registered and Ready");
        heartbeats.push(tokio::spawn(renew_node_lease(
            client.clone(),
            node.to_string(),
        )));
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let concurrency = config.concurrency;
    let ctx = Arc::new(Context {
        client,
        config,
        pods: Mutex::new(HashMap::new()),
    });
    // The watch backs off its own errors, and the controller does not back off the stream
    // again: kube-runtime's default pauses the stream after every error, and after an API
    // server restart (a 410 on resuming, then a list) pods went unseen for minutes.
    let (store, writer) = reflector::store();
    // The watch's own errors and lists are logged: what a kubelet that stopped seeing pods
    // would need to tell. A watch the server keeps open yet silent ends within a minute.
    // Listed at the most recent revision, not whatever the API server's cache holds: after an
    // API server restart a list "at any revision" came back without pods created since.
    let config = watcher::Config::default()
        .timeout(60)
        .list_semantic(watcher::ListSemantic::MostRecent);
    let events = relisting(pods.clone(), config)
        .default_backoff()
        .inspect(|event| match event {
            Err(e) => warn!("pod watch: {e}"),
            Ok(watcher::Event::Init) => info!("pod watch: listing"),
            Ok(watcher::Event::InitDone) => info!("pod watch: listed"),
            Ok(_) => {}
        });
    // A list's pods are passed on once the store holds them: the controller reads them there.
    let watch = reflector(writer, events).applied_when_cached(store.clone());
    let pod_controller = Controller::for_stream(watch, store)
        .trigger_backoff(NoBackoff)
        .with_config(controller::Config::default().concurrency(concurrency));
    let sweeper = tokio::spawn(forget_vanished_pods(pod_controller.store(), ctx.clone()));
    let metrics_api = ctx.config.metrics_port.map(|port| {
        let (client, store) = (ctx.client.clone(), pod_controller.store());
        tokio::spawn(async move {
            if let Err(e) = metrics::serve(client, store, port).await {
                warn!("the resource metrics API stopped: {e:#}");
            }
        })
    });
    let binder = tokio::spawn(bind_pods_left_unbound(pods, ctx.config.clone()));
    pod_controller
        .shutdown_on_signal()
        .run(bounded_reconcile, error_policy, ctx)
        .for_each(|outcome| async move {
            if let Err(e) = outcome {
                debug!("pod not handled: {e}");
            }
        })
        .await;
    sweeper.abort();
    binder.abort();
    if let Some(metrics_api) = metrics_api {
        metrics_api.abort();
    }
    for heartbeat in heartbeats {
        heartbeat.abort();
    }
    info!("stopped");
    Ok(())
}

async fn register_node(
    client: &Client,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "sluice.dev/fake-node": "true",
            },
        },
    }))?;
    node.metadata
        .labels
        .get_or_insert_with(Default::default)
        .extend(labels.clone());
    let node = match nodes.create(&PostParams::default(), &node).await {
        Ok(node) => node,
        Err(kube::Error::Api(s)) if s.code == 409 => nodes.get(name).await?,
        Err(e) => return Err(e.into()),
    };
    let version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|_| "v0.0.0".into());
    let now = Timestamp::now().to_string();
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let capacity =
        json!({"cpu": "1000", "memory": "1Ti", "pods": "100000", "ephemeral-storage": "1Ti"});
    let status = json!({
        "status": {
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": HOST_IP},
                {"type": "Hostname", "address": name},
            ],
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {
                "architecture": "amd64", "operatingSystem": "linux", "osImage": "sluice fake node",
                "kernelVersion": "", "containerRuntimeVersion": "fake://0", "kubeletVersion": version,
                "kubeProxyVersion": version, "machineID": name, "systemUUID": name, "bootID": name,
            },
        }
    });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    debug!(uid = ?node.metadata.uid, %version, "node status written");
    untaint_ready_node(&nodes, name).await
}

/// The taint the API server puts on a new node, `node.kubernetes.io/not-ready:NoSchedule`.
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Removes the not-ready taint from the node now that it reports Ready, as the node lifecycle
/// controller does (the local control plane does not run it: it would also evict the pods of
/// a node whose heartbeat a loaded machine delays). Pods bound here directly never minded the
/// taint, but the DaemonSet controller places no pod on a node that has it.
async fn untaint_ready_node(nodes: &Api<Node>, name: &str) -> anyhow::Result<()> {
    loop {
        let node = nodes.get(name).await?;
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        if !taints.iter().any(|t| t.key == NOT_READY_TAINT) {
            return Ok(());
        }
        let kept: Vec<_> = taints
            .into_iter()
            .filter(|t| t.key != NOT_READY_TAINT)
            .collect();
        // Conditional on the version read: a taint added meanwhile is not lost.
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": kept},
        });
        match nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// How often the node's Lease is renewed, and how long it is declared to last (the kubelet's
/// defaults).
const LEASE_RENEW: Duration = Duration::from_secs(10);
const LEASE_DURATION_SECONDS: i32 = 40;

/// Renews `kube-node-lease/<node>` every [`LEASE_RENEW`], as a kubelet does, so that anything
/// reading node heartbeats sees a live node. Failures are logged and retried.
async fn renew_node_lease(client: Client, node: String) {
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let params = PatchParams::apply("sluice-fake-kubelet").force();
    loop {
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node},
            "spec": {
                "holderIdentity": node,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": MicroTime(Timestamp::now()),
            }
        });
        if let Err(e) = leases.patch(&node, &params, &Patch::Apply(&lease)).await {
            warn!(error = %e, "could not renew the node lease");
        }
        tokio::time::sleep(LEASE_RENEW).await;
    }
}

/// How long one pod's handling may take: a request that never returns (on a connection the
/// API server dropped while restarting) must not hold one of the few concurrent slots for ever.
const RECONCILE_LIMIT: Duration = Duration::from_secs(20);

async fn bounded_reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    tokio::time::timeout(RECONCILE_LIMIT, reconcile(pod, ctx))
        .await
        .unwrap_or_else(|_| {
            Err(kube::Error::Service(
                format!("no answer within {RECONCILE_LIMIT:?}").into(),
            ))
        })
}

/// No pause of the merged stream after an error (the watch has its own backoff).
struct NoBackoff;

impl Iterator for NoBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        // `None` would end the stream; zero passes the error on at once.
        Some(Duration::ZERO)
    }
}

impl kube::runtime::utils::Backoff for NoBackoff {
    fn reset(&mut self) {}
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let uid = pod.uid().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if node_name.is_some_and(|n| !ctx.config.serves(n)) {
        return Ok(Action::await_change());
    }
    if pod.metadata.deletion_timestamp.is_some() {
        // Unbound pods are removed by the API server itself.
        if node_name.is_some() && finish_deletion(&api, &name, &uid).await? {
            info!("{namespace}/{name} deleted");
        }
        ctx.forget(&uid);
        return Ok(Action::await_change());
    }
    let current = pod.status.as_ref();
    if current
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
    {
        ctx.forget(&uid);
        return Ok(Action::await_change());
    }
    if node_name.is_none() {
        let Some(node) = ctx.config.node_for(&pod) else {
            // Another kubelet's pod.
            return Ok(Action::await_change());
        };
        if !bind(&api, &name, &node).await? {
            return Ok(Action::await_change());
        }
        ctx.started_now(&uid);
        debug!("{namespace}/{name} bound");
    }
    let start = ctx.start_of(&uid, &pod);
    let now = Timestamp::now();
    let elapsed = Duration::try_from(now.duration_since(start)).unwrap_or(Duration::ZERO);
    let (facts, warnings) = PodFacts::from_pod(&pod);
    for warning in warnings {
        warn!("{namespace}/{name}: {warning}");
    }
    let eval = evaluate(&facts, &ctx.config.timings, elapsed);
    let status_ctx = StatusContext {
        current,
        uid: &uid,
        start,
        now,
        host_ip: HOST_IP,
    };
    let desired = desired_status(&eval, &status_ctx);
    if needs_update(current, &desired) {
        let patch = json!({ "status": desired });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Action::await_change()),
            Err(e) => return Err(e),
        }
        if ctx.reported(&uid, (eval.phase, eval.ready())) {
            let readiness = if eval.ready() { "Ready" } else { "not Ready" };
            info!("{namespace}/{name} {} {readiness}", eval.phase.as_str());
        }
    }
    if eval.phase.is_terminal() {
        ctx.forget(&uid);
    }
    Ok(match eval.next_change {
        Some(at) => Action::requeue(at.saturating_sub(elapsed) + REQUEUE_SLACK),
        None => Action::await_change(),
    })
}

/// Binds the pod to the node. False when it is gone or bound elsewhere meanwhile.
async fn bind(api: &Api<Pod>, name: &str, node_name: &str) -> Result<bool, kube::Error> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(node_name.to_string()),
            ..ObjectReference::default()
        },
    };
    match api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            name,
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Deletes the pod for good. False when it was gone already.
async fn finish_deletion(api: &Api<Pod>, name: &str, uid: &str) -> Result<bool, kube::Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

fn error_policy(pod: Arc<Pod>, error: &kube::Error, _ctx: Arc<Context>) -> Action {
    warn!(
        "{}/{}: {error}; retrying",
        pod.namespace().unwrap_or_default(),
        pod.name_any()
    );
    Action::requeue(Duration::from_secs(1))
}

/// How often the pod watch starts again from a fresh list.
const RELIST_EVERY: Duration = Duration::from_secs(60);

/// The pod watch, started again from a fresh list after every error and every
/// [`RELIST_EVERY`] (between two lists, never inside one). After an API server restart at
/// 1,000 Rollouts a resumed watch went on without the creation, binding or deletion of
/// hundreds of pods, with no error to tell; a fresh list catches up with them, as the
/// reflectors of a real kubelet do after a watch that broke.
fn relisting(
    api: Api<Pod>,
    config: watcher::Config,
) -> impl futures::Stream<Item = watcher::Result<watcher::Event<Pod>>> + Send {
    let fresh = move |api: &Api<Pod>| watcher::watcher(api.clone(), config.clone()).boxed();
    let first = fresh(&api);
    let since = tokio::time::Instant::now();
    futures::stream::unfold(
        (first, api, fresh, since, false),
        |(mut inner, api, fresh, mut since, mut listing)| async move {
            loop {
                // A quiet watch is started again too: the timer, not the next event, decides.
                let due = tokio::time::sleep_until(since + RELIST_EVERY);
                let item = tokio::select! {
                    item = inner.next() => item?,
                    () = due, if !listing => {
                        inner = fresh(&api);
                        since = tokio::time::Instant::now();
                        continue;
                    }
                };
                match &item {
                    Ok(watcher::Event::Init) => listing = true,
                    Ok(watcher::Event::InitDone) => listing = false,
                    _ => {}
                }
                if item.is_err() {
                    inner = fresh(&api);
                    since = tokio::time::Instant::now();
                    listing = false;
                }
                return Some((item, (inner, api, fresh, since, listing)));
            }
        },
    )
}

/// How long a pod may stay unbound before [`bind_pods_left_unbound`] binds it.
const UNBOUND_FOR: Duration = Duration::from_secs(15);

/// Binds the pods the watch never showed: every 15 s, pods without a node for longer than
/// that are read from the API server and bound, which the watch then shows. A real
/// scheduler retries its unscheduled pods the same way; here it keeps the control plane
/// serving pods when a watch resumed after an API server restart missed their creation
/// (seen at 1,000 Rollouts with the API server killed mid-update).
async fn bind_pods_left_unbound(pods: Api<Pod>, config: KubeletConfig) {
    let mut every = tokio::time::interval(UNBOUND_FOR);
    let unbound = kube::api::ListParams::default().fields("spec.nodeName=");
    loop {
        every.tick().await;
        let Ok(list) = pods.list(&unbound).await else {
            continue;
        };
        let now = Timestamp::now();
        for pod in list.items {
            let old_enough = pod.metadata.creation_timestamp.as_ref().is_some_and(|t| {
                Duration::try_from(now.duration_since(t.0)).unwrap_or(Duration::ZERO) >= UNBOUND_FOR
            });
            if !old_enough || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(node_name) = config.node_for(&pod) else {
                continue;
            };
            let namespace = pod.namespace().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(pods.clone().into_client(), &namespace);
            if let Ok(true) = bind(&api, &pod.name_any(), &node_name).await {
                warn!(
                    "{namespace}/{}: bound after {UNBOUND_FOR:?} unseen by the pod watch",
                    pod.name_any()
                );
            }
        }
    }
}

/// Forgets pods that disappeared without passing through a deletion here (unbound
/// pods, finished pods the API server removed itself).
async fn forget_vanished_pods(store: Store<Pod>, ctx: Arc<Context>) {
    let mut every = tokio::time::interval(Duration::from_secs(60));
    loop {
        every.tick().await;
        let live: std::collections::HashSet<String> =
            store.state().iter().filter_map(|p| p.uid()).collect();
        ctx.pods().retain(|uid, _| live.contains(uid));
    }
}
