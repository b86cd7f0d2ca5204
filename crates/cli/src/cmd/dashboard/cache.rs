//! The objects the dashboard shows, kept in memory by one watch per kind for the whole
//! process (never one per browser tab, and never polled): Rollouts, the ReplicaSets and pods
//! that carry Rollouts' pod-template-hash label, AnalysisRuns and Experiments. Each change
//! bumps a counter that the live views wait on.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use sluice_api::Rollout;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_engine::labels::POD_TEMPLATE_HASH;
use tokio::sync::watch;

use super::super::warn;
use super::brief::ReplicaSetBrief;

/// How long the first requests wait for the watches to have listed once; after that every
/// request is answered from what they have (a kind the user may not list stays empty).
const READY_WAIT: Duration = Duration::from_secs(10);

/// Which namespaces the dashboard serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    One(String),
    All,
}

impl Scope {
    /// Whether requests about `namespace` are served.
    pub fn covers(&self, namespace: &str) -> bool {
        match self {
            Scope::One(ns) => ns == namespace,
            Scope::All => true,
        }
    }
}

/// The watched objects and a change counter.
#[derive(Clone)]
pub struct Cache {
    pub rollouts: Store<Rollout>,
    /// Compact copies: the pages read only a ReplicaSet's metadata, counts and images.
    pub replica_sets: Store<ReplicaSetBrief>,
    pub pods: Store<Pod>,
    pub runs: Store<AnalysisRun>,
    pub experiments: Store<Experiment>,
    changes: watch::Receiver<u64>,
    /// Set once the watches have listed, or [`READY_WAIT`] has passed: later requests do not
    /// wait again for a kind that cannot be listed.
    settled: Arc<tokio::sync::OnceCell<()>>,
}

impl Cache {
    /// Starts the watches on a task of their own; they retry with a backoff when the API
    /// server drops them.
    pub fn start(client: &Client, scope: &Scope) -> Self {
        let (tx, changes) = watch::channel(0u64);
        // ReplicaSets and pods made for Rollouts (and their Experiments) carry this label:
        // the others of the namespace are never sent to the dashboard.
        //
        // Lists (the first, and each after a watch expired) are served from the API server's
        // watch cache: a paginated list from etcd of thousands of ReplicaSets under churn
        // outlives its continue token, fails, and leaves the page showing what it had.
        let every = || watcher::Config::default().any_semantic();
        let owned = || every().labels(POD_TEMPLATE_HASH);
        let (rollouts, rollout_events) = reflect(api(client, scope), every());
        let (replica_sets, rs_events) = reflect(api(client, scope), owned());
        let (pods, pod_events) = reflect(api(client, scope), owned());
        let (runs, run_events) = reflect(api(client, scope), every());
        let (experiments, exp_events) = reflect(api(client, scope), every());
        let events = stream::select_all([
            rollout_events,
            rs_events,
            pod_events,
            run_events,
            exp_events,
        ]);
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                match event {
                    Ok(()) => tx.send_modify(|n| *n = n.wrapping_add(1)),
                    Err(e) => warn(&format!("dashboard watch failed, retrying: {e}")),
                }
            }
        });
        Self {
            rollouts,
            replica_sets,
            pods,
            runs,
            experiments,
            changes,
            settled: Arc::default(),
        }
    }

    /// Waits (a bounded time, and only until this has once returned) until every watch has
    /// listed once.
    pub async fn ready(&self) {
        self.settled
            .get_or_init(|| async {
                let all = async {
                    let _ = self.rollouts.wait_until_ready().await;
                    let _ = self.replica_sets.wait_until_ready().await;
                    let _ = self.pods.wait_until_ready().await;
                    let _ = self.runs.wait_until_ready().await;
                    let _ = self.experiments.wait_until_ready().await;
                };
                let _ = tokio::time::timeout(READY_WAIT, all).await;
            })
            .await;
    }

    /// A receiver that wakes on every change of any watched object.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }
}

fn api<K>(client: &Client, scope: &Scope) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match scope {
        Scope::One(ns) => Api::namespaced(client.clone(), ns),
        Scope::All => Api::all(client.clone()),
    }
}

type Events = std::pin::Pin<Box<dyn Stream<Item = Result<(), watcher::Error>> + Send>>;

/// A store of `api`'s objects and the stream that fills it. Managed fields are dropped on
/// arrival: nobody reads them and they are often the largest part of an object.
fn reflect<K>(api: Api<K>, config: watcher::Config) -> (Store<K>, Events)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let events = watcher(api, config)
        .default_backoff()
        .modify(|object: &mut K| object.managed_fields_mut().clear())
        .reflect(writer)
        .map(|event| event.map(|_| ()))
        .boxed();
    (store, events)
}

/// The objects of `store` in `namespace`.
pub fn in_namespace<K>(store: &Store<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store.state_filter(|object| object.meta().namespace.as_deref() == Some(namespace))
}
