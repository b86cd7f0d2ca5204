//! Every state the namespace went through, from watches: the ReplicaSets, Pods, Services, the
//! Rollout and the VirtualService. The control plane has one etcd, whose revision each write
//! takes in turn, so the changes of all five kinds ordered by their `resourceVersion` (opaque
//! to the API, that number here) replay the namespace write by write, and [`Recorder::check`]
//! holds the [`rules`](super::rules) at each of those moments, not at samples of them.
//!
//! A watch that has to list again (its revision compacted away) misses what happened in
//! between: the revisions up to that list are blind, and not judged.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::DynamicObject;
use kube::runtime::watcher::{self, Event, watcher};
use kube::runtime::{WatchStreamExt, utils::Backoff};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;
use sluice_api::Rollout;
use tokio::task::JoinHandle;

use super::rules::{self, Expect, View};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    ReplicaSet,
    Pod,
    Service,
    Rollout,
    VirtualService,
}

/// One object as one change left it.
#[derive(Clone, Debug)]
pub enum Obj {
    ReplicaSet(ReplicaSet),
    Pod(Pod),
    Service(Service),
    Rollout(Box<Rollout>),
    VirtualService(Value),
}

/// One change: an object at a revision (`None`: deleted at it).
#[derive(Clone, Debug)]
pub struct Change {
    pub revision: u64,
    pub kind: Kind,
    pub name: String,
    pub obj: Option<Obj>,
    /// From a watch's first list: the state the replay starts from.
    pub initial: bool,
}

/// What was recorded: the changes, and the revision windows `(after, up to]` a watch may have
/// missed states in.
#[derive(Clone, Debug, Default)]
pub struct Log {
    pub changes: Vec<Change>,
    pub blind: Vec<(u64, u64)>,
}

/// What the checks found, and how many states they judged.
#[derive(Debug, Default)]
pub struct Found {
    pub violations: Vec<String>,
    pub views: u64,
    pub blind: u64,
}

pub struct Recorder {
    log: Arc<Mutex<Log>>,
    listed: Arc<Mutex<Vec<Kind>>>,
    kinds: usize,
    tasks: Vec<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

type Shared = (Arc<Mutex<Log>>, Arc<Mutex<Vec<Kind>>>);

impl Recorder {
    /// Starts the watches of `namespace`; the VirtualService's only when `routed`.
    pub fn start(client: Client, namespace: &str, routed: bool) -> Recorder {
        let log = Arc::new(Mutex::new(Log::default()));
        let listed = Arc::new(Mutex::new(Vec::new()));
        let shared: Shared = (log.clone(), listed.clone());
        let mut tasks = vec![
            tokio::spawn(follow(
                Api::<ReplicaSet>::namespaced(client.clone(), namespace),
                Kind::ReplicaSet,
                Obj::ReplicaSet,
                shared.clone(),
            )),
            tokio::spawn(follow(
                Api::<Pod>::namespaced(client.clone(), namespace),
                Kind::Pod,
                Obj::Pod,
                shared.clone(),
            )),
            tokio::spawn(follow(
                Api::<Service>::namespaced(client.clone(), namespace),
                Kind::Service,
                Obj::Service,
                shared.clone(),
            )),
            tokio::spawn(follow(
                Api::<Rollout>::namespaced(client.clone(), namespace),
                Kind::Rollout,
                |ro| Obj::Rollout(Box::new(ro)),
                shared.clone(),
            )),
        ];
        if routed {
            let resource = sluice_e2e::routing::virtual_services_resource();
            tasks.push(tokio::spawn(follow(
                Api::<DynamicObject>::namespaced_with(client, namespace, &resource),
                Kind::VirtualService,
                |vs| Obj::VirtualService(serde_json::to_value(vs).unwrap_or_default()),
                shared,
            )));
        }
        Recorder {
            kinds: tasks.len(),
            log,
            listed,
            tasks,
        }
    }

    /// Waits until each kind's first list is recorded.
    pub async fn listed(&self) {
        while lock(&self.listed).len() < self.kinds {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log(&self) -> Log {
        lock(&self.log).clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Watches retried every quarter second: the shorter a watch is away, the fewer revisions are
/// blind.
struct Quick;

impl Backoff for Quick {
    fn reset(&mut self) {}
}

impl Iterator for Quick {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(250))
    }
}

fn revision_of<K: Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn follow<K>(api: Api<K>, kind: Kind, wrap: impl Fn(K) -> Obj, (log, listed): Shared)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut stream = watcher(api, watcher::Config::default())
        .backoff(Quick)
        .boxed();
    let mut first_list = true;
    // The newest revision this watch delivered, and the names of a list under way.
    let mut last = 0u64;
    let mut relisted: Vec<String> = Vec::new();
    let mut relist_top = 0u64;
    while let Some(event) = stream.next().await {
        let Ok(event) = event else { continue };
        let mut log = lock(&log);
        match event {
            Event::Init => {
                relisted.clear();
                relist_top = 0;
            }
            Event::InitApply(o) => {
                let revision = revision_of(&o);
                relist_top = relist_top.max(revision);
                relisted.push(o.name_any());
                log.changes.push(Change {
                    revision,
                    kind,
                    name: o.name_any(),
                    obj: Some(wrap(o)),
                    initial: first_list,
                });
            }
            Event::InitDone => {
                if first_list {
                    first_list = false;
                    lock(&listed).push(kind);
                } else {
                    // What was deleted unseen goes at the list's revision, and the states
                    // between the last seen and the list are not judged.
                    let known: Vec<String> = current_names(&log.changes, kind);
                    for name in known.into_iter().filter(|n| !relisted.contains(n)) {
                        log.changes.push(Change {
                            revision: relist_top.max(last),
                            kind,
                            name,
                            obj: None,
                            initial: false,
                        });
                    }
                    log.blind.push((last, relist_top.max(last)));
                }
                last = last.max(relist_top);
            }
            Event::Apply(o) => {
                let revision = revision_of(&o);
                last = last.max(revision);
                log.changes.push(Change {
                    revision,
                    kind,
                    name: o.name_any(),
                    obj: Some(wrap(o)),
                    initial: false,
                });
            }
            Event::Delete(o) => {
                // A deletion's event carries the revision of the deletion.
                let revision = revision_of(&o);
                last = last.max(revision);
                log.changes.push(Change {
                    revision,
                    kind,
                    name: o.name_any(),
                    obj: None,
                    initial: false,
                });
            }
        }
    }
}

/// The names of `kind` that exist after `changes`, in their order.
fn current_names(changes: &[Change], kind: Kind) -> Vec<String> {
    let mut names: BTreeMap<&str, bool> = BTreeMap::new();
    for c in changes.iter().filter(|c| c.kind == kind) {
        names.insert(&c.name, c.obj.is_some());
    }
    names
        .into_iter()
        .filter(|(_, alive)| *alive)
        .map(|(n, _)| n.to_string())
        .collect()
}

impl Log {
    /// Replays the changes in revision order and holds the rules at every revision after the
    /// first lists (the state they start from is judged too), blind ones aside. A rule broken
    /// again at a later revision is reported once, at its first.
    pub fn check(&self, expect: &Expect) -> Found {
        let floor = self
            .changes
            .iter()
            .filter(|c| c.initial)
            .map(|c| c.revision)
            .max()
            .unwrap_or(0);
        let mut ordered: Vec<&Change> = self.changes.iter().collect();
        ordered.sort_by_key(|c| c.revision);
        let mut state: BTreeMap<(Kind, &str), &Obj> = BTreeMap::new();
        let mut found = Found::default();
        let mut seen = Vec::new();
        let mut judge = |state: &BTreeMap<(Kind, &str), &Obj>, revision: u64| {
            if self
                .blind
                .iter()
                .any(|(a, b)| revision > *a && revision <= *b)
            {
                found.blind += 1;
                return;
            }
            found.views += 1;
            for line in rules::broken(&view_of(state), expect) {
                if !seen.contains(&line) {
                    found
                        .violations
                        .push(format!("at revision {revision}: {line}"));
                    seen.push(line);
                }
            }
        };
        let mut judged_floor = false;
        for (i, change) in ordered.iter().enumerate() {
            if change.revision > floor && !judged_floor {
                judge(&state, floor);
                judged_floor = true;
            }
            match &change.obj {
                Some(obj) => state.insert((change.kind, &change.name), obj),
                None => state.remove(&(change.kind, change.name.as_str())),
            };
            let last_of_revision = ordered
                .get(i + 1)
                .is_none_or(|next| next.revision != change.revision);
            if change.revision > floor && last_of_revision {
                judge(&state, change.revision);
            }
        }
        if !judged_floor {
            judge(&state, floor);
        }
        found
    }

    /// The newest revision recorded.
    pub fn top(&self) -> u64 {
        self.changes.iter().map(|c| c.revision).max().unwrap_or(0)
    }
}

fn view_of(state: &BTreeMap<(Kind, &str), &Obj>) -> View {
    let mut view = View::default();
    for obj in state.values() {
        match obj {
            Obj::ReplicaSet(rs) => view.replica_sets.push(rs.clone()),
            Obj::Pod(p) => view.pods.push(p.clone()),
            Obj::Service(s) => view.services.push(s.clone()),
            Obj::Rollout(ro) => view.rollout = Some((**ro).clone()),
            Obj::VirtualService(vs) => view.virtual_service = Some(vs.clone()),
        }
    }
    view
}
