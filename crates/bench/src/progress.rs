//! Following a run from the watch stream: how many workloads are done, and how long each
//! waited for its new ReplicaSet. A watch costs the API server the same whichever controller
//! is measured, and unlike polling it does not grow with N per check.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// When each workload was last changed by the bench, by name (read by [`NewReplicaSets`]),
/// and how long after its change each was first seen settled (written by [`wait_all_done`]).
#[derive(Clone, Default)]
pub struct Changes(Arc<Mutex<Marks>>);

#[derive(Default)]
struct Marks {
    changed: HashMap<String, Instant>,
    settled: HashMap<String, Duration>,
    /// When the phase's one `kubectl apply` started and ended (`--kubectl-apply`).
    applied: Option<(Instant, Instant)>,
    /// When every object was first seen settled.
    all_settled: Option<Instant>,
}

impl Changes {
    /// Records that `name` is about to be created or changed (taken before the request, so
    /// that a ReplicaSet seen before the response still has its start).
    pub fn mark(&self, name: &str) {
        let mut marks = self.lock();
        marks.changed.insert(name.to_string(), Instant::now());
        marks.settled.remove(name);
    }

    pub(crate) fn since(&self, name: &str, at: Instant) -> Option<Duration> {
        self.lock()
            .changed
            .get(name)
            .map(|changed| at.saturating_duration_since(*changed))
    }

    /// Records that `name` was seen settled at `at`, if it was changed and not seen settled
    /// since: the user's wait, from the change to the first sight of the settled object.
    fn settled(&self, name: &str, at: Instant) {
        let mut marks = self.lock();
        let Some(changed) = marks.changed.get(name).copied() else {
            return;
        };
        marks
            .settled
            .entry(name.to_string())
            .or_insert_with(|| at.saturating_duration_since(changed));
    }

    /// Records that the phase's changes were made by one apply from `start` to `end`.
    pub fn applied(&self, start: Instant, end: Instant) {
        self.lock().applied = Some((start, end));
    }

    /// How long the phase's one apply took, and how long after its end every object had
    /// settled (none when the changes were not one apply or did not all settle).
    pub fn after_the_apply(&self) -> Option<(Duration, Duration)> {
        let marks = self.lock();
        let (start, end) = marks.applied?;
        let all = marks.all_settled?;
        Some((end - start, all.saturating_duration_since(end)))
    }

    /// How long each changed object took to settle, by name.
    pub fn settled_by_name(&self) -> HashMap<String, Duration> {
        self.lock().settled.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// When each workload's new ReplicaSet (one it owns that did not exist when the watch
/// started) was first seen, and first seen with all its pods available, after the workload's
/// change, by the workload's name. Between the second and the object settled is the
/// controller's finish (scaling the old version down, writing the status); before the first
/// its start; between the two, the pods (the ReplicaSet controller, the scheduler, the kubelet).
#[derive(Debug, Default, Clone)]
pub struct NewReplicaSetTimes {
    pub seen: HashMap<String, Duration>,
    pub available: HashMap<String, Duration>,
}

impl NewReplicaSetTimes {
    /// The `stage` of each workload that has both ends, sorted: `to - from` for each name.
    pub fn between(
        from: &HashMap<String, Duration>,
        to: &HashMap<String, Duration>,
    ) -> Vec<Duration> {
        let mut spans: Vec<Duration> = from
            .iter()
            .filter_map(|(name, start)| to.get(name).map(|end| end.saturating_sub(*start)))
            .collect();
        spans.sort();
        spans
    }

    /// The values of `times`, sorted.
    pub fn sorted(times: &HashMap<String, Duration>) -> Vec<Duration> {
        let mut all: Vec<Duration> = times.values().copied().collect();
        all.sort();
        all
    }
}

/// Whether a ReplicaSet has all the pods it asks for, available, as of its current spec.
fn all_available(rs: &ReplicaSet) -> bool {
    let wanted = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(status) = rs.status.as_ref() else {
        return false;
    };
    wanted > 0
        && status.available_replicas.unwrap_or(0) >= wanted
        && status.observed_generation >= rs.metadata.generation
}

/// Tells what a watch's first listing held (there before the run: not new) from what came
/// after it, for [`NewReplicaSets`] and [`crate::pods::NewPods`].
#[derive(Default)]
pub(crate) struct Newness {
    /// Every name seen since the first listing ended; none before it ended.
    known: Option<HashSet<String>>,
    listing: HashSet<String>,
}

/// An object seen by a watch after its first listing, and whether it is the first sight of
/// one that was not there before.
pub(crate) struct Sighting<K> {
    pub object: K,
    pub first_sight: bool,
}

impl<K> std::ops::Deref for Sighting<K> {
    type Target = K;
    fn deref(&self) -> &K {
        &self.object
    }
}

impl Newness {
    /// Takes one watch event: an object changed after the first listing comes back, with
    /// whether it is new; `listed` is told once the first listing is done. A later relist
    /// adds what it finds to what is known.
    pub(crate) fn sees<K: Resource>(
        &mut self,
        event: watcher::Event<K>,
        listed: &tokio::sync::watch::Sender<bool>,
    ) -> Option<Sighting<K>> {
        match event {
            watcher::Event::Init => self.listing.clear(),
            watcher::Event::InitApply(o) => {
                self.listing.insert(o.name_any());
            }
            watcher::Event::InitDone => {
                let known = self.known.get_or_insert_with(HashSet::new);
                known.extend(self.listing.drain());
                let _ = listed.send(true);
            }
            watcher::Event::Apply(object) => {
                let first_sight = self.known.as_mut()?.insert(object.name_any());
                return Some(Sighting {
                    object,
                    first_sight,
                });
            }
            watcher::Event::Delete(_) => {}
        }
        None
    }
}

/// A watch following a run in the background: what it has recorded so far, and whether its
/// first listing is done ([`NewReplicaSets`], [`crate::pods::NewPods`]).
pub struct Following<T> {
    times: Arc<Mutex<T>>,
    listed: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl<T: Clone + Default + Send + 'static> Following<T> {
    /// Watches `api` from now on, in the background, and hands `record` the record and every
    /// object changed after the first listing, with when it was seen. Backed off while the
    /// API server is down (the soak's faults), not a busy loop.
    pub(crate) fn new_objects<K>(
        api: Api<K>,
        mut record: impl FnMut(&mut T, Sighting<K>, Instant) + Send + 'static,
    ) -> Following<T>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    {
        let times = Arc::new(Mutex::new(T::default()));
        let (listed_tx, listed) = tokio::sync::watch::channel(false);
        let out = times.clone();
        let task = tokio::spawn(async move {
            let mut newness = Newness::default();
            let mut stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = stream.next().await {
                let Ok(event) = event else { continue };
                let seen = Instant::now();
                if let Some(sighting) = newness.sees(event, &listed_tx) {
                    record(
                        &mut out.lock().unwrap_or_else(|p| p.into_inner()),
                        sighting,
                        seen,
                    );
                }
            }
        });
        Following {
            times,
            listed,
            task,
        }
    }

    /// Waits until the watch has listed what exists, so that what comes later counts as new.
    pub async fn ready(&self) {
        let mut listed = self.listed.clone();
        let _ = listed.wait_for(|l| *l).await;
    }

    /// Stops watching and returns what it saw.
    pub fn finish(self) -> T {
        self.task.abort();
        self.times.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Follows the new ReplicaSets of a run (see [`NewReplicaSetTimes`]).
pub type NewReplicaSets = Following<NewReplicaSetTimes>;

impl NewReplicaSets {
    /// Watches the ReplicaSets of `api` from now on.
    pub fn watch(api: Api<ReplicaSet>, changes: Changes) -> NewReplicaSets {
        // The new ReplicaSets not yet seen with all their pods available, by name: their
        // owner's name.
        let mut waiting: HashMap<String, String> = HashMap::new();
        Following::new_objects(api, move |times: &mut NewReplicaSetTimes, rs, seen| {
            let name = rs.name_any();
            if rs.first_sight {
                let owner = rs
                    .owner_references()
                    .iter()
                    .find(|o| o.controller == Some(true))
                    .map(|o| o.name.clone());
                let Some(owner) = owner else { return };
                let Some(latency) = changes.since(&owner, seen) else {
                    return;
                };
                times.seen.entry(owner.clone()).or_insert(latency);
                waiting.insert(name.clone(), owner);
            }
            if all_available(&rs)
                && let Some(owner) = waiting.remove(&name)
                && let Some(latency) = changes.since(&owner, seen)
            {
                times.available.entry(owner).or_insert(latency);
            }
        })
    }
}

/// When a namespace last got an event (a Kubernetes Event object), from a watch: a phase's
/// objects settle before the controllers have posted all of its events (Sluice queues its
/// events behind the writes that move updates; client-go's recorders post theirs in the
/// background too), and what they cost belongs to the phase.
pub struct EventTrail {
    last: Arc<Mutex<Instant>>,
    task: tokio::task::JoinHandle<()>,
}

impl EventTrail {
    /// Watches the events of `api`'s namespace from now on.
    pub fn watch(api: Api<k8s_openapi::api::core::v1::Event>) -> EventTrail {
        let last = Arc::new(Mutex::new(Instant::now()));
        let seen = last.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut listed = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => listed = true,
                    Ok(watcher::Event::Apply(_)) if listed => {
                        *seen.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
                    }
                    _ => {}
                }
            }
        });
        EventTrail { last, task }
    }

    /// Waits until no event has come for `quiet`, or `limit` has passed; returns how long
    /// after the call the last event came (zero when none came).
    pub async fn drained(self, quiet: Duration, limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.elapsed() >= quiet || start.elapsed() >= limit {
                self.task.abort();
                return last.saturating_duration_since(start);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The `q` quantile (nearest rank) of sorted durations, in milliseconds.
pub fn percentile_ms(sorted: &[Duration], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1].as_secs_f64() * 1000.0)
}

/// Waits until `want` objects of `api` satisfy `done`, printing progress every few seconds;
/// fails after `timeout` naming some that are not done. Each object's first sight as done is
/// recorded in `changes` (see [`Changes::settled_by_name`]).
pub async fn wait_all_done<K>(
    api: Api<K>,
    want: usize,
    what: &str,
    timeout: Duration,
    changes: &Changes,
    done: impl Fn(&K) -> bool,
) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut state: HashMap<String, bool> = HashMap::new();
    let mut listing: HashMap<String, bool> = HashMap::new();
    // Backed off: while the API server is down (the soak's faults), not a busy loop.
    let mut stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut report = tokio::time::interval(Duration::from_secs(5));
    report.tick().await;
    loop {
        let finished = state.values().filter(|d| **d).count();
        if finished >= want {
            changes.lock().all_settled.get_or_insert_with(Instant::now);
            println!(
                "  {what}: {finished}/{want} done in {:.1}s",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        tokio::select! {
            event = stream.next() => {
                let Some(event) = event else { bail!("the watch of {what} ended") };
                let Ok(event) = event else { continue };
                let seen = Instant::now();
                let judge = |o: &K| {
                    let is_done = done(o);
                    if is_done {
                        changes.settled(&o.name_any(), seen);
                    }
                    is_done
                };
                match event {
                    watcher::Event::Init => listing.clear(),
                    watcher::Event::InitApply(o) => {
                        listing.insert(o.name_any(), judge(&o));
                    }
                    watcher::Event::InitDone => state = std::mem::take(&mut listing),
                    watcher::Event::Apply(o) => {
                        state.insert(o.name_any(), judge(&o));
                    }
                    watcher::Event::Delete(o) => {
                        state.remove(&o.name_any());
                    }
                }
            }
            _ = report.tick() => {
                println!(
                    "  {what}: {finished}/{want} done ({:.0}s)",
                    started.elapsed().as_secs_f64()
                );
            }
            _ = tokio::time::sleep_until(deadline) => {
                let mut pending: Vec<&String> =
                    state.iter().filter(|(_, d)| !**d).map(|(n, _)| n).collect();
                pending.sort();
                pending.truncate(5);
                bail!(
                    "{what}: only {finished} of {want} done after {}s (not done: {pending:?})",
                    timeout.as_secs()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&d, 0.5), Some(50.0));
        assert_eq!(percentile_ms(&d, 0.99), Some(99.0));
        assert_eq!(percentile_ms(&d[..1], 0.99), Some(1.0));
        assert_eq!(percentile_ms(&[], 0.5), None);
    }

    #[test]
    fn a_change_is_timed_from_its_mark() {
        let changes = Changes::default();
        changes.mark("a");
        let later = Instant::now() + Duration::from_millis(30);
        assert!(changes.since("a", later).unwrap() >= Duration::from_millis(30));
        assert_eq!(changes.since("b", later), None);
    }

    #[test]
    fn an_object_settles_once_per_change() {
        let changes = Changes::default();
        changes.settled("a", Instant::now());
        assert!(changes.settled_by_name().is_empty(), "never changed");
        changes.mark("a");
        let first = Instant::now() + Duration::from_millis(20);
        changes.settled("a", first);
        changes.settled("a", first + Duration::from_secs(5));
        assert_eq!(changes.settled_by_name().len(), 1);
        assert!(
            changes.settled_by_name()["a"] < Duration::from_secs(1),
            "first sight kept"
        );
        changes.mark("a");
        assert!(
            changes.settled_by_name().is_empty(),
            "a new change starts again"
        );
    }

    #[test]
    fn what_the_first_listing_held_is_not_new() {
        let rs = |name: &str| {
            serde_json::from_value::<ReplicaSet>(serde_json::json!({"metadata": {"name": name}}))
                .unwrap()
        };
        let (listed_tx, listed) = tokio::sync::watch::channel(false);
        let mut newness = Newness::default();
        // Before the first listing is done, nothing is told.
        assert!(
            newness
                .sees(watcher::Event::Apply(rs("early")), &listed_tx)
                .is_none()
        );
        assert!(
            newness
                .sees(watcher::Event::<ReplicaSet>::Init, &listed_tx)
                .is_none()
        );
        assert!(
            newness
                .sees(watcher::Event::InitApply(rs("old")), &listed_tx)
                .is_none()
        );
        assert!(!*listed.borrow());
        assert!(
            newness
                .sees(watcher::Event::<ReplicaSet>::InitDone, &listed_tx)
                .is_none()
        );
        assert!(*listed.borrow(), "told once listed");
        let first = |n: &mut Newness, name: &str| {
            n.sees(watcher::Event::Apply(rs(name)), &listed_tx)
                .map(|s| s.first_sight)
        };
        assert_eq!(first(&mut newness, "old"), Some(false), "there before");
        assert_eq!(first(&mut newness, "new"), Some(true));
        assert_eq!(first(&mut newness, "new"), Some(false), "seen already");
        // A relist adds what it finds: not new afterwards either.
        newness.sees(watcher::Event::<ReplicaSet>::Init, &listed_tx);
        newness.sees(watcher::Event::InitApply(rs("relisted")), &listed_tx);
        newness.sees(watcher::Event::<ReplicaSet>::InitDone, &listed_tx);
        assert_eq!(first(&mut newness, "relisted"), Some(false));
    }

    #[test]
    fn a_wait_is_told_apart_per_object() {
        let ms = Duration::from_millis;
        let seen = HashMap::from([("a".to_string(), ms(100)), ("b".to_string(), ms(300))]);
        // b's pods never came: it has no span; c was never seen new.
        let available = HashMap::from([("a".to_string(), ms(250)), ("c".to_string(), ms(50))]);
        assert_eq!(
            NewReplicaSetTimes::between(&seen, &available),
            vec![ms(150)]
        );
        assert_eq!(NewReplicaSetTimes::sorted(&seen), vec![ms(100), ms(300)]);
    }

    #[test]
    fn a_replica_set_is_available_when_all_it_asks_for_are() {
        let rs = |replicas: i32, available: i32, observed: i64| {
            serde_json::from_value::<ReplicaSet>(serde_json::json!({
                "metadata": {"name": "r", "generation": 2},
                "spec": {"replicas": replicas, "selector": {}},
                "status": {"replicas": available, "availableReplicas": available,
                           "observedGeneration": observed},
            }))
            .unwrap()
        };
        assert!(all_available(&rs(2, 2, 2)));
        assert!(!all_available(&rs(2, 1, 2)), "one pod short");
        assert!(!all_available(&rs(2, 2, 1)), "an older spec's count");
        assert!(
            !all_available(&rs(0, 0, 2)),
            "scaled to nothing is not a new version up"
        );
    }

    #[test]
    fn the_wait_after_an_apply_counts_from_its_end() {
        let changes = Changes::default();
        let start = Instant::now();
        let end = start + Duration::from_secs(60);
        changes.applied(start, end);
        assert_eq!(changes.after_the_apply(), None, "not all settled yet");
        changes.lock().all_settled = Some(end + Duration::from_secs(2));
        assert_eq!(
            changes.after_the_apply(),
            Some((Duration::from_secs(60), Duration::from_secs(2)))
        );
        // Everything settled before kubectl returned: no wait after it.
        changes.lock().all_settled = Some(end - Duration::from_secs(5));
        assert_eq!(
            changes.after_the_apply().map(|(_, after)| after),
            Some(Duration::ZERO)
        );
    }
}
