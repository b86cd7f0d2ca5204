//! Write fencing: only the current leader may change anything in the cluster.
//!
//! [`WriteGate`] carries the leadership term (`Some(term)` while leading). It is checked twice:
//! by the apply layer right before each write of a plan (pinned to the term the plan was decided
//! in, so a plan decided under an earlier term is never finished under a later one), and by
//! [`FenceLayer`] on the controller's HTTP client, which refuses every mutating request (create,
//! update, patch, delete, eviction, events) while the gate is closed, whatever code path sent it.
//! Reads are never fenced: a follower keeps its caches warm.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use http::{Method, Request, Response};
use tokio::sync::watch;
use tower::{BoxError, Layer, Service};

/// A write refused because this instance does not lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not the leader: writes are fenced")]
pub struct Fenced;

/// Publishes the leadership term; owned by the election loop (or set once, without election).
#[derive(Debug)]
pub struct Leadership {
    tx: watch::Sender<Option<u64>>,
}

impl Leadership {
    /// Not leading until told otherwise.
    pub fn new() -> (Leadership, WriteGate) {
        let (tx, rx) = watch::channel(None);
        (Leadership { tx }, WriteGate { rx })
    }

    /// Leading for good: the controller runs without leader election.
    pub fn always() -> (Leadership, WriteGate) {
        let (tx, rx) = watch::channel(Some(0));
        (Leadership { tx }, WriteGate { rx })
    }

    /// Publishes `term` (`None`: not leading), notifying watchers only on a change.
    pub fn set(&self, term: Option<u64>) -> bool {
        self.tx.send_if_modified(|current| {
            let changed = *current != term;
            *current = term;
            changed
        })
    }

    pub fn term(&self) -> Option<u64> {
        *self.tx.borrow()
    }

    pub fn gate(&self) -> WriteGate {
        WriteGate {
            rx: self.tx.subscribe(),
        }
    }
}

/// Read side of [`Leadership`]; cheap to clone.
#[derive(Clone, Debug)]
pub struct WriteGate {
    rx: watch::Receiver<Option<u64>>,
}

impl WriteGate {
    /// A gate that is always open (term 0), for callers without leader election.
    pub fn open() -> WriteGate {
        let (tx, rx) = watch::channel(Some(0));
        // The value never changes; keeping no sender is fine for a watch receiver.
        drop(tx);
        WriteGate { rx }
    }

    /// The current term, `None` when not leading.
    pub fn term(&self) -> Option<u64> {
        *self.rx.borrow()
    }

    pub fn is_open(&self) -> bool {
        self.term().is_some()
    }

    /// `Ok` when writes are allowed now, in `term` if one is given.
    pub fn check(&self, term: Option<u64>) -> Result<(), Fenced> {
        match (self.term(), term) {
            (Some(current), Some(pinned)) if current == pinned => Ok(()),
            (Some(_), None) => Ok(()),
            _ => Err(Fenced),
        }
    }

    /// Yields each time this instance becomes leader (including at the start if it already
    /// is), so the controller can reconcile everything it may have missed as a follower.
    pub fn acquisitions(&self) -> impl Stream<Item = ()> + Send + 'static {
        let mut rx = self.rx.clone();
        rx.mark_changed();
        futures::stream::unfold((rx, None::<u64>), |(mut rx, mut last)| async move {
            loop {
                rx.changed().await.ok()?;
                let term = *rx.borrow_and_update();
                if term.is_some() && term != last {
                    last = term;
                    return Some(((), (rx, last)));
                }
                last = term;
            }
        })
        .boxed()
    }

    /// Waits until the gate is in the state `leading`.
    pub async fn wait_for(&self, leading: bool) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|term| term.is_some() == leading).await;
    }

    /// A receiver of the term, for callers that want to follow it.
    pub fn watch(&self) -> watch::Receiver<Option<u64>> {
        self.rx.clone()
    }
}

/// Counts mutating requests in flight, so a shutdown can wait for them before releasing the
/// lease to the next leader.
#[derive(Clone, Debug)]
pub struct InFlight {
    tx: watch::Sender<usize>,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            tx: watch::channel(0).0,
        }
    }
}

impl InFlight {
    pub fn count(&self) -> usize {
        *self.tx.borrow()
    }

    /// Waits (at most `timeout`) until no mutating request is in flight; `false` on timeout.
    pub async fn drained(&self, timeout: Duration) -> bool {
        let mut rx = self.tx.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n == 0))
            .await
            .is_ok()
    }

    fn enter(&self) -> InFlightGuard {
        self.tx.send_modify(|n| *n += 1);
        InFlightGuard {
            tx: self.tx.clone(),
        }
    }
}

struct InFlightGuard {
    tx: watch::Sender<usize>,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.tx.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Whether an HTTP request changes anything.
pub fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Tower layer that refuses mutating requests with [`Fenced`] while the gate is closed.
#[derive(Clone)]
pub struct FenceLayer {
    gate: WriteGate,
    in_flight: InFlight,
}

impl FenceLayer {
    pub fn new(gate: WriteGate, in_flight: InFlight) -> FenceLayer {
        FenceLayer { gate, in_flight }
    }
}

impl<S> Layer<S> for FenceLayer {
    type Service = FenceService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FenceService {
            inner,
            gate: self.gate.clone(),
            in_flight: self.in_flight.clone(),
        }
    }
}

#[derive(Clone)]
pub struct FenceService<S> {
    inner: S,
    gate: WriteGate,
    in_flight: InFlight,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, RB> Service<Request<B>> for FenceService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = BoxFuture<Result<Response<RB>, BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if !is_mutating(request.method()) {
            let response = self.inner.call(request);
            return Box::pin(async move { response.await.map_err(Into::into) });
        }
        let (method, uri) = (request.method().clone(), request.uri().clone());
        let (gate, in_flight) = (self.gate.clone(), self.in_flight.clone());
        // The inner future sends nothing until it is polled. The gate is checked when the
        // request is about to go, not when it was queued: the rate limiter outside this layer
        // may hold it for seconds, during which the lease can be lost. The write is counted in
        // flight before the check, so a step-down that closes the gate and then waits for the
        // writes in flight either sees it or makes it refuse.
        let response = self.inner.call(request);
        Box::pin(async move {
            let guard = in_flight.enter();
            if !gate.is_open() {
                tracing::debug!(%method, %uri, "write refused: not the leader");
                return Err(Box::new(Fenced) as BoxError);
            }
            let result = response.await.map_err(Into::into);
            drop(guard);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use tower::ServiceExt;

    fn echo() -> impl Service<
        Request<()>,
        Response = Response<()>,
        Error = Infallible,
        Future = impl Future<Output = Result<Response<()>, Infallible>> + Send + 'static,
    > + Clone {
        tower::service_fn(|_req: Request<()>| async { Ok::<_, Infallible>(Response::new(())) })
    }

    fn request(method: Method) -> Request<()> {
        Request::builder()
            .method(method)
            .uri("/apis/apps/v1/namespaces/a/replicasets/x")
            .body(())
            .unwrap()
    }

    #[tokio::test]
    async fn mutating_requests_pass_only_while_leading() {
        let (leadership, gate) = Leadership::new();
        let svc = FenceLayer::new(gate.clone(), InFlight::default()).layer(echo());
        assert!(svc.clone().oneshot(request(Method::GET)).await.is_ok());
        let err = svc
            .clone()
            .oneshot(request(Method::PATCH))
            .await
            .unwrap_err();
        assert!(err.is::<Fenced>());
        leadership.set(Some(1));
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(svc.clone().oneshot(request(m)).await.is_ok());
        }
        leadership.set(None);
        assert!(
            svc.clone()
                .oneshot(request(Method::DELETE))
                .await
                .unwrap_err()
                .is::<Fenced>()
        );
    }

    #[tokio::test]
    async fn a_write_queued_while_leading_is_refused_once_the_lease_is_lost() {
        let (leadership, gate) = Leadership::new();
        leadership.set(Some(1));
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = sent.clone();
        let inner = tower::service_fn(move |_req: Request<()>| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(()))
            }
        });
        let in_flight = InFlight::default();
        let mut svc = FenceLayer::new(gate, in_flight.clone()).layer(inner);
        // Called (queued, as behind the rate limiter) while leading...
        let queued = svc.ready().await.unwrap().call(request(Method::PATCH));
        assert_eq!(in_flight.count(), 0, "not in flight until it goes");
        // ...and about to go after the lease was lost.
        leadership.set(None);
        assert!(queued.await.unwrap_err().is::<Fenced>());
        assert_eq!(
            sent.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "never sent"
        );
        assert_eq!(in_flight.count(), 0);
    }

    #[test]
    fn checks_are_pinned_to_a_term() {
        let (leadership, gate) = Leadership::new();
        assert_eq!(gate.check(None), Err(Fenced));
        leadership.set(Some(3));
        assert_eq!(gate.check(Some(3)), Ok(()));
        assert_eq!(gate.check(None), Ok(()));
        leadership.set(Some(4));
        assert_eq!(
            gate.check(Some(3)),
            Err(Fenced),
            "decided under an earlier term"
        );
        assert_eq!(WriteGate::open().check(Some(0)), Ok(()));
    }

    #[tokio::test]
    async fn acquisitions_fire_once_per_term() {
        let (leadership, gate) = Leadership::new();
        let mut acquired = gate.acquisitions();
        leadership.set(Some(1));
        tokio::time::timeout(Duration::from_secs(5), acquired.next())
            .await
            .unwrap()
            .unwrap();
        leadership.set(None);
        leadership.set(Some(2));
        tokio::time::timeout(Duration::from_secs(5), acquired.next())
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn in_flight_writes_are_counted_until_they_finish() {
        let in_flight = InFlight::default();
        let guard = in_flight.enter();
        assert_eq!(in_flight.count(), 1);
        assert!(!in_flight.drained(Duration::from_millis(20)).await);
        drop(guard);
        assert!(in_flight.drained(Duration::from_millis(20)).await);
    }
}
