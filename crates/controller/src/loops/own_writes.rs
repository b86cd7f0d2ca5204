//! The Rollouts this controller has just written, until its watch shows the write.
//!
//! A reconcile decides on the cached Rollout and writes with that copy's resourceVersion, so a
//! reconcile that starts before the watch has delivered the controller's own previous write
//! decides on what it has already replaced and is refused with a conflict: a wasted decision,
//! a wasted write and a retry. Under a thousand updates at once the watch lags by seconds, and
//! about one update in two met such a conflict (each ReplicaSet change triggers a reconcile).
//! So a Rollout whose cached copy is still the version a write replaced is not decided on
//! again: the watch event of the write triggers the next reconcile. Versions are compared for
//! equality only (resourceVersions are opaque), and an entry is trusted for a short while
//! only, in case the watch never shows the write (a relist shows the newest version anyway).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a write is waited for before the cached copy is decided on anyway.
pub const TRUSTED_FOR: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct OwnWrites {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// By uid: the resourceVersions the last plan's writes replaced, and when it wrote.
    replaced: HashMap<String, (Vec<String>, Instant)>,
    swept: Option<Instant>,
}

impl OwnWrites {
    /// Notes that the Rollout `uid`, seen at `before`, was written, passing through
    /// `versions` (one per write, the last its version now). Every version but the last is
    /// one this controller has replaced: the watch may show the first write of a plan before
    /// its second.
    pub fn wrote(&self, uid: &str, before: Option<&str>, versions: &[String], now: Instant) {
        let mut inner = self.lock();
        let last = versions.last().map(String::as_str);
        let replaced: Vec<String> = before
            .into_iter()
            .chain(versions.iter().map(String::as_str))
            .filter(|v| Some(*v) != last)
            .map(str::to_string)
            .collect();
        if replaced.is_empty() {
            // A write that changed nothing keeps the version: nothing to wait for.
            inner.replaced.remove(uid);
        } else {
            inner.replaced.insert(uid.to_string(), (replaced, now));
        }
        // Rollouts deleted right after a write leave entries behind: swept now and then.
        if inner
            .swept
            .is_none_or(|at| now.duration_since(at) >= TRUSTED_FOR)
        {
            inner
                .replaced
                .retain(|_, (_, at)| now.duration_since(*at) < TRUSTED_FOR);
            inner.swept = Some(now);
        }
    }

    /// Whether the cached copy of `uid` at `cached` is a version this controller has already
    /// replaced, and the write is recent enough to wait for.
    pub fn is_replaced(&self, uid: &str, cached: Option<&str>, now: Instant) -> bool {
        let mut inner = self.lock();
        let Some((versions, at)) = inner.replaced.get(uid) else {
            return false;
        };
        let replaced = cached.is_some_and(|c| versions.iter().any(|v| v == c));
        if replaced && now.duration_since(*at) < TRUSTED_FOR {
            return true;
        }
        // The watch has shown a newer version (or the wait is over).
        inner.replaced.remove(uid);
        false
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(versions: &[&str]) -> Vec<String> {
        versions.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_plan_of_two_writes_waits_for_the_second() {
        let own = OwnWrites::default();
        let t0 = Instant::now();
        // The revision annotation, then the status.
        own.wrote("u", Some("10"), &v(&["11", "12"]), t0);
        assert!(
            own.is_replaced("u", Some("11"), t0),
            "only the first write shown"
        );
        assert!(own.is_replaced("u", Some("10"), t0));
        assert!(!own.is_replaced("u", Some("12"), t0));
    }

    #[test]
    fn a_replaced_copy_is_waited_for_until_the_watch_shows_the_write() {
        let own = OwnWrites::default();
        let t0 = Instant::now();
        assert!(!own.is_replaced("u", Some("10"), t0), "nothing written");
        own.wrote("u", Some("10"), &v(&["11"]), t0);
        assert!(own.is_replaced("u", Some("10"), t0), "the cache lags");
        assert!(!own.is_replaced("u", Some("11"), t0), "the watch showed it");
        assert!(!own.is_replaced("u", Some("10"), t0), "forgotten once seen");
    }

    #[test]
    fn a_write_that_changed_nothing_or_an_old_one_is_not_waited_for() {
        let own = OwnWrites::default();
        let t0 = Instant::now();
        own.wrote("u", Some("10"), &v(&["10"]), t0);
        assert!(!own.is_replaced("u", Some("10"), t0));
        own.wrote("u", Some("10"), &v(&["11"]), t0);
        assert!(
            !own.is_replaced("u", Some("10"), t0 + TRUSTED_FOR),
            "waited long enough"
        );
        own.wrote("v", Some("3"), &v(&["4"]), t0);
        assert!(!own.is_replaced("u", Some("3"), t0), "per Rollout");
    }

    #[test]
    fn entries_of_deleted_rollouts_are_swept() {
        let own = OwnWrites::default();
        let t0 = Instant::now();
        for i in 0..100 {
            own.wrote(&format!("u{i}"), Some("1"), &v(&["2"]), t0);
        }
        own.wrote("last", Some("1"), &v(&["2"]), t0 + TRUSTED_FOR);
        assert_eq!(own.lock().replaced.len(), 1);
    }
}
