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
//!
//! A watch need not fail to lose changes: kube's client retries a 503 itself and resumes a
//! watch whose connection ended, and such a watch, resumed across the restart, still went on
//! without the changes of the last moment before the kill. So every watch also lists again
//! once the API server answers after it was unreachable ([`note_api_server`], told by the
//! client's request metrics), and the Rollout watch every five minutes in any case.

use std::fmt::Debug;
use std::time::Duration;

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, ListSemantic, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

/// Bumped each time the API server answers promptly again after it was unreachable (a
/// request that got no answer, a 503, or a watch that took seconds to start because kube's
/// client retried it through the outage): every watch then lists again, whether or not its
/// own stream failed. A watch that kube's client resumed on its own across the outage is not
/// trusted.
static BACK: LazyLock<tokio::sync::watch::Sender<u64>> =
    LazyLock::new(|| tokio::sync::watch::Sender::new(0));
static UNREACHABLE: AtomicBool = AtomicBool::new(false);

/// Tells the watches how a request to the API server ended: in `trouble` (no answer, a 503,
/// a watch that took seconds to start), or answered, `prompt`ly or not. The first prompt
/// answer after trouble makes every watch list again; a slow answer alone (a large list)
/// changes nothing, so lists that are slow cannot start more lists.
pub fn note_api_server(trouble: bool, prompt: bool) {
    if trouble {
        UNREACHABLE.store(true, Ordering::Relaxed);
    } else if prompt && UNREACHABLE.swap(false, Ordering::Relaxed) {
        BACK.send_modify(|n| *n += 1);
    }
}

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
        back: BACK.subscribe(),
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
                Ok(()) = s.back.changed(), if !s.listing => {
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
    back: tokio::sync::watch::Receiver<u64>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watches_are_told_once_when_the_api_server_answers_again() {
        let mut back = BACK.subscribe();
        back.mark_unchanged();
        note_api_server(false, true);
        assert!(
            !back.has_changed().unwrap(),
            "answers all along: nothing to tell"
        );
        note_api_server(false, false);
        assert!(
            !back.has_changed().unwrap(),
            "a slow answer alone is no trouble"
        );
        note_api_server(true, false);
        note_api_server(true, true);
        assert!(!back.has_changed().unwrap(), "still in trouble");
        note_api_server(false, false);
        assert!(
            !back.has_changed().unwrap(),
            "answered, but not promptly yet"
        );
        note_api_server(false, true);
        assert!(back.has_changed().unwrap(), "answering promptly again");
        back.mark_unchanged();
        note_api_server(false, true);
        assert!(!back.has_changed().unwrap(), "told once");
    }
}
