//! client-go's workqueue metrics (`workqueue_*`, label `name`) for the controller's loops,
//! under the queue names Argo Rollouts gives its queues.
//!
//! Sluice's loops are kube's controller runtime, whose scheduler keeps its queue to itself: what
//! is measured is the work taken from it. `adds_total` counts reconciles begun (client-go counts
//! an add once per item processed, duplicates folded, as the runtime does), `retries_total` the
//! reconciles that failed and were requeued with a backoff, `work_duration_seconds` each
//! reconcile, and `unfinished_work_seconds` / `longest_running_processor_seconds` the reconciles
//! in progress. `workqueue_depth` and `workqueue_queue_duration_seconds` are not served: how
//! many items wait, and for how long, is known only inside the runtime's scheduler.
//! Services and Ingresses have no loop of their own in Sluice (a Rollout's reconcile edits them):
//! their series are served, at zero, so that queries naming them find them.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::metrics::histogram::Histogram;

use super::lock;

/// The queue names of Argo Rollouts' controller, in its order.
pub const QUEUE_NAMES: [&str; 5] = [
    "Rollouts",
    "Experiments",
    "AnalysisRuns",
    "Services",
    "Ingresses",
];

/// client-go's buckets: `ExponentialBuckets(10e-9, 10, 10)`, 10 ns to 10 s.
pub fn buckets() -> impl Iterator<Item = f64> {
    (0..10).map(|i| 1e-8 * 10f64.powi(i))
}

/// One of Argo's queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Queue {
    Rollouts,
    Experiments,
    AnalysisRuns,
}

impl Queue {
    pub fn name(self) -> &'static str {
        match self {
            Queue::Rollouts => "Rollouts",
            Queue::Experiments => "Experiments",
            Queue::AnalysisRuns => "AnalysisRuns",
        }
    }
}

#[derive(Debug)]
pub(super) struct QueueSeries {
    pub adds: u64,
    pub retries: u64,
    pub work: Histogram,
    /// Reconciles in progress: id -> start.
    in_flight: BTreeMap<u64, Instant>,
}

impl Default for QueueSeries {
    fn default() -> Self {
        QueueSeries {
            adds: 0,
            retries: 0,
            work: Histogram::new(buckets()),
            in_flight: BTreeMap::new(),
        }
    }
}

impl QueueSeries {
    /// Seconds of work in progress, and the longest one, at `now`.
    pub fn unfinished(&self, now: Instant) -> (f64, f64) {
        self.in_flight
            .values()
            .map(|started| now.saturating_duration_since(*started).as_secs_f64())
            .fold((0.0, 0.0), |(sum, max), s| (sum + s, f64::max(max, s)))
    }
}

/// The state of every queue.
#[derive(Debug, Default)]
pub struct Queues {
    series: Mutex<BTreeMap<Queue, QueueSeries>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Queues {
    /// Records a reconcile beginning; its end is recorded when the returned guard drops.
    pub fn begin(self: &std::sync::Arc<Self>, queue: Queue) -> Work {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut map = lock(&self.series);
        let series = map.entry(queue).or_default();
        series.adds += 1;
        series.in_flight.insert(id, Instant::now());
        Work {
            queues: self.clone(),
            queue,
            id,
        }
    }

    /// Records a finished reconcile: its duration, and a retry if it failed.
    pub fn finish(&self, queue: Queue, took: Duration, failed: bool) {
        let mut map = lock(&self.series);
        let series = map.entry(queue).or_default();
        series.work.observe(took.as_secs_f64());
        if failed {
            series.retries += 1;
        }
    }

    /// Runs `f` on every queue of Argo's, by name, with its series (`None` for those Sluice
    /// has no loop for).
    pub(super) fn each(&self, mut f: impl FnMut(&'static str, Option<&QueueSeries>)) {
        let map = lock(&self.series);
        for name in QUEUE_NAMES {
            let series = map.iter().find(|(q, _)| q.name() == name).map(|(_, s)| s);
            f(name, series);
        }
    }

    fn end(&self, queue: Queue, id: u64) {
        if let Some(series) = lock(&self.series).get_mut(&queue) {
            series.in_flight.remove(&id);
        }
    }
}

/// A reconcile in progress; dropping it ends it.
#[derive(Debug)]
pub struct Work {
    queues: std::sync::Arc<Queues>,
    queue: Queue,
    id: u64,
}

impl Drop for Work {
    fn drop(&mut self) {
        self.queues.end(self.queue, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn client_go_buckets() {
        let b: Vec<f64> = buckets().collect();
        assert_eq!(b.len(), 10);
        assert!((b[0] - 1e-8).abs() < 1e-20);
        assert!((b[9] - 10.0).abs() < 1e-9);
    }

    #[test]
    fn work_in_progress_is_counted_until_it_ends() {
        let q = Arc::new(Queues::default());
        let a = q.begin(Queue::Rollouts);
        let b = q.begin(Queue::Rollouts);
        let now = Instant::now() + Duration::from_secs(2);
        q.each(|name, s| {
            if name == "Rollouts" {
                let s = s.unwrap();
                assert_eq!(s.adds, 2);
                let (sum, max) = s.unfinished(now);
                assert!(sum >= 4.0 && max >= 2.0, "{sum} {max}");
            } else {
                assert!(s.is_none(), "{name}");
            }
        });
        drop(a);
        q.finish(Queue::Rollouts, Duration::from_millis(3), true);
        drop(b);
        q.finish(Queue::Rollouts, Duration::from_millis(3), false);
        q.each(|name, s| {
            if let (Some(s), "Rollouts") = (s, name) {
                assert_eq!((s.adds, s.retries), (2, 1));
                assert_eq!(s.unfinished(Instant::now()), (0.0, 0.0));
            }
        });
    }
}
