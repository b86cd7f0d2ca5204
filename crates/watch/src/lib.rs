//! The objects a cached watch changed, passed on once its cache holds them.
//!
//! kube-runtime's `Controller` reads the object it reconciles from the cache when the reconcile
//! starts, not from the event that triggered it. Its cache (the reflector's store) takes a
//! list whole: the objects of a list are kept aside while it arrives and swapped in at its end
//! (`InitDone`), so that the cache never shows half a list. But `touched_objects()` and
//! `applied_objects()` pass each listed object on as it arrives (`InitApply`), and the
//! reconcile it triggers may start before the list ends, read the version the cache held
//! before, and decide on that. When that older version was a change the previous watch never
//! delivered (a kube-apiserver killed in the moment after the change), the reconcile finds
//! nothing to do, and the list that was made to find the change triggers nothing more: the
//! soak under control-plane faults saw four Rollouts of 1,000 keep `observedGeneration` 1 under
//! generation 2 until the next list, five minutes later. The fake kubelet, which relists its
//! pods every minute, met the same: a pod created during a relist was reconciled before the
//! cache held it, skipped, and bound only by a sweep 15 s later, so a thousand updates at once
//! had a few pods (of Deployments and Rollouts alike) ready half a minute late. Here the
//! objects of a list are held back until its end, and passed on after the cache has taken
//! them; the controller's caches and the fake kubelet's pod watch both use it.

use std::hash::Hash;

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

/// The objects each event of `events` (a watch already reflected into `store`) touched, as
/// `touched_objects()` does, but those of a list only once the whole list is in the cache;
/// deleted ones too when `with_deleted`, as `applied_objects()` does not. Errors pass at once.
/// Of a list only the references are kept while it arrives (a list of 10,000 Rollouts is tens
/// of MB): its objects are then read from the cache one at a time, as they are passed on.
pub fn touched<K, S>(
    events: S,
    store: Store<K>,
    with_deleted: bool,
) -> impl Stream<Item = watcher::Result<K>>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    events
        .scan(Vec::new(), move |listed, event| {
            let out: Box<dyn Iterator<Item = watcher::Result<K>> + Send> = match event {
                Ok(watcher::Event::Apply(obj)) => Box::new(std::iter::once(Ok(obj))),
                Ok(watcher::Event::Delete(obj)) if with_deleted => {
                    Box::new(std::iter::once(Ok(obj)))
                }
                Ok(watcher::Event::Delete(_)) => Box::new(std::iter::empty()),
                Ok(watcher::Event::Init) => {
                    // A list that ended early (an error mid-list) is not passed on: the next
                    // one replaces it.
                    listed.clear();
                    Box::new(std::iter::empty())
                }
                Ok(watcher::Event::InitApply(obj)) if planted::early_list_objects() => {
                    Box::new(std::iter::once(Ok(obj)))
                }
                Ok(watcher::Event::InitApply(obj)) => {
                    listed.push(ObjectRef::from_obj(&obj));
                    Box::new(std::iter::empty())
                }
                Ok(watcher::Event::InitDone) => {
                    // The cache has taken the list (the reflector applies an event before it
                    // passes it on); an object deleted since is gone from it and left out.
                    let store = store.clone();
                    Box::new(
                        std::mem::take(listed)
                            .into_iter()
                            .filter_map(move |r| store.get(&r).map(|o| Ok(K::clone(&o)))),
                    )
                }
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            std::future::ready(Some(futures::stream::iter(out)))
        })
        .flatten()
}

/// A bug planted on purpose, for the test that shows its check can fail
/// (`crates/e2e/tests/e2e/changes_a_watch_missed_are_seen_by_its_list.rs`): with
/// `SLUICE_TEST_PLANT=early-list-objects` in the environment, a list's objects are passed on
/// as they arrive, as kube-runtime's adapters do. Never set outside that test; the controller
/// warns at start when it is.
pub mod planted {
    use std::sync::LazyLock;

    /// The environment variable that plants the bug.
    pub const VARIABLE: &str = "SLUICE_TEST_PLANT";

    static EARLY_LIST_OBJECTS: LazyLock<bool> =
        LazyLock::new(|| std::env::var(VARIABLE).is_ok_and(|v| v == "early-list-objects"));

    /// Whether a list's objects are passed on before the cache holds the list.
    pub fn early_list_objects() -> bool {
        *EARLY_LIST_OBJECTS
    }
}

/// [`touched`] as methods of a watch's stream, beside kube-runtime's `WatchStreamExt`.
pub trait TouchedWhenCached<K>: Stream<Item = watcher::Result<watcher::Event<K>>> + Sized
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    /// `touched_objects()`, a list's objects passed on once `store` holds the list.
    fn touched_when_cached(self, store: Store<K>) -> impl Stream<Item = watcher::Result<K>> {
        touched(self, store, true)
    }

    /// `applied_objects()`, a list's objects passed on once `store` holds the list.
    fn applied_when_cached(self, store: Store<K>) -> impl Stream<Item = watcher::Result<K>> {
        touched(self, store, false)
    }
}

impl<K, S> TouchedWhenCached<K> for S
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::WatchStreamExt as _;
    use kube::runtime::reflector::{self, ObjectRef};

    /// `ns/<name>` at resourceVersion `version`.
    fn meta(name: &str, version: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        }
    }

    fn cm(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: meta(name, version),
            ..ConfigMap::default()
        }
    }

    fn events(list: &[ConfigMap]) -> Vec<watcher::Result<watcher::Event<ConfigMap>>> {
        let mut out = vec![
            Ok(watcher::Event::Apply(cm("a", "1"))),
            Ok(watcher::Event::Apply(cm("b", "1"))),
            Ok(watcher::Event::Init),
        ];
        out.extend(
            list.iter()
                .cloned()
                .map(|o| Ok(watcher::Event::InitApply(o))),
        );
        out.push(Ok(watcher::Event::InitDone));
        out.push(Ok(watcher::Event::Delete(cm("b", "3"))));
        out
    }

    /// What the cache held for each object when it was passed on: what a reconcile it
    /// triggered at once would have read.
    async fn read_when_passed_on(
        pass_on: impl FnOnce(
            futures::stream::BoxStream<'static, watcher::Result<watcher::Event<ConfigMap>>>,
            reflector::Store<ConfigMap>,
        ) -> futures::stream::BoxStream<'static, watcher::Result<ConfigMap>>,
    ) -> Vec<(String, Option<String>)> {
        let (store, writer) = reflector::store::<ConfigMap>();
        let list = [cm("a", "2"), cm("b", "2")];
        let reflected = futures::stream::iter(events(&list)).reflect(writer).boxed();
        let mut passed = pass_on(reflected, store.clone());
        let mut read = Vec::new();
        while let Some(obj) = passed.next().await {
            let obj = obj.unwrap();
            let name = obj.metadata.name.clone().unwrap();
            let cached = store
                .get(&ObjectRef::new(&name).within("ns"))
                .and_then(|o| o.metadata.resource_version.clone());
            read.push((name, cached));
        }
        read
    }

    #[tokio::test]
    async fn a_listed_object_is_passed_on_once_the_cache_holds_the_list() {
        let read = read_when_passed_on(|s, store| touched(s, store, true).boxed()).await;
        let read: Vec<(&str, Option<&str>)> = read
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_deref()))
            .collect();
        assert_eq!(
            read,
            [
                ("a", Some("1")),
                ("b", Some("1")),
                // The list's versions, not those the cache held before it.
                ("a", Some("2")),
                ("b", Some("2")),
                // Deleted: gone from the cache.
                ("b", None),
            ]
        );
    }

    #[tokio::test]
    async fn kube_runtimes_own_touched_objects_pass_a_listed_object_on_too_early() {
        // Why this module exists: the check above fails with kube-runtime's adapter.
        let read = read_when_passed_on(|s, _| s.touched_objects().boxed()).await;
        let listed: Vec<&Option<String>> = read[2..4].iter().map(|(_, v)| v).collect();
        assert_eq!(
            listed,
            [&Some("1".to_string()), &Some("1".to_string())],
            "a reconcile triggered by the list reads the versions from before it"
        );
    }

    #[tokio::test]
    async fn deleted_objects_are_left_out_unless_asked_for_and_errors_pass() {
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Delete(cm("a", "1"))),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(cm("b", "1"))),
            // The list broke off: its objects are not passed on; the next list's are.
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(cm("c", "1"))),
            Ok(watcher::Event::InitDone),
        ]);
        let (store, writer) = reflector::store::<ConfigMap>();
        let out: Vec<_> = touched(events.reflect(writer), store, false)
            .collect()
            .await;
        assert_eq!(out.len(), 2);
        assert!(out[0].is_err());
        assert_eq!(out[1].as_ref().unwrap().metadata.name.as_deref(), Some("c"));
    }

    fn pod(name: &str, version: &str) -> k8s_openapi::api::core::v1::Pod {
        k8s_openapi::api::core::v1::Pod {
            metadata: meta(name, version),
            ..Default::default()
        }
    }

    /// The fake kubelet's pod watch: each pod passed on is in the store at the version passed
    /// on, at the moment it is passed on (what the reconcile it triggers will read).
    #[tokio::test]
    async fn a_listed_pod_is_passed_on_once_the_store_holds_it() {
        let (store, writer) = reflector::store();
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Apply(pod("a", "1"))),
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(pod("a", "2"))),
            Ok(watcher::Event::InitApply(pod("b", "3"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(pod("b", "4"))),
        ]);
        let seen: Vec<(String, String, Option<String>)> = events
            .reflect(writer)
            .applied_when_cached(store.clone())
            .map(|pod| {
                let pod = pod.expect("no errors here");
                let cached = store
                    .get(&ObjectRef::from_obj(&pod))
                    .and_then(|p| p.metadata.resource_version.clone());
                (
                    pod.metadata.name.unwrap_or_default(),
                    pod.metadata.resource_version.unwrap_or_default(),
                    cached,
                )
            })
            .collect()
            .await;
        let expected = [("a", "1"), ("a", "2"), ("b", "3"), ("b", "4")];
        assert_eq!(seen.len(), expected.len(), "{seen:?}");
        for ((name, version, cached), (want_name, want_version)) in seen.iter().zip(expected) {
            assert_eq!((name.as_str(), version.as_str()), (want_name, want_version));
            assert_eq!(
                cached.as_deref(),
                Some(want_version),
                "{name} as the store held it"
            );
        }
    }

    /// The check above fails on kube-runtime's `applied_objects()`: a listed pod passed on as
    /// it arrives is not in the store yet.
    #[tokio::test]
    async fn passed_on_as_listed_a_new_pod_is_not_in_the_store_yet() {
        let (store, writer) = reflector::store::<k8s_openapi::api::core::v1::Pod>();
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(pod("a", "2"))),
            Ok(watcher::Event::InitDone),
        ]);
        let cached: Vec<bool> = events
            .reflect(writer)
            .applied_objects()
            .map(|pod| {
                store
                    .get(&ObjectRef::from_obj(&pod.expect("no errors")))
                    .is_some()
            })
            .collect()
            .await;
        assert_eq!(cached, vec![false]);
    }
}
