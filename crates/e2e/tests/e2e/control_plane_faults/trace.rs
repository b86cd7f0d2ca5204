//! What the ReplicaSets, Services and Ingresses of a namespace went through during a run, and
//! the checks over it.
//!
//! The [`Recorder`] watches the three kinds and keeps every state each object was seen in, with
//! the revision it was written at. The control plane has one etcd, whose revision every write
//! takes in turn: ordered by it (the `resourceVersion`, which the API calls opaque but which is
//! that number here), the states of all objects replay the namespace write by write, and the
//! checks ([`check`]) look at each of those moments:
//!
//! - no two ReplicaSets of one owner ever had the same pod-template hash;
//! - no ReplicaSet lost an annotation it had (the scale-down deadline aside, which is removed by
//!   design): what an update written from a stale copy would do;
//! - no ReplicaSet was scaled below the traffic its Service gets: a canary's stable ReplicaSet
//!   below `ceil(replicas × (100 − weight) / 100)` for the canary Ingress's weight, its canary
//!   ReplicaSet below `ceil(replicas × weight / 100)`, a blue-green's active one below its
//!   replicas.
//!
//! A watch that has to list again (its revision was compacted away while the API server was
//! down) misses the states in between: the revisions from the last one it delivered to one read
//! after the list are blind, and the traffic check skips them rather than replay a stale state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::api::ListParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource, ResourceExt};
use sluice_engine::labels::{POD_TEMPLATE_HASH, SCALE_DOWN_DEADLINE};
use tokio::task::JoinHandle;

/// The annotation of NGINX's canary Ingress that carries the canary's share of the traffic.
pub const CANARY_WEIGHT: &str = "nginx.ingress.kubernetes.io/canary-weight";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    ReplicaSet,
    Service,
    Ingress,
}

/// What matters of one state of an object.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    ReplicaSet(RsState),
    /// The pod-template hash the Service selects.
    Service(Option<String>),
    /// The canary weight an Ingress carries.
    Ingress(Option<i64>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct RsState {
    pub uid: String,
    /// `Kind/name` of the controller owner.
    pub owner: String,
    pub hash: String,
    pub replicas: i32,
    pub annotations: BTreeSet<String>,
}

/// One object at one revision; `seen` is `None` once it is deleted.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub revision: u64,
    pub kind: Kind,
    pub name: String,
    pub seen: Option<Seen>,
}

/// Everything recorded, and the revision windows `(after, up to]` a watch may have missed
/// states in.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub observations: Vec<Observation>,
    pub blind: Vec<(u64, u64)>,
}

/// Who gets which traffic, for the traffic check.
#[derive(Clone, Debug)]
pub enum Traffic {
    Canary {
        rollout: String,
        replicas: i32,
        stable_service: String,
        canary_service: String,
        canary_ingress: String,
    },
    BlueGreen {
        rollout: String,
        replicas: i32,
        active_service: String,
    },
}

/// What the checks found, and how much they looked at.
#[derive(Debug, Default)]
pub struct Findings {
    pub violations: Vec<String>,
    /// Revisions the traffic check looked at, and skipped as blind.
    pub checked: usize,
    pub blind: usize,
    /// Checked revisions at which some canary weight was above zero.
    pub routed: usize,
}

pub fn check(trace: &Trace, traffic: &[Traffic]) -> Findings {
    let mut findings = below_traffic(trace, traffic);
    let mut violations = duplicate_hashes(&trace.observations);
    violations.extend(lost_annotations(&trace.observations));
    violations.append(&mut findings.violations);
    findings.violations = violations;
    findings
}

fn ordered(observations: &[Observation]) -> Vec<&Observation> {
    let mut ordered: Vec<&Observation> = observations.iter().collect();
    // Stable: two records of one revision (a state seen live, then again in a list) keep
    // their order.
    ordered.sort_by_key(|o| o.revision);
    ordered
}

fn replica_sets(observations: &[Observation]) -> impl Iterator<Item = (&Observation, &RsState)> {
    ordered(observations)
        .into_iter()
        .filter_map(|o| match &o.seen {
            Some(Seen::ReplicaSet(rs)) => Some((o, rs)),
            _ => None,
        })
}

/// Two ReplicaSets (two uids) with one owner and one pod-template hash.
pub fn duplicate_hashes(observations: &[Observation]) -> Vec<String> {
    let mut by_hash: BTreeMap<(&str, &str), BTreeSet<(&str, &str)>> = BTreeMap::new();
    for (o, rs) in replica_sets(observations) {
        by_hash
            .entry((&rs.owner, &rs.hash))
            .or_default()
            .insert((&o.name, &rs.uid));
    }
    by_hash
        .into_iter()
        .filter(|(_, sets)| sets.len() > 1)
        .map(|((owner, hash), sets)| {
            format!(
                "{owner} had {} ReplicaSets for hash {hash}: {sets:?}",
                sets.len()
            )
        })
        .collect()
}

/// A ReplicaSet whose later state lacks an annotation an earlier one had.
pub fn lost_annotations(observations: &[Observation]) -> Vec<String> {
    let mut had: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut out = Vec::new();
    for (o, rs) in replica_sets(observations) {
        let keys = had.entry(&rs.uid).or_default();
        let lost: Vec<&&str> = keys
            .iter()
            .filter(|k| **k != SCALE_DOWN_DEADLINE && !rs.annotations.contains(**k))
            .collect();
        if !lost.is_empty() {
            out.push(format!(
                "revision {}: ReplicaSet {} lost its annotations {lost:?}",
                o.revision, o.name
            ));
        }
        keys.extend(rs.annotations.iter().map(String::as_str));
    }
    out
}

/// `ceil(replicas × percent / 100)`: the pods a share of the traffic needs.
fn needed(replicas: i32, percent: i64) -> i32 {
    let percent = percent.clamp(0, 100) as i32;
    (replicas * percent + 99) / 100
}

/// The namespace replayed revision by revision, each one outside the blind windows checked for
/// a ReplicaSet below the traffic it gets.
pub fn below_traffic(trace: &Trace, traffic: &[Traffic]) -> Findings {
    let mut findings = Findings::default();
    let mut replica_sets: BTreeMap<&str, &RsState> = BTreeMap::new();
    let mut selects: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let mut weights: BTreeMap<&str, Option<i64>> = BTreeMap::new();
    let ordered = ordered(&trace.observations);
    let mut i = 0;
    while i < ordered.len() {
        let revision = ordered[i].revision;
        while i < ordered.len() && ordered[i].revision == revision {
            let o = ordered[i];
            match (&o.kind, &o.seen) {
                (_, Some(Seen::ReplicaSet(rs))) => {
                    replica_sets.insert(&o.name, rs);
                }
                (_, Some(Seen::Service(hash))) => {
                    selects.insert(&o.name, hash.as_deref());
                }
                (_, Some(Seen::Ingress(weight))) => {
                    weights.insert(&o.name, *weight);
                }
                (Kind::ReplicaSet, None) => {
                    replica_sets.remove(o.name.as_str());
                }
                (Kind::Service, None) => {
                    selects.remove(o.name.as_str());
                }
                (Kind::Ingress, None) => {
                    weights.remove(o.name.as_str());
                }
            }
            i += 1;
        }
        if trace
            .blind
            .iter()
            .any(|(after, upto)| *after < revision && revision <= *upto)
        {
            findings.blind += 1;
            continue;
        }
        findings.checked += 1;
        let size = |rollout: &str, hash: &str| {
            let owner = format!("Rollout/{rollout}");
            replica_sets
                .values()
                .find(|rs| rs.owner == owner && rs.hash == hash)
                .map_or(0, |rs| rs.replicas)
        };
        let mut violation = |what: String| {
            findings
                .violations
                .push(format!("revision {revision}: {what}"))
        };
        let mut routed = false;
        for t in traffic {
            match t {
                Traffic::Canary {
                    rollout,
                    replicas,
                    stable_service,
                    canary_service,
                    canary_ingress,
                } => {
                    let Some(Some(stable)) = selects.get(stable_service.as_str()) else {
                        continue;
                    };
                    let weight = weights
                        .get(canary_ingress.as_str())
                        .copied()
                        .flatten()
                        .unwrap_or(0);
                    let (need, have) = (needed(*replicas, 100 - weight), size(rollout, stable));
                    if have < need {
                        violation(format!(
                            "{rollout}'s stable ReplicaSet ({stable}) has {have} replicas while \
                             {}% of the traffic goes to it, which needs {need}",
                            100 - weight
                        ));
                    }
                    let canary = selects.get(canary_service.as_str()).copied().flatten();
                    if weight > 0
                        && let Some(canary) = canary.filter(|c| c != stable)
                    {
                        routed = true;
                        let (need, have) = (needed(*replicas, weight), size(rollout, canary));
                        if have < need {
                            violation(format!(
                                "{rollout}'s canary ReplicaSet ({canary}) has {have} replicas \
                                 while {weight}% of the traffic goes to it, which needs {need}"
                            ));
                        }
                    }
                }
                Traffic::BlueGreen {
                    rollout,
                    replicas,
                    active_service,
                } => {
                    let Some(Some(active)) = selects.get(active_service.as_str()) else {
                        continue;
                    };
                    let have = size(rollout, active);
                    if have < *replicas {
                        violation(format!(
                            "{rollout}'s active ReplicaSet ({active}) has {have} replicas while \
                             all the traffic goes to it, which needs {replicas}"
                        ));
                    }
                }
            }
        }
        findings.routed += usize::from(routed);
    }
    findings
}

fn revision_of<K: Resource>(object: &K) -> u64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

fn seen_replica_set(rs: &ReplicaSet) -> Seen {
    let owner = rs
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| format!("{}/{}", o.kind, o.name))
        .unwrap_or_default();
    Seen::ReplicaSet(RsState {
        uid: rs.uid().unwrap_or_default(),
        owner,
        hash: rs
            .labels()
            .get(POD_TEMPLATE_HASH)
            .cloned()
            .unwrap_or_default(),
        replicas: rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
        annotations: rs.annotations().keys().cloned().collect(),
    })
}

fn seen_service(svc: &Service) -> Seen {
    Seen::Service(
        svc.spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.get(POD_TEMPLATE_HASH))
            .cloned(),
    )
}

fn seen_ingress(ingress: &Ingress) -> Seen {
    Seen::Ingress(
        ingress
            .annotations()
            .get(CANARY_WEIGHT)
            .and_then(|w| w.parse().ok()),
    )
}

/// Watches a namespace's ReplicaSets, Services and Ingresses into a [`Trace`].
pub struct Recorder {
    trace: Arc<Mutex<Trace>>,
    /// Kinds whose first list is recorded.
    listed: Arc<Mutex<BTreeSet<Kind>>>,
    tasks: Vec<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Recorder {
    pub fn start(client: kube::Client, namespace: &str) -> Recorder {
        let trace = Arc::new(Mutex::new(Trace::default()));
        let listed = Arc::new(Mutex::new(BTreeSet::new()));
        let shared = (trace.clone(), listed.clone());
        let tasks = vec![
            tokio::spawn(follow(
                Api::<ReplicaSet>::namespaced(client.clone(), namespace),
                Kind::ReplicaSet,
                seen_replica_set,
                shared.clone(),
            )),
            tokio::spawn(follow(
                Api::<Service>::namespaced(client.clone(), namespace),
                Kind::Service,
                seen_service,
                shared.clone(),
            )),
            tokio::spawn(follow(
                Api::<Ingress>::namespaced(client, namespace),
                Kind::Ingress,
                seen_ingress,
                shared,
            )),
        ];
        Recorder {
            trace,
            listed,
            tasks,
        }
    }

    /// Waits until each kind's first list is recorded.
    pub async fn listed(&self) {
        while lock(&self.listed).len() < 3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn trace(&self) -> Trace {
        lock(&self.trace).clone()
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

impl Iterator for Quick {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(250))
    }
}

impl Backoff for Quick {
    fn reset(&mut self) {}
}

/// A revision read after a list: every state the list showed was written at or before it.
async fn current_revision<K>(api: &Api<K>) -> u64
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    loop {
        if let Ok(list) = api.list_metadata(&ListParams::default().limit(1)).await
            && let Some(rv) = list.metadata.resource_version.and_then(|v| v.parse().ok())
        {
            return rv;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn follow<K>(
    api: Api<K>,
    kind: Kind,
    seen: fn(&K) -> Seen,
    (trace, listed): (Arc<Mutex<Trace>>, Arc<Mutex<BTreeSet<Kind>>>),
) where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let mut events = watcher::watcher(api.clone(), watcher::Config::default())
        .backoff(Quick)
        .boxed();
    // The revision of each object as last recorded, and the last revision delivered.
    let mut known: BTreeMap<String, u64> = BTreeMap::new();
    let mut last = 0;
    let mut listing: Option<(u64, Vec<K>)> = None;
    while let Some(event) = events.next().await {
        let record = |revision: u64, name: String, state: Option<Seen>| {
            lock(&trace).observations.push(Observation {
                revision,
                kind,
                name,
                seen: state,
            });
        };
        match event {
            // The watcher tries again (resuming, or listing anew when it must).
            Err(_) => {}
            Ok(Event::Init) => listing = Some((last, Vec::new())),
            Ok(Event::InitApply(object)) => {
                if let Some((_, objects)) = &mut listing {
                    objects.push(object);
                }
            }
            Ok(Event::InitDone) => {
                let Some((after, objects)) = listing.take() else {
                    continue;
                };
                let upto = current_revision(&api).await;
                let names: BTreeSet<String> = objects.iter().map(|o| o.name_any()).collect();
                for object in &objects {
                    let revision = revision_of(object);
                    if known.insert(object.name_any(), revision) != Some(revision) {
                        record(revision, object.name_any(), Some(seen(object)));
                    }
                }
                // Gone while the watch was away: deleted at some revision up to `upto`.
                let gone: Vec<String> = known
                    .keys()
                    .filter(|n| !names.contains(*n))
                    .cloned()
                    .collect();
                for name in gone {
                    known.remove(&name);
                    record(upto, name, None);
                }
                lock(&trace).blind.push((after, upto));
                last = last.max(upto);
                lock(&listed).insert(kind);
            }
            Ok(Event::Apply(object)) => {
                let revision = revision_of(&object);
                known.insert(object.name_any(), revision);
                last = last.max(revision);
                record(revision, object.name_any(), Some(seen(&object)));
            }
            Ok(Event::Delete(object)) => {
                // A deleted object comes with the revision of its deletion.
                let revision = revision_of(&object);
                known.remove(&object.name_any());
                last = last.max(revision);
                record(revision, object.name_any(), None);
            }
        }
    }
}

#[cfg(test)]
mod tests;
