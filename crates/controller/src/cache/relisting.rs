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

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, ListSemantic, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

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
    let again = config.clone().list_semantic(ListSemantic::MostRecent);
    let first = watcher(api.clone(), config).boxed();
    futures::stream::unfold((first, api, again), |(mut inner, api, again)| async move {
        let item = inner.next().await?;
        if item.is_err() {
            inner = watcher(api.clone(), again.clone()).boxed();
        }
        Some((item, (inner, api, again)))
    })
}
