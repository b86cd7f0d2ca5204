//! Watch caches with secondary indexes: a kube reflector [`Store`] plus an [`Index`] from keys
//! (an owner's uid, a name an object refers to) to the objects that carry them, so that a
//! reconcile finds its own objects without scanning every object of the kind.
//!
//! The index is fed from the same watch events as the store, one step before it: the store
//! only reports ready after the index has taken in the initial list, and a key found in the
//! index whose object the store does not hold yet is skipped, as if the event had not arrived.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, RwLock};

use futures::{Stream, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::experiment::Experiment;
use sluice_engine::labels::{LAST_APPLIED, MANAGED_BY};

/// `impl Resource` for a cached form (a struct with a `metadata` field) of namespaced kind
/// `$kind`: the kind, group, version and plural of `$kind`, so that a watch of the cached form
/// asks the API server for `$kind`.
macro_rules! resource_as {
    ($cached:ty, $kind:ty) => {
        impl kube::Resource for $cached {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::kind(dt)
            }

            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::group(dt)
            }

            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::version(dt)
            }

            fn api_version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::api_version(dt)
            }

            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::plural(dt)
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

mod lean_meta;
mod relisting;
mod replica_set;
mod rollout;

pub use relisting::{note_api_server, watch, watch_relisting_every};
pub use sluice_watch::{TouchedWhenCached, planted, touched};

pub use replica_set::CachedReplicaSet;
pub use rollout::CachedRollout;

/// The keys an object is found under.
pub type KeysOf<K> = fn(&K) -> Vec<String>;

/// Objects of one kind by key, kept up to date from watch events.
pub struct Index<K>
where
    K: Resource,
    K::DynamicType: Eq + Hash + Clone,
{
    keys_of: KeysOf<K>,
    live: RwLock<Entries<K>>,
    /// The entries of a (re-)list in progress: they replace the live ones when it is complete,
    /// exactly when the store swaps in its own list.
    listing: Mutex<Option<Entries<K>>>,
}

struct Entries<K>
where
    K: Resource,
    K::DynamicType: Eq + Hash + Clone,
{
    by_key: HashMap<String, HashSet<ObjectRef<K>>>,
    /// What each object was filed under, to unfile it when it changes or goes.
    filed: HashMap<ObjectRef<K>, Vec<String>>,
}

impl<K> Default for Entries<K>
where
    K: Resource,
    K::DynamicType: Eq + Hash + Clone,
{
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
            filed: HashMap::new(),
        }
    }
}

impl<K> Entries<K>
where
    K: Resource,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn insert(&mut self, object: ObjectRef<K>, keys: Vec<String>) {
        self.remove(&object);
        if keys.is_empty() {
            return;
        }
        for key in &keys {
            self.by_key
                .entry(key.clone())
                .or_default()
                .insert(object.clone());
        }
        self.filed.insert(object, keys);
    }

    fn remove(&mut self, object: &ObjectRef<K>) {
        let Some(keys) = self.filed.remove(object) else {
            return;
        };
        for key in keys {
            if let Some(objects) = self.by_key.get_mut(&key) {
                objects.remove(object);
                if objects.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
    }
}

/// The store key of an object, without the resourceVersion and uid that `ObjectRef::from_obj`
/// would carry along (lookups ignore them; the index need not hold them).
fn object_ref<K>(object: &K) -> Option<ObjectRef<K>>
where
    K: Resource,
    K::DynamicType: Default,
{
    let meta = object.meta();
    let name = meta.name.as_deref()?;
    let r = ObjectRef::new(name);
    Some(match meta.namespace.as_deref() {
        Some(ns) => r.within(ns),
        None => r,
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<K> Index<K>
where
    K: Resource,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    pub fn new(keys_of: KeysOf<K>) -> Self {
        Self {
            keys_of,
            live: RwLock::new(Entries::default()),
            listing: Mutex::new(None),
        }
    }

    /// Takes in one watch event, as the reflector's store does.
    pub fn apply(&self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => {
                if let Some(r) = object_ref(object) {
                    let keys = (self.keys_of)(object);
                    self.write().insert(r, keys);
                }
            }
            watcher::Event::Delete(object) => {
                if let Some(r) = object_ref(object) {
                    self.write().remove(&r);
                }
            }
            watcher::Event::Init => *lock(&self.listing) = Some(Entries::default()),
            watcher::Event::InitApply(object) => {
                if let Some(r) = object_ref(object) {
                    let keys = (self.keys_of)(object);
                    lock(&self.listing)
                        .get_or_insert_with(Entries::default)
                        .insert(r, keys);
                }
            }
            watcher::Event::InitDone => {
                let listed = lock(&self.listing).take().unwrap_or_default();
                *self.write() = listed;
            }
        }
    }

    /// The objects filed under `key`.
    pub fn get(&self, key: &str) -> Vec<ObjectRef<K>> {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        live.by_key
            .get(key)
            .map(|objects| objects.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries<K>> {
        self.live.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// A reflector store with an [`Index`].
pub struct IndexedStore<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    index: Arc<Index<K>>,
}

impl<K> Clone for IndexedStore<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            index: self.index.clone(),
        }
    }
}

impl<K> IndexedStore<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    /// The cached objects filed under `key`, in name order (the order the API server lists in).
    pub fn find(&self, key: &str) -> Vec<Arc<K>> {
        let mut found: Vec<Arc<K>> = self
            .index
            .get(key)
            .iter()
            .filter_map(|r| self.store.get(r))
            .collect();
        found.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
        found
    }

    /// Which cached objects are filed under `key`, without the objects themselves.
    pub fn refs(&self, key: &str) -> Vec<ObjectRef<K>> {
        self.index.get(key)
    }

    /// The plain store, for lookups by name and readiness.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }
}

/// The writing side of an [`IndexedStore`]: attach it to a watch stream with [`reflect`].
pub struct IndexedWriter<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    writer: reflector::store::Writer<K>,
    index: Arc<Index<K>>,
}

/// An empty indexed store filing objects under `keys_of`, and its writer.
pub fn indexed<K>(keys_of: KeysOf<K>) -> (IndexedStore<K>, IndexedWriter<K>)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let (store, writer) = reflector::store();
    let index = Arc::new(Index::new(keys_of));
    (
        IndexedStore {
            store,
            index: index.clone(),
        },
        IndexedWriter { writer, index },
    )
}

/// Feeds a watch stream into an indexed store (the index first, then the store) and passes
/// the events on.
pub fn reflect<K, S>(
    stream: S,
    writer: IndexedWriter<K>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let index = writer.index;
    stream
        .inspect_ok(move |event| index.apply(event))
        .reflect(writer.writer)
}

/// Waits until a watch cache has listed everything once; `false` if it never will.
///
/// `Store::wait_until_ready` wakes only the most recent of several concurrent waiters (its
/// readiness is a one-shot channel with a single waker slot), so waiting callers re-poll it.
pub async fn store_ready<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(
            std::time::Duration::from_millis(200),
            store.wait_until_ready(),
        )
        .await
        {
            Ok(result) => return result.is_ok(),
            Err(_) => continue,
        }
    }
}

/// The watch caches the cluster access (`KubeCluster`) answers the Rollout loop's reads from,
/// instead of listing or getting from the API server on every reconcile. Their objects are
/// cached without what the controller never reads ([`drop_managed_fields`] for all,
/// [`drop_unread_metadata`] for Services and templates), so they are no source for a copy.
#[derive(Clone)]
pub struct Caches {
    /// Services, by the Rollout their managed-by annotation names ([`managed_by_key`]).
    pub services: IndexedStore<Service>,
    /// AnalysisRuns made by Rollouts (they carry the rollout-type label), by controller uid.
    pub analysis_runs: IndexedStore<AnalysisRun>,
    pub analysis_templates: Store<AnalysisTemplate>,
    /// `None` in namespaced mode, where ClusterAnalysisTemplates are not watched (a namespaced
    /// install may not list them); they are then read from the API server.
    pub cluster_analysis_templates: Option<Store<ClusterAnalysisTemplate>>,
    /// Experiments, by controller uid.
    pub experiments: IndexedStore<Experiment>,
}

impl Caches {
    /// Waits until every cache has listed once; `false` if one never will. Until then a
    /// missing object may only be one not listed yet, so nothing is decided.
    pub async fn ready(&self) -> bool {
        store_ready(self.services.store()).await
            && store_ready(self.analysis_runs.store()).await
            && store_ready(&self.analysis_templates).await
            && match &self.cluster_analysis_templates {
                Some(store) => store_ready(store).await,
                None => true,
            }
            && store_ready(self.experiments.store()).await
    }
}

/// The key a Service carrying the managed-by annotation of Rollout `rollout` in `namespace` is
/// filed under.
pub fn managed_by_key(namespace: &str, rollout: &str) -> String {
    format!("{namespace}/{rollout}")
}

/// The keys of a Service in [`Caches::services`]: the Rollout its managed-by annotation names.
pub fn managed_by_keys(svc: &Service) -> Vec<String> {
    let managed_by = svc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MANAGED_BY));
    match (svc.metadata.namespace.as_deref(), managed_by) {
        (Some(ns), Some(rollout)) => vec![managed_by_key(ns, rollout)],
        _ => Vec::new(),
    }
}

/// Drops `metadata.managedFields` from an object about to be cached. No part of the controller
/// reads it (writes are merge patches that name only the fields they change, never a copy of
/// a cached object), and it is often as large as the rest of the object.
pub fn drop_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// [`drop_managed_fields`], and kubectl's `last-applied-configuration` annotation (a copy of
/// the whole object as last applied), for the kinds whose annotations the controller only
/// reads key by key (ReplicaSets, Services, analysis templates) and never copies into a write.
/// Not for Rollouts: an analysis argument may take the Rollout's whole annotation map
/// (`fieldRef: metadata.annotations`), that annotation included.
pub fn drop_unread_metadata<K: Resource>(object: &mut K) {
    drop_unread_meta(object.meta_mut());
}

/// [`drop_unread_metadata`], on the metadata alone.
pub(crate) fn drop_unread_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// The uids of an object's controller owners (there is at most one): the key under which a
/// Rollout finds the ReplicaSets, AnalysisRuns and Experiments it controls.
pub fn controller_uids<K: Resource>(object: &K) -> Vec<String> {
    controller_uids_of(object.meta())
}

fn controller_uids_of(meta: &ObjectMeta) -> Vec<String> {
    meta.owner_references
        .iter()
        .flatten()
        .filter(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
        .collect()
}

/// An indexed store holding `objects`, as after a watch's initial list.
#[cfg(test)]
pub(crate) fn listed<K>(keys_of: KeysOf<K>, objects: Vec<K>) -> IndexedStore<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let (store, mut writer) = indexed(keys_of);
    let events = std::iter::once(watcher::Event::Init)
        .chain(objects.into_iter().map(watcher::Event::InitApply))
        .chain(std::iter::once(watcher::Event::InitDone));
    for event in events {
        writer.index.apply(&event);
        writer.writer.apply_watcher_event(&event);
    }
    store
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::json;

    fn rs(name: &str, owner: Option<&str>) -> ReplicaSet {
        let owners = owner.map(|uid| {
            json!([{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "r",
                    "uid": uid, "controller": true}])
        });
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}
        }))
        .unwrap()
    }

    fn names(found: &[Arc<ReplicaSet>]) -> Vec<&str> {
        found
            .iter()
            .map(|r| r.metadata.name.as_deref().unwrap())
            .collect()
    }

    fn feed(writer: &mut IndexedWriter<ReplicaSet>, event: watcher::Event<ReplicaSet>) {
        writer.index.apply(&event);
        writer.writer.apply_watcher_event(&event);
    }

    #[test]
    fn objects_are_found_under_their_owner_as_they_come_change_and_go() {
        let (store, mut writer) = indexed::<ReplicaSet>(controller_uids);
        feed(&mut writer, watcher::Event::Init);
        feed(&mut writer, watcher::Event::InitApply(rs("b", Some("u1"))));
        feed(&mut writer, watcher::Event::InitApply(rs("a", Some("u1"))));
        feed(&mut writer, watcher::Event::InitApply(rs("c", Some("u2"))));
        feed(&mut writer, watcher::Event::InitApply(rs("orphan", None)));
        assert!(
            store.find("u1").is_empty(),
            "nothing before the list is complete"
        );
        feed(&mut writer, watcher::Event::InitDone);
        assert_eq!(names(&store.find("u1")), ["a", "b"]);
        assert_eq!(names(&store.find("u2")), ["c"]);

        // Adopted by another owner: filed under the new one only.
        feed(&mut writer, watcher::Event::Apply(rs("c", Some("u1"))));
        assert_eq!(names(&store.find("u1")), ["a", "b", "c"]);
        assert!(store.find("u2").is_empty());
        // Orphaned, then deleted.
        feed(&mut writer, watcher::Event::Apply(rs("b", None)));
        assert_eq!(names(&store.find("u1")), ["a", "c"]);
        feed(&mut writer, watcher::Event::Delete(rs("a", Some("u1"))));
        assert_eq!(names(&store.find("u1")), ["c"]);
        assert!(store.index.live.read().unwrap().filed.len() == 1);
    }

    #[test]
    fn only_what_is_never_read_is_dropped() {
        let object = || -> ReplicaSet {
            serde_json::from_value(json!({"metadata": {
                "name": "r", "namespace": "ns", "resourceVersion": "7",
                "labels": {"rollouts-pod-template-hash": "abc"},
                "annotations": {LAST_APPLIED: "{...}", "rollout.argoproj.io/revision": "3"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]
            }}))
            .unwrap()
        };
        let mut lean = object();
        drop_managed_fields(&mut lean);
        let mut expected = object();
        expected.metadata.managed_fields = None;
        assert_eq!(lean, expected);

        let mut lean = object();
        drop_unread_metadata(&mut lean);
        expected
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(LAST_APPLIED);
        assert_eq!(lean, expected);
        assert_eq!(
            lean.metadata.annotations.unwrap()["rollout.argoproj.io/revision"],
            "3"
        );
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_completes() {
        let (store, mut writer) = indexed::<ReplicaSet>(controller_uids);
        feed(&mut writer, watcher::Event::Init);
        feed(&mut writer, watcher::Event::InitApply(rs("a", Some("u1"))));
        feed(
            &mut writer,
            watcher::Event::InitApply(rs("gone", Some("u1"))),
        );
        feed(&mut writer, watcher::Event::InitDone);
        // The watch broke; meanwhile "gone" was deleted and "new" created.
        feed(&mut writer, watcher::Event::Init);
        feed(&mut writer, watcher::Event::InitApply(rs("a", Some("u1"))));
        feed(
            &mut writer,
            watcher::Event::InitApply(rs("new", Some("u1"))),
        );
        assert_eq!(
            names(&store.find("u1")),
            ["a", "gone"],
            "the previous list holds until the new one is complete"
        );
        feed(&mut writer, watcher::Event::InitDone);
        assert_eq!(names(&store.find("u1")), ["a", "new"]);
    }

    #[test]
    fn an_indexed_object_the_store_does_not_hold_yet_is_skipped() {
        let (store, writer) = indexed::<ReplicaSet>(controller_uids);
        writer.index.apply(&watcher::Event::Init);
        writer.index.apply(&watcher::Event::InitDone);
        writer
            .index
            .apply(&watcher::Event::Apply(rs("a", Some("u1"))));
        assert!(store.find("u1").is_empty());
    }

    #[tokio::test]
    async fn reflect_feeds_index_and_store_and_passes_events_on() {
        use futures::StreamExt;
        let (store, writer) = indexed::<ReplicaSet>(controller_uids);
        let events = futures::stream::iter([
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(rs("a", Some("u1")))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(rs("b", Some("u1")))),
        ]);
        let passed: Vec<_> = reflect(events, writer).collect().await;
        assert_eq!(passed.len(), 4);
        assert!(store.store().wait_until_ready().await.is_ok());
        assert_eq!(names(&store.find("u1")), ["a", "b"]);
    }
}
