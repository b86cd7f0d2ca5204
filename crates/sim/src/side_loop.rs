//! The work queue of a controller that stands apart from the Rollout controller replicas (the
//! AnalysisRun and Experiment controllers): it does not crash or take part in leader election,
//! so its writer's gate is always open.
//!
//! It runs one reconcile per object at a time, as kube's controller runtime does: a trigger
//! during one does not start a second beside it, it marks the object so that it runs again as
//! soon as the first is done, on what the API server has by then. A trigger for an object
//! already queued keeps the earlier due time, so a later one never postpones it.
//!
//! A reconcile is a future polled by the scheduler with a noop waker: each poll runs it until
//! it sends a request (which the scheduler carries with the network's latency and answers
//! through [`SideLoop::deliver`]) or finishes. Beside the future the loop keeps a context of
//! the caller's choosing (what the reconcile observed), handed back with its output.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::net::{Gate, Request, Response, SimWriter};

/// A reconcile in the making.
pub type Reconcile<T> = Pin<Box<dyn Future<Output = T> + Send>>;

struct InFlight<C, T> {
    writer: SimWriter,
    context: C,
    future: Reconcile<T>,
}

/// What polling a reconcile came to.
pub enum Polled<C, T> {
    /// Nothing in flight for the object, or it waits for a reply.
    Waiting,
    /// It sends this request.
    Send(Request),
    /// It finished.
    Done(Finished<C, T>),
}

/// A finished reconcile.
pub struct Finished<C, T> {
    /// What was kept beside the reconcile when it started.
    pub context: C,
    pub output: T,
    /// When the object is due again, if ever.
    pub next_ms: Option<u64>,
}

impl<C, T> Polled<C, T> {
    /// What the poll came to, in the caller's own terms: each controller reports a finished
    /// reconcile in its own way, while waiting and sending mean the same for all.
    pub fn resolve<P>(
        self,
        waiting: P,
        send: impl FnOnce(Request) -> P,
        done: impl FnOnce(Finished<C, T>) -> P,
    ) -> P {
        match self {
            Self::Waiting => waiting,
            Self::Send(request) => send(request),
            Self::Done(finished) => done(finished),
        }
    }
}

/// The work queue and the reconciles in flight, by object name.
pub struct SideLoop<C, T> {
    /// Objects waiting to be reconciled, with the time they are due.
    queue: BTreeMap<String, u64>,
    /// Triggered while being reconciled: run again when done.
    dirty: BTreeSet<String>,
    inflight: BTreeMap<String, InFlight<C, T>>,
    /// Always open: this controller stands apart from leader election.
    gate: Gate,
}

impl<C, T> Default for SideLoop<C, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C, T> SideLoop<C, T> {
    pub fn new() -> Self {
        let gate = Gate::default();
        gate.set(Some(0));
        Self {
            queue: BTreeMap::new(),
            dirty: BTreeSet::new(),
            inflight: BTreeMap::new(),
            gate,
        }
    }

    /// Queues `name` for `at_ms`. Returns when to wake the controller for it, if that is sooner
    /// than it was already due.
    pub fn trigger(&mut self, name: &str, at_ms: u64) -> Option<u64> {
        if self.inflight.contains_key(name) {
            self.dirty.insert(name.to_string());
            return None;
        }
        match self.queue.get(name) {
            Some(due) if *due <= at_ms => None,
            _ => {
                self.queue.insert(name.to_string(), at_ms);
                Some(at_ms)
            }
        }
    }

    /// Starts the reconcile of `name` if it is due at `now_ms` and none is in flight (a wake-up
    /// for an earlier schedule that has moved finds nothing due). Once due, `name` leaves the
    /// queue; `make` builds the reconcile on the writer it is given, or `None` when there is
    /// nothing to reconcile (the object is gone). Returns whether a reconcile started.
    pub fn start(
        &mut self,
        name: &str,
        now_ms: u64,
        make: impl FnOnce(SimWriter) -> Option<(C, Reconcile<T>)>,
    ) -> bool {
        if self.inflight.contains_key(name) || self.queue.get(name).is_none_or(|d| *d > now_ms) {
            return false;
        }
        self.queue.remove(name);
        let writer = SimWriter::new(self.gate.clone(), Some(0));
        let Some((context, future)) = make(writer.clone()) else {
            return false;
        };
        self.inflight.insert(
            name.to_string(),
            InFlight {
                writer,
                context,
                future,
            },
        );
        true
    }

    /// Hands the reply to the reconcile of `name`.
    pub fn deliver(&mut self, name: &str, response: Response) {
        if let Some(f) = self.inflight.get(name) {
            f.writer.deliver(response);
        }
    }

    /// Runs the reconcile of `name` until it sends a request or finishes. A finished one is
    /// queued again at once if triggered meanwhile, else after what `requeue_after` says of
    /// its output (never, for `None`).
    pub fn poll(
        &mut self,
        name: &str,
        now_ms: u64,
        requeue_after: impl FnOnce(&T) -> Option<Duration>,
    ) -> Polled<C, T> {
        let Some(inflight) = self.inflight.get_mut(name) else {
            return Polled::Waiting;
        };
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(output) = inflight.future.as_mut().poll(&mut cx) else {
            return match inflight.writer.take_request() {
                Some(request) => Polled::Send(request),
                None => Polled::Waiting,
            };
        };
        let Some(done) = self.inflight.remove(name) else {
            return Polled::Waiting;
        };
        let next_ms = if self.dirty.remove(name) {
            self.trigger(name, now_ms)
        } else {
            requeue_after(&output).and_then(|after| {
                self.trigger(name, now_ms + u64::try_from(after.as_millis()).unwrap_or(0))
            })
        };
        Polled::Done(Finished {
            context: done.context,
            output,
            next_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::net::{NAMESPACE, Reply};
    use sluice_controller::cluster::ClusterAccess;

    type Loop = SideLoop<&'static str, u32>;

    /// A reconcile that finishes at its first poll.
    fn ready(l: &mut Loop, name: &str, now_ms: u64) -> bool {
        l.start(name, now_ms, |_| Some(("ctx", Box::pin(async { 7 }))))
    }

    /// The due time a finished reconcile was queued again for.
    fn next_of(polled: Polled<&'static str, u32>) -> Option<u64> {
        let Polled::Done(Finished {
            context,
            output,
            next_ms,
        }) = polled
        else {
            panic!("the reconcile did not finish");
        };
        assert_eq!((context, output), ("ctx", 7));
        next_ms
    }

    #[test]
    fn a_trigger_keeps_the_earlier_due_time() {
        let mut l = Loop::new();
        assert_eq!(l.trigger("a", 100), Some(100));
        assert_eq!(l.trigger("a", 200), None);
        assert_eq!(l.trigger("a", 100), None);
        assert!(!ready(&mut l, "a", 99));
        assert_eq!(l.trigger("a", 50), Some(50));
        assert!(ready(&mut l, "a", 50));
    }

    #[test]
    fn nothing_starts_before_it_is_due_or_when_not_queued() {
        let mut l = Loop::new();
        assert!(!ready(&mut l, "a", 1_000));
        l.trigger("a", 100);
        assert!(!ready(&mut l, "a", 99));
        assert!(ready(&mut l, "a", 100));
        // Taken off the queue: a second wake-up finds nothing due.
        assert_eq!(next_of(l.poll("a", 100, |_| None)), None);
        assert!(!ready(&mut l, "a", 100));
    }

    #[test]
    fn a_trigger_in_flight_runs_it_again_at_once_when_done() {
        let mut l = Loop::new();
        l.trigger("a", 0);
        assert!(ready(&mut l, "a", 0));
        // No second reconcile beside the first, and no wake-up booked for it yet.
        assert_eq!(l.trigger("a", 10), None);
        assert!(!ready(&mut l, "a", 10));
        let later = |_: &u32| Some(Duration::from_secs(60));
        assert_eq!(next_of(l.poll("a", 20, later)), Some(20));
        assert!(ready(&mut l, "a", 20));
        assert_eq!(next_of(l.poll("a", 30, later)), Some(60_030));
    }

    #[test]
    fn a_finished_reconcile_requeues_as_its_output_says() {
        let mut l = Loop::new();
        l.trigger("a", 0);
        assert!(ready(&mut l, "a", 0));
        let after = |_: &u32| Some(Duration::from_millis(1_500));
        assert_eq!(next_of(l.poll("a", 5, after)), Some(1_505));
        assert!(!ready(&mut l, "a", 1_504));
        assert!(ready(&mut l, "a", 1_505));
        // Awaiting a change: queued for nothing.
        assert_eq!(next_of(l.poll("a", 1_505, |_| None)), None);
        assert!(!ready(&mut l, "a", u64::MAX));
    }

    #[test]
    fn nothing_to_reconcile_leaves_nothing_in_flight() {
        let mut l = Loop::new();
        l.trigger("a", 0);
        assert!(!l.start("a", 0, |_| None));
        assert!(matches!(l.poll("a", 0, |_| None), Polled::Waiting));
        // Not in flight, so a trigger queues it rather than marking it dirty.
        assert_eq!(l.trigger("a", 10), Some(10));
    }

    #[test]
    fn a_request_goes_out_and_its_reply_comes_back() {
        let mut l: SideLoop<(), bool> = SideLoop::new();
        l.trigger("a", 0);
        assert!(l.start("a", 0, |w| {
            let future: Reconcile<bool> =
                Box::pin(async move { w.list_services(NAMESPACE).await.is_ok() });
            Some(((), future))
        }));
        assert!(matches!(l.poll("a", 0, |_| None), Polled::Send(_)));
        assert!(matches!(l.poll("a", 0, |_| None), Polled::Waiting));
        l.deliver("a", Ok(Reply::Services(Vec::new())));
        let Polled::Done(Finished { output, .. }) = l.poll("a", 0, |_| None) else {
            panic!("the reconcile did not finish");
        };
        assert!(output);
    }
}
