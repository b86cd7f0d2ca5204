//! Client-side rate limiting of API requests (`--qps`, `--burst`), as client-go does it: a token
//! bucket holding up to `burst` tokens, refilled at `qps` per second; each request takes one and
//! waits, in order, when none is left.
//!
//! There is one bucket per kind of API, as Argo's controller has one client-go client, each
//! with its own bucket of `--qps`, for argoproj.io's resources, one for Kubernetes' own
//! (events included) and a dynamic one for other custom resources (the traffic routers'). A
//! single bucket for everything, with the same flags, gave Sluice about half of Argo's budget:
//! under a thousand updates at once, every Rollout status write queued behind the ReplicaSet
//! writes and events of all the others, and the last update settled twice as late.
//!
//! A request reserves its token when it is sent to the client and waits for it inside its
//! response future, so a request's wait delays no request of another kind. The write fence
//! sits inside the limiter and checks the lease after the wait (see `leader::fence`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use tokio::time::Instant;
use tower::{Layer, Service};

/// A token bucket, pure: the caller supplies the time.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token at `now` if the bucket holds one after every reservation, or says how
    /// long until it will (when nothing more is reserved meanwhile).
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = self.last.max(now);
    }

    /// Takes a token at `now` and says how long to wait before it may be used: nothing while
    /// the bucket holds one, else until the refill reaches it, after every earlier reservation
    /// (the bucket goes below zero, as Go's `rate.Limiter.Reserve` does).
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// Which bucket a request draws from, by its path (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// `/apis/argoproj.io/...`: Rollouts, AnalysisRuns, Experiments, templates.
    Argoproj,
    /// `/api/...` and the groups Kubernetes serves itself (no dot in the name, or ending in
    /// `.k8s.io`): ReplicaSets, Services, Ingresses, Jobs, events.
    Kubernetes,
    /// Every other group: custom resources such as Istio's, SMI's or Traefik's.
    Dynamic,
}

impl Lane {
    pub fn of(path: &str) -> Lane {
        let Some(rest) = path.strip_prefix("/apis/") else {
            return Lane::Kubernetes;
        };
        let group = rest.split('/').next().unwrap_or_default();
        if group == "argoproj.io" {
            Lane::Argoproj
        } else if !group.contains('.') || group.ends_with(".k8s.io") {
            Lane::Kubernetes
        } else {
            Lane::Dynamic
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Tower layer applying a [`TokenBucket`] per [`Lane`]; `qps <= 0` means unlimited.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    buckets: Option<Arc<[Mutex<TokenBucket>; 3]>>,
}

impl RateLimitLayer {
    pub fn new(qps: f32, burst: u32) -> RateLimitLayer {
        let qps = f64::from(qps);
        let now = Instant::now();
        RateLimitLayer {
            buckets: (qps > 0.0).then(|| {
                Arc::new(std::array::from_fn(|_| {
                    Mutex::new(TokenBucket::new(qps, burst, now))
                }))
            }),
        }
    }

    /// `lane`'s bucket, none when unlimited.
    fn bucket(&self, lane: Lane) -> Option<std::sync::MutexGuard<'_, TokenBucket>> {
        let buckets = self.buckets.as_ref()?;
        Some(
            buckets[lane.index()]
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }

    /// Takes a token of `lane`'s bucket now, and says how long to wait before using it.
    fn reserve(&self, lane: Lane) -> Duration {
        self.bucket(lane)
            .map_or(Duration::ZERO, |mut b| b.reserve(Instant::now()))
    }

    /// Waits until `lane`'s bucket has a token that no reservation holds, and takes it.
    async fn take_spare(&self, lane: Lane) {
        loop {
            let taken = self
                .bucket(lane)
                .map_or(Ok(()), |mut b| b.take(Instant::now()));
            match taken {
                Ok(()) => return,
                Err(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}

/// Whether a request only writes an event: events give way to every other request of their
/// bucket. They report what the other writes did and nothing waits on them (they are sent
/// from a queue, off the reconcile), so under load the writes that move updates go first and
/// the events follow, in their order, at the rate the writes leave; the bucket's rate is the
/// same. In one FIFO, the events of a thousand updates (three each) came before the writes
/// that finish them.
fn gives_way(method: &http::Method, path: &str) -> bool {
    if !crate::leader::fence::is_mutating(method) {
        return false;
    }
    if path.starts_with("/apis/events.k8s.io/") {
        return true;
    }
    let Some(rest) = path.strip_prefix("/api/v1/") else {
        return false;
    };
    let resource = match rest.strip_prefix("namespaces/") {
        Some(rest) => rest.split('/').nth(1),
        None => rest.split('/').next(),
    };
    resource == Some("events")
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            limits: self.clone(),
        }
    }
}

pub struct RateLimit<S> {
    inner: S,
    limits: RateLimitLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let path = request.uri().path();
        let lane = Lane::of(path);
        let spare_only = gives_way(request.method(), path);
        let wait = if spare_only {
            Duration::ZERO
        } else {
            self.limits.reserve(lane)
        };
        let limits = self.limits.clone();
        // The inner future sends nothing until it is polled: after the wait.
        let response = self.inner.call(request);
        Box::pin(async move {
            if spare_only {
                limits.take_spare(lane).await;
            } else if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            response.await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[test]
    fn bucket_allows_a_burst_then_the_sustained_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        let wait = b.reserve(t0);
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        // Reservations queue: the next waits for the one before it too.
        let wait = b.reserve(t0);
        assert!((wait.as_secs_f64() - 0.2).abs() < 1e-9, "{wait:?}");
        assert_eq!(b.reserve(t0 + Duration::from_millis(300)), Duration::ZERO);
        // Refill never exceeds the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.reserve(later), Duration::ZERO);
        }
        assert!(!b.reserve(later).is_zero());
    }

    #[test]
    fn lanes_follow_argos_clients() {
        for (path, lane) in [
            (
                "/apis/argoproj.io/v1alpha1/namespaces/a/rollouts/r/status",
                Lane::Argoproj,
            ),
            ("/api/v1/namespaces/a/events", Lane::Kubernetes),
            ("/api/v1/namespaces/a/services", Lane::Kubernetes),
            ("/apis/apps/v1/namespaces/a/replicasets", Lane::Kubernetes),
            (
                "/apis/networking.k8s.io/v1/namespaces/a/ingresses/i",
                Lane::Kubernetes,
            ),
            (
                "/apis/networking.istio.io/v1alpha3/namespaces/a/virtualservices/v",
                Lane::Dynamic,
            ),
            (
                "/apis/split.smi-spec.io/v1alpha1/namespaces/a/trafficsplits",
                Lane::Dynamic,
            ),
            ("/version", Lane::Kubernetes),
        ] {
            assert_eq!(Lane::of(path), lane, "{path}");
        }
    }

    fn request(path: &str) -> Request<()> {
        Request::get(path).body(()).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_tokens() {
        let svc =
            tower::service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(()) });
        let mut svc = RateLimitLayer::new(5.0, 2).layer(svc);
        let start = Instant::now();
        for _ in 0..6 {
            let response = svc.ready().await.unwrap().call(request("/api/v1/pods"));
            response.await.unwrap();
        }
        // 2 immediately, then 4 more at 5/s.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(790) && took < Duration::from_millis(900),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lane_waits_for_no_other() {
        let svc =
            tower::service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(()) });
        let mut svc = RateLimitLayer::new(1.0, 1).layer(svc);
        // Ten ReplicaSet writes queue for ten seconds...
        let mut queued = Vec::new();
        for _ in 0..10 {
            queued.push(
                svc.ready()
                    .await
                    .unwrap()
                    .call(request("/apis/apps/v1/replicasets")),
            );
        }
        // ...and a Rollout's status write goes at once.
        let start = Instant::now();
        let status = svc.ready().await.unwrap().call(request(
            "/apis/argoproj.io/v1alpha1/namespaces/a/rollouts/r/status",
        ));
        status.await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        futures::future::join_all(queued).await;
        assert!(
            start.elapsed() >= Duration::from_secs(9),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn only_event_writes_give_way() {
        use http::Method;
        for (method, path, yields) in [
            (Method::POST, "/api/v1/namespaces/a/events", true),
            (Method::PATCH, "/api/v1/namespaces/a/events/e.1", true),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/a/events",
                true,
            ),
            (Method::GET, "/api/v1/namespaces/a/events", false),
            (Method::POST, "/api/v1/namespaces/events/services", false),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/replicasets/r",
                false,
            ),
            (Method::POST, "/api/v1/namespaces", false),
        ] {
            assert_eq!(gives_way(&method, path), yields, "{method} {path}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_wait_for_the_writes_queued_before_and_after_them() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let seen = order.clone();
        let svc = tower::service_fn(move |req: Request<()>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(req.uri().path().to_string());
                Ok::<_, std::convert::Infallible>(())
            }
        });
        let mut svc = RateLimitLayer::new(10.0, 1).layer(svc);
        let post = |path: &str| Request::post(path).body(()).unwrap();
        let mut calls = Vec::new();
        calls.push(
            svc.ready()
                .await
                .unwrap()
                .call(post("/apis/apps/v1/replicasets/1")),
        );
        calls.push(
            svc.ready()
                .await
                .unwrap()
                .call(post("/api/v1/namespaces/a/events")),
        );
        for i in 2..5 {
            let path = format!("/apis/apps/v1/replicasets/{i}");
            calls.push(svc.ready().await.unwrap().call(post(&path)));
        }
        let start = Instant::now();
        futures::future::join_all(calls).await;
        let order = order.lock().unwrap().clone();
        assert_eq!(
            order.last().map(String::as_str),
            Some("/api/v1/namespaces/a/events"),
            "{order:?}"
        );
        // Five requests at 10/s from a burst of one: the same rate as in a FIFO.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(400) && took < Duration::from_millis(450),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn zero_qps_means_unlimited() {
        let svc =
            tower::service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(()) });
        let mut svc = RateLimitLayer::new(0.0, 1).layer(svc);
        let start = Instant::now();
        for _ in 0..100 {
            svc.ready()
                .await
                .unwrap()
                .call(request("/api/v1/pods"))
                .await
                .unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
