//! Watch streams and the caches they feed, one per controller replica and kind.
//!
//! The real API guarantees events for one object arrive in commit order, and nothing about the
//! order across objects. So each object has its own queue with non-decreasing delivery times,
//! and different objects' queues interleave freely. A stream can also break (every queued event
//! is lost and the client must re-list), and an event can arrive twice (a reconnect replays
//! it). What a controller reads is therefore a possibly stale, but per-object monotone, view.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use crate::api_model::{WatchEvent, name_of};

#[derive(Debug, Default)]
pub struct WatchStream {
    /// False after a break until the next successful re-list.
    pub connected: bool,
    queues: BTreeMap<String, VecDeque<Queued>>,
}

#[derive(Debug)]
struct Queued {
    due: u64,
    seq: u64,
    event: WatchEvent,
}

impl WatchStream {
    /// Queues an event for `name` at `due` or later: never before an earlier event of the same
    /// object. Returns the time it will actually be due.
    pub fn push(&mut self, name: &str, event: WatchEvent, due: u64, seq: u64) -> u64 {
        let q = self.queues.entry(name.to_string()).or_default();
        let due = q.back().map_or(due, |last| last.due.max(due));
        q.push_back(Queued { due, seq, event });
        due
    }

    /// The next event due by `now`: the earliest head of any object's queue.
    pub fn pop_due(&mut self, now: u64) -> Option<WatchEvent> {
        let name = self
            .queues
            .iter()
            .filter_map(|(n, q)| q.front().map(|h| (h.due, h.seq, n)))
            .filter(|(due, _, _)| *due <= now)
            .min()
            .map(|(_, _, n)| n.clone())?;
        let q = self.queues.get_mut(&name)?;
        let event = q.pop_front().map(|h| h.event);
        if q.is_empty() {
            self.queues.remove(&name);
        }
        event
    }

    /// The connection broke: whatever was in flight is gone.
    pub fn disconnect(&mut self) {
        self.connected = false;
        self.queues.clear();
    }

    pub fn pending(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }
}

/// A reflector store: the last state of every object the watch reported.
#[derive(Debug)]
pub struct Cache<T> {
    pub objects: BTreeMap<String, T>,
    /// Whether one full list has been applied (the controller decides nothing before).
    pub synced: bool,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            synced: false,
        }
    }
}

impl<T: serde::de::DeserializeOwned> Cache<T> {
    /// Applies one watch event. Objects that do not parse are skipped, as a tolerant informer
    /// would.
    pub fn apply(&mut self, event: &WatchEvent) {
        match event {
            WatchEvent::Applied(v) => {
                if let Ok(obj) = serde_json::from_value(v.clone()) {
                    self.objects.insert(name_of(v).to_string(), obj);
                }
            }
            WatchEvent::Deleted(v) => {
                self.objects.remove(name_of(v));
            }
        }
    }

    /// Replaces the whole store with a fresh list.
    pub fn replace(&mut self, list: &[Value]) {
        self.objects = list
            .iter()
            .filter_map(|v| {
                serde_json::from_value(v.clone())
                    .ok()
                    .map(|o| (name_of(v).to_string(), o))
            })
            .collect();
        self.synced = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(name: &str, rv: u64) -> WatchEvent {
        WatchEvent::Applied(json!({"metadata": {"name": name, "resourceVersion": rv.to_string()}}))
    }

    fn rv(e: &WatchEvent) -> &str {
        e.object()["metadata"]["resourceVersion"].as_str().unwrap()
    }

    #[test]
    fn per_object_order_holds_and_objects_interleave() {
        let mut w = WatchStream {
            connected: true,
            ..Default::default()
        };
        // a@1 is slow, a@2 asks to be early but must wait behind it; b@3 overtakes both.
        assert_eq!(w.push("a", ev("a", 1), 100, 1), 100);
        assert_eq!(w.push("a", ev("a", 2), 10, 2), 100);
        assert_eq!(w.push("b", ev("b", 3), 50, 3), 50);
        assert!(w.pop_due(40).is_none());
        assert_eq!(rv(&w.pop_due(60).unwrap()), "3");
        assert_eq!(rv(&w.pop_due(100).unwrap()), "1");
        assert_eq!(rv(&w.pop_due(100).unwrap()), "2");
        assert_eq!(w.pending(), 0);
    }

    #[test]
    fn disconnect_loses_queued_events() {
        let mut w = WatchStream::default();
        w.push("a", ev("a", 1), 0, 1);
        w.disconnect();
        assert!(w.pop_due(10).is_none());
    }
}
