//! The Experiment controller as the simulation runs it: the controller's own driver
//! (`sluice_controller::loops::experiment_driver`, which its Experiment loop runs too) on the
//! simulated client. A reconcile observes the Experiment's ReplicaSets, Services and
//! AnalysisRuns and its analyses' templates from the API server, lets the engine decide, makes
//! every write of the plan in order (a failed one is reported back to the engine and the others
//! still go), then writes the status as a merge patch carrying the resourceVersion it was
//! decided on. Only the work queue and the clock are the simulation's.
//!
//! Its ReplicaSets are brought up by the ReplicaSet controller and kubelet stand-ins, its
//! AnalysisRuns measured by the simulated AnalysisRun controller. Like that one it stands apart
//! from the Rollout controller replicas (no crashes, no leader election) and runs one
//! reconcile per Experiment at a time, a change noticed meanwhile running it again afterwards.
//! Its requests travel with the network's latency, so a Rollout terminating the Experiment
//! meanwhile makes its status write a 409, and a ReplicaSet written by a third party refuses
//! its scale with one. Its replies are never lost: by Argo's rules a create that timed out
//! errs the Experiment, which would make the end state depend on the schedule rather than
//! on the scenario's inputs.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;
use sluice_api::common::AnalysisPhase;
use sluice_api::experiment::Experiment;
use sluice_controller::loops::driver::Requeue;
use sluice_controller::loops::experiment_driver::{self, ExperimentError, Reconciled};
use tracing::Instrument;

use crate::api_model::{ApiServer, Kind, WatchEvent, name_of};
use crate::net::{Request, Response};
use crate::side_loop::{Reconcile, SideLoop};

/// The span every reconcile of this loop runs in: whatever it sends is the Experiment loop's.
pub const LOOP_SPAN: &str = "sim_experiment_loop";

/// The loop's resync period (`--rollout-resync` default): the latest it looks again.
const RESYNC: Duration = Duration::from_secs(900);

pub fn phase_of(e: &Value) -> Option<AnalysisPhase> {
    e.pointer("/status/phase")
        .and_then(Value::as_str)
        .map(AnalysisPhase::from)
}

/// Successful, Failed or Error (Inconclusive too): the Experiment runs nothing any more.
pub fn is_finished(e: &Value) -> bool {
    phase_of(e).is_some_and(|p| p.is_completed())
}

/// The controller owner of `obj` when it is of `kind`.
pub use crate::kubelet::controller_of_kind as controller_owner;

/// Which Experiment a committed change makes the controller look at: the Experiment itself,
/// or the one controlling a ReplicaSet or AnalysisRun that changed, as the loop's watches map
/// them.
pub fn interested_in(kind: Kind, event: &WatchEvent) -> Option<String> {
    let obj = event.object();
    match kind {
        Kind::Experiment => Some(name_of(obj).to_string()),
        Kind::ReplicaSet | Kind::AnalysisRun => controller_owner(obj, "Experiment")?
            .get("name")?
            .as_str()
            .map(str::to_string),
        _ => None,
    }
}

/// What polling an Experiment's reconcile came to.
pub enum Polled {
    /// Nothing in flight for it, or it waits for a reply.
    Waiting,
    /// It sends this request.
    Send(Request),
    /// It finished; the Experiment is due again at `next_ms`, if ever.
    Done {
        /// The phase the Experiment moved to, when it changed.
        phase_change: Option<String>,
        failed_writes: Vec<String>,
        error: Option<String>,
        next_ms: Option<u64>,
    },
}

/// The controller's work queue and the reconciles in flight, each beside the phase it observed.
#[derive(Default)]
pub struct ExperimentController(
    SideLoop<Option<AnalysisPhase>, Result<Reconciled, ExperimentError>>,
);

impl ExperimentController {
    pub fn new() -> Self {
        Self(SideLoop::new())
    }

    /// Queues `name` for `at_ms`. Returns when to wake the controller for it, if that is sooner
    /// than it was already due.
    pub fn trigger(&mut self, name: &str, at_ms: u64) -> Option<u64> {
        self.0.trigger(name, at_ms)
    }

    /// Starts the reconcile of `name` if it is due at `now_ms`, on the Experiment as the API
    /// server has it now. Returns whether a reconcile started.
    pub fn start(&mut self, api: &ApiServer, name: &str, now_ms: u64, now: Timestamp) -> bool {
        self.0.start(name, now_ms, |w| {
            let observed = api
                .get(Kind::Experiment, name)
                .and_then(|v| serde_json::from_value::<Experiment>(v.clone()).ok())?;
            let phase = observed.status.as_ref().and_then(|s| s.phase.clone());
            let span = tracing::debug_span!(LOOP_SPAN, experiment = name);
            let future: Reconcile<_> = Box::pin(
                async move { experiment_driver::reconcile(&w, &observed, now).await }
                    .instrument(span),
            );
            Some((phase, future))
        })
    }

    /// Hands the reply to the reconcile of `name`.
    pub fn deliver(&mut self, name: &str, response: Response) {
        self.0.deliver(name, response);
    }

    /// Runs the reconcile of `name` until it sends a request or finishes; a finished one is
    /// queued again as the loop's requeue policy says (or at once if triggered meanwhile).
    pub fn poll(&mut self, name: &str, now_ms: u64) -> Polled {
        let requeue =
            |result: &Result<Reconciled, ExperimentError>| match experiment_driver::requeue(
                result, RESYNC,
            ) {
                Requeue::After(after) => Some(after),
                Requeue::AwaitChange => None,
            };
        let polled = self.0.poll(name, now_ms, requeue);
        polled.resolve(Polled::Waiting, Polled::Send, |done| match done.output {
            Ok(Reconciled::Applied {
                plan,
                failed_writes,
            }) => Polled::Done {
                phase_change: (plan.status.phase != done.context)
                    .then(|| plan.status.phase.map(|p| p.to_string()))
                    .flatten(),
                failed_writes,
                error: None,
                next_ms: done.next_ms,
            },
            // The side loop's gate never closes; were it to, the writes stopped.
            Ok(Reconciled::LostLeadership) => Polled::Done {
                phase_change: None,
                failed_writes: Vec::new(),
                error: Some("leadership lost".into()),
                next_ms: done.next_ms,
            },
            Err(e) => Polled::Done {
                phase_change: None,
                failed_writes: Vec::new(),
                error: Some(e.to_string()),
                next_ms: done.next_ms,
            },
        })
    }
}
