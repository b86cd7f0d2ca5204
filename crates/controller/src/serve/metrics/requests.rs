//! A tower layer on the controller's HTTP client counting every API request by its Argo
//! labels and response status, and timing it.
//!
//! The layer sits above kube's own retries of 429, 503 and 504 answers: a throttled API server,
//! or one waiting on a stalled etcd, shows here as a slow request that ends well, not as an
//! error. A request slower than [`SLOW_REQUEST`] is logged, so that the log says why the
//! controller stood still.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use tower::{BoxError, Layer, Service};
use tracing::warn;

use super::Metrics;
use super::argo::RequestInfo;

/// A request that took longer than this is logged (a watch: to its first bytes). Healthy
/// requests take milliseconds; a retried 429 or a stalled etcd takes seconds.
pub const SLOW_REQUEST: Duration = Duration::from_secs(5);

/// Tower layer counting every API request by its Argo labels and response status.
#[derive(Clone)]
pub struct RequestMetricsLayer {
    metrics: Arc<Metrics>,
}

impl RequestMetricsLayer {
    pub fn new(metrics: Arc<Metrics>) -> RequestMetricsLayer {
        RequestMetricsLayer { metrics }
    }
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RequestMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, RB> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let info = RequestInfo::parse(request.method(), request.uri());
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await.map_err(Into::into);
            let took = started.elapsed();
            let status = match &result {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            if took > SLOW_REQUEST {
                warn!(
                    verb = %info.verb, kind = %info.kind, namespace = %info.namespace,
                    name = %info.name, status = %status, took = ?took,
                    "slow Kubernetes API request (throttled, retried or the API server waiting on etcd)"
                );
            }
            // No answer, the API server unavailable, or a watch that took seconds to start
            // (kube's client retried it through an outage below this layer): the watches
            // list again once a request is answered promptly.
            let trouble = status == "error"
                || status == "503"
                || (info.verb == "Watch" && took > SLOW_REQUEST);
            crate::cache::note_api_server(trouble, took <= SLOW_REQUEST);
            metrics.observe_request_duration(&info.verb, took);
            metrics.count_request(info, &status);
            result
        })
    }
}
