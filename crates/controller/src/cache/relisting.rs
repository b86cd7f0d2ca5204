//! kube-runtime's watcher, listed again after any error instead of resumed.
//!
//! kube-runtime resumes a broken watch from the last resourceVersion it saw. Across a
//! kube-apiserver restart that lost changes: in the soak with its faults (1,000 Rollouts, the
//! API server SIGKILLed right after a thousand image changes were sent), the Rollout watch
//! resumed and some forty Rollouts changed just before the kill were never delivered; their
//! new generation was not acted on until something else touched them. client-go's reflector
//! lists again after a watch that broke, and so does this: an error from the watch (the API
//! server gone, a connection cut, a 410) starts a fresh watcher, whose list at the most recent
//! revision replaces the cache's content (objects deleted meanwhile go too), and which then
//! watches from that list. A watch the server ended cleanly (its timeout) is resumed as before.
//! Callers back off errors as before (`default_backoff`), so an API server that stays away is
//! asked for a list no faster than it was asked for a watch.

use std::fmt::Debug;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, ListSemantic, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// [`watcher`] on `api` with `config`, started again (listing at the most recent revision)
/// after every error it yields; the error is passed on first.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    relisting(api, config, None)
}

/// [`watch`], also listing again every `every` (between two lists, never inside one), quiet
/// or not: a change a resumed watch never delivered, with no error to tell (seen for the
/// Rollouts changed in the last moment before a kube-apiserver was killed), is seen within
/// `every`.
pub fn watch_relisting_every<K>(
    api: Api<K>,
    config: watcher::Config,
    every: Duration,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    relisting(api, config, Some(every))
}

fn relisting<K>(
    api: Api<K>,
    config: watcher::Config,
    every: Option<Duration>,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let again = config.clone().list_semantic(ListSemantic::MostRecent);
    let first = watcher(api.clone(), config).boxed();
    let state = Relist {
        inner: first,
        api,
        again,
        since: Instant::now(),
        listing: false,
    };
    futures::stream::unfold(state, move |mut s| async move {
        loop {
            let due = every.map(|every| s.since + every);
            let item = tokio::select! {
                item = s.inner.next() => item?,
                () = sleep_until_some(due), if !s.listing => {
                    s.restart();
                    continue;
                }
            };
            match &item {
                Ok(watcher::Event::Init) => s.listing = true,
                Ok(watcher::Event::InitDone) => s.listing = false,
                Ok(_) => {}
                Err(_) => s.restart(),
            }
            return Some((item, s));
        }
    })
}

struct Relist<K: Resource + Clone + DeserializeOwned + Debug + Send + 'static> {
    inner: BoxStream<'static, watcher::Result<watcher::Event<K>>>,
    api: Api<K>,
    again: watcher::Config,
    since: Instant,
    listing: bool,
}

impl<K> Relist<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    fn restart(&mut self) {
        self.inner = watcher(self.api.clone(), self.again.clone()).boxed();
        self.since = Instant::now();
        self.listing = false;
    }
}

/// Sleeps until `at`, or for ever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
