//! Client-side rate limiting of API requests (`--qps`, `--burst`), as client-go does it: a token
//! bucket holding up to `burst` tokens, refilled at `qps` per second; each request takes one and
//! waits, in order, when none is left.
//!
//! The limiter sits inside the client's request buffer, so it is the single place every request
//! passes through: while it waits, later requests queue behind it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
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

    /// Takes a token at `now`, or says how long to wait until one is available.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// Tower layer applying a [`TokenBucket`]; `qps <= 0` means unlimited.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    qps: f64,
    burst: u32,
}

impl RateLimitLayer {
    pub fn new(qps: f32, burst: u32) -> RateLimitLayer {
        RateLimitLayer {
            qps: f64::from(qps),
            burst,
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: (self.qps > 0.0)
                .then(|| TokenBucket::new(self.qps, self.burst, Instant::now())),
            permitted: false,
            sleep: None,
        }
    }
}

pub struct RateLimit<S> {
    inner: S,
    bucket: Option<TokenBucket>,
    /// A token was taken for the next call.
    permitted: bool,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            if self.permitted || self.bucket.is_none() {
                return self.inner.poll_ready(cx);
            }
            if let Some(sleep) = self.sleep.as_mut() {
                ready!(sleep.as_mut().poll(cx));
                self.sleep = None;
            }
            let Some(bucket) = self.bucket.as_mut() else {
                continue;
            };
            match bucket.take(Instant::now()) {
                Ok(()) => self.permitted = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
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
            assert_eq!(b.take(t0), Ok(()));
        }
        let wait = b.take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(b.take(t0 + Duration::from_millis(100)), Ok(()));
        // Refill never exceeds the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.take(later), Ok(()));
        }
        assert!(b.take(later).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_tokens() {
        let svc = tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(()) });
        let mut svc = RateLimitLayer::new(5.0, 2).layer(svc);
        let start = Instant::now();
        for _ in 0..6 {
            svc.ready().await.unwrap().call(()).await.unwrap();
        }
        // 2 immediately, then 4 more at 5/s.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(790) && took < Duration::from_millis(900),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn zero_qps_means_unlimited() {
        let svc = tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(()) });
        let mut svc = RateLimitLayer::new(0.0, 1).layer(svc);
        let start = Instant::now();
        for _ in 0..100 {
            svc.ready().await.unwrap().call(()).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
