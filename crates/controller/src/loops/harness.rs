//! The one shell every watch-driven loop runs in, in the shape of kube-runtime's
//! `Controller::run(reconcile, error_policy, context)`: a loop builds its `Controller` (what it
//! watches, what triggers what) and gives a [`Reconciler`]; the harness does the rest the same
//! way for all: a new leader reconciles everything, the loop stops with the process, a
//! reconcile made while leading is counted and timed in the loop's metrics, a failed one is
//! logged and retried.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

use super::Hooks;
use crate::serve::metrics::Queue;

/// What differs from one loop to the next.
pub trait Reconciler: Send + Sync + 'static {
    /// The kind the loop reconciles.
    type Object: Resource<DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static;
    type Error: std::error::Error + Send + Sync + 'static;

    /// The work queue the loop's reconciles are counted in (`workqueue_*`, and the kind's
    /// `*_reconcile` histogram and `*_reconcile_error` counter).
    const QUEUE: Queue;
    /// How soon a reconcile that failed is tried again.
    const RETRY: Duration;

    fn hooks(&self) -> &Hooks;

    /// One reconcile of `object`: what to do next, or why it failed.
    fn reconcile(
        self: Arc<Self>,
        object: Arc<Self::Object>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

/// Runs `controller` with `reconciler` until the process stops.
pub async fn run<R: Reconciler>(controller: Controller<R::Object>, reconciler: Arc<R>) {
    let hooks = reconciler.hooks().clone();
    // A new leader reconciles everything: as a follower it decided nothing.
    let controller = controller
        .reconcile_all_on(hooks.gate.acquisitions())
        .trigger_backoff(EachWatchBacksOffAlone);
    let kind = R::Object::kind(&());
    hooks
        .with_shutdown(controller)
        .run(reconcile_with_metrics, error_policy, reconciler)
        .for_each(|result| async move {
            match result {
                // The object's reference names its kind.
                Ok((object, _)) => debug!(%object, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile failed"),
            }
        })
        .await;
    info!(%kind, "loop stopped");
}

/// The backoff of a loop's merged triggers: none. Every watch a loop builds already backs off
/// on its own errors (`default_backoff()`). kube-runtime's default backs off the merged stream
/// too, so one watch's error paused every watch of the loop, and their caches with them: after
/// an API server restart each watch's resume from a revision the new server no longer has
/// (410) paused the whole loop for up to half a minute at a time, its caches stayed stale and
/// every status write conflicted; the loop did not recover within minutes (issue found by the
/// control-plane fault test: the API server killed and restarted).
struct EachWatchBacksOffAlone;

impl Iterator for EachWatchBacksOffAlone {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // `None` would end the trigger stream; zero passes the error on without waiting.
        Some(Duration::ZERO)
    }
}

impl kube::runtime::utils::Backoff for EachWatchBacksOffAlone {
    fn reset(&mut self) {}
}

/// [`Reconciler::reconcile`], counted as work of the loop's queue and timed into its metrics
/// while this replica leads (a follower's reconcile only waits, which says nothing of
/// reconcile performance).
async fn reconcile_with_metrics<R: Reconciler>(
    object: Arc<R::Object>,
    reconciler: Arc<R>,
) -> Result<Action, R::Error> {
    let hooks = reconciler.hooks().clone();
    if !hooks.gate.is_open() {
        return reconciler.reconcile(object).await;
    }
    let _work = hooks.begin_work(R::QUEUE);
    let started = Instant::now();
    let result = reconciler.reconcile(object.clone()).await;
    hooks.record_reconcile(R::QUEUE, object.meta(), started.elapsed(), result.is_err());
    result
}

fn error_policy<R: Reconciler>(object: Arc<R::Object>, error: &R::Error, _: Arc<R>) -> Action {
    let kind = R::Object::kind(&());
    warn!(%kind, name = %object.name_any(), namespace = object.namespace().unwrap_or_default(), %error, "reconcile failed, retrying");
    Action::requeue(R::RETRY)
}
