//! The AnalysisRun controller as the simulation runs it: the real driver
//! (`sluice_controller::loops::analysis_run_driver`: `next_tasks` → measure → `assess` → the
//! status written with the resourceVersion it was decided on → deletion after `ttlStrategy`)
//! with a scripted measurer standing in for the metric providers, the way the ReplicaSet
//! controller and kubelet stand in for the cluster.
//!
//! The measurer reads the scenario's [`MeasureScript`]: the value a provider reports for each
//! measurement of a metric, in order, judged with the metric's own `successCondition` and
//! `failureCondition` (so an Inconclusive verdict comes from a value that meets neither), or a
//! provider error. Verdicts, limits, messages and termination are the engine's.
//!
//! Its writes travel as requests with the network's latency, so a run changed meanwhile (a
//! Rollout terminating it, a promote annotating it) refuses a stale status write with a 409,
//! as the API server does. It runs one reconcile per run at a time; a change noticed during
//! one runs it again afterwards, as kube's controller runtime does. It does not crash or take
//! part in leader election: it stands apart from the Rollout controller replicas.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use sluice_analysis::{evaluate_metric, json_to_value};
use sluice_api::analysis::{AnalysisRun, Measurement};
use sluice_api::common::AnalysisPhase;
use sluice_api::time::whole_seconds;
use sluice_controller::cluster::WriteError;
use sluice_controller::loops::analysis_run_driver::{
    self, MeasurementResult, Measurer, RunReconciled,
};
use sluice_controller::loops::driver::Requeue;
use sluice_engine::analysis::{MetricTask, TaskKind, in_flight_measurement};

use crate::api_model::{ApiServer, Kind, WatchEvent};
use crate::net::{Request, Response};
use crate::side_loop::{Reconcile, SideLoop};

/// What a provider reports for one measurement.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// The query's result (e.g. `[0.97]`), judged with the metric's conditions.
    Value(Value),
    /// The provider could not measure: an Error measurement with this message.
    Error(String),
}

/// What the scenario scripts for every run.
#[derive(Debug, Clone)]
pub struct MeasureScript {
    /// How long the controller takes to notice a change to a run.
    pub notice_ms: (u64, u64),
    /// The readings of each metric, one per measurement in order; the last one repeats.
    pub readings: Vec<Reading>,
}

impl Default for MeasureScript {
    fn default() -> Self {
        Self {
            notice_ms: (5, 1_000),
            readings: vec![Reading::Value(json!([0.99]))],
        }
    }
}

impl MeasureScript {
    /// The reading of the measurement after `taken` finished ones.
    pub fn reading(&self, taken: usize) -> Option<&Reading> {
        self.readings.get(taken).or(self.readings.last())
    }
}

pub fn phase_of(run: &Value) -> Option<AnalysisPhase> {
    run.pointer("/status/phase")
        .and_then(Value::as_str)
        .map(AnalysisPhase::from)
}

pub fn is_finished(run: &Value) -> bool {
    phase_of(run).is_some_and(|p| p.is_completed())
}

/// Which run a committed change makes the controller look at: every run it sees change, as
/// the real controller watches them all (a finished one may still be due for deletion).
pub fn interested_in(kind: Kind, event: &WatchEvent) -> Option<String> {
    match (kind, event) {
        (Kind::AnalysisRun, WatchEvent::Applied(run)) => {
            Some(crate::api_model::name_of(run).to_string())
        }
        _ => None,
    }
}

/// The providers' stand-in: measures from the script at the reconcile's time.
#[derive(Debug, Clone)]
pub struct ScriptedMeasurer {
    pub script: MeasureScript,
    pub now: Timestamp,
}

impl ScriptedMeasurer {
    /// How many measurements of `metric` have finished, errors included: which reading is next.
    fn taken(run: &AnalysisRun, metric: &str) -> usize {
        let Some(result) = run.status.as_ref().and_then(|s| s.metric_result(metric)) else {
            return 0;
        };
        let n = result.count.unwrap_or(0) + result.error.unwrap_or(0);
        usize::try_from(n).unwrap_or(0)
    }

    fn measurement(&self, phase: AnalysisPhase) -> Measurement {
        // Stored with second precision, as the API server keeps metav1.Time.
        let now = Time(whole_seconds(self.now));
        Measurement {
            phase: Some(phase),
            started_at: Some(now.clone()),
            finished_at: Some(now),
            ..Default::default()
        }
    }

    fn start(&self, run: &AnalysisRun, metric: &str) -> Measurement {
        let spec = run
            .spec
            .metrics
            .iter()
            .flatten()
            .find(|m| m.name.as_deref() == Some(metric));
        let (Some(spec), Some(reading)) = (spec, self.script.reading(Self::taken(run, metric)))
        else {
            let mut m = self.measurement(AnalysisPhase::Error);
            m.message = Some(format!("metric {metric:?} has nothing to measure"));
            return m;
        };
        match reading {
            Reading::Value(value) => {
                // As a provider judges its result: the conditions decide, a bad one is an Error.
                let (phase, message) = match evaluate_metric(spec, &json_to_value(value)) {
                    Ok(phase) => (phase, None),
                    Err(e) => (AnalysisPhase::Error, Some(e.0)),
                };
                let mut m = self.measurement(phase);
                m.value = Some(value.to_string());
                m.message = message;
                m
            }
            Reading::Error(message) => {
                let mut m = self.measurement(AnalysisPhase::Error);
                m.message = Some(message.clone());
                m
            }
        }
    }
}

impl Measurer for ScriptedMeasurer {
    async fn measure(&self, run: &AnalysisRun, tasks: Vec<MetricTask>) -> Vec<MeasurementResult> {
        tasks
            .into_iter()
            .map(|task| {
                let m = match task.kind {
                    TaskKind::Start => self.start(run, &task.metric),
                    // Scripted measurements finish at once, as synchronous providers' do; one
                    // left in flight is handed back unchanged, as those providers do.
                    TaskKind::Resume | TaskKind::Terminate => {
                        in_flight_measurement(run, &task.metric).unwrap_or_else(|| {
                            let mut m = self.measurement(AnalysisPhase::Error);
                            m.message =
                                Some(format!("metric {:?} has no measurement", task.metric));
                            m
                        })
                    }
                };
                (task.metric, task.kind, m)
            })
            .collect()
    }

    async fn collect_garbage(&self, _run: &AnalysisRun, _metric: &str, _kept: usize) {
        // Scripted measurements leave nothing behind.
    }
}

/// What polling a run's reconcile came to.
pub enum Polled {
    /// Nothing in flight for the run, or it waits for a reply.
    Waiting,
    /// It sends this request.
    Send(Request),
    /// It finished; the run is due again at `next_ms`, if ever.
    Done {
        /// The phase and message the run moved to, when its phase changed.
        phase_change: Option<(String, String)>,
        error: Option<WriteError>,
        next_ms: Option<u64>,
    },
}

/// The controller's work queue and the reconciles in flight, each beside the run as it
/// observed it.
#[derive(Default)]
pub struct RunController(SideLoop<AnalysisRun, Result<RunReconciled, WriteError>>);

impl RunController {
    pub fn new() -> Self {
        Self(SideLoop::new())
    }

    /// Queues `name` for `at_ms`. Returns when to wake the controller for it, if that is sooner
    /// than it was already due.
    pub fn trigger(&mut self, name: &str, at_ms: u64) -> Option<u64> {
        self.0.trigger(name, at_ms)
    }

    /// Starts the reconcile of `name` if it is due at `now_ms` (a wake-up for an earlier
    /// schedule that has moved finds nothing due). The run is observed as the API server has
    /// it now. Returns whether a reconcile started.
    pub fn start(
        &mut self,
        api: &ApiServer,
        name: &str,
        now_ms: u64,
        now: Timestamp,
        script: &MeasureScript,
    ) -> bool {
        self.0.start(name, now_ms, |w| {
            let observed = api
                .get(Kind::AnalysisRun, name)
                .and_then(|v| serde_json::from_value::<AnalysisRun>(v.clone()).ok())?;
            let measurer = ScriptedMeasurer {
                script: script.clone(),
                now,
            };
            let run = observed.clone();
            let future =
                async move { analysis_run_driver::reconcile(&w, &measurer, &run, now).await };
            let future: Reconcile<_> = Box::pin(future);
            Some((observed, future))
        })
    }

    /// Hands the reply to the reconcile of `name`.
    pub fn deliver(&mut self, name: &str, response: Response) {
        self.0.deliver(name, response);
    }

    /// Runs the reconcile of `name` until it sends a request or finishes; a finished one is
    /// queued again as the driver's requeue policy says (or at once if triggered meanwhile).
    pub fn poll(&mut self, name: &str, now_ms: u64) -> Polled {
        let requeue = |result: &_| match analysis_run_driver::requeue(result) {
            Requeue::After(after) => Some(after),
            Requeue::AwaitChange => None,
        };
        let polled = self.0.poll(name, now_ms, requeue);
        polled.resolve(Polled::Waiting, Polled::Send, |done| {
            let (phase_change, error) = match done.output {
                Ok(r) => (
                    r.phase_change(&done.context)
                        .map(|(p, m)| (p.to_string(), m.to_string())),
                    None,
                ),
                Err(e) => (None, Some(e)),
            };
            Polled::Done {
                phase_change,
                error,
                next_ms: done.next_ms,
            }
        })
    }
}

#[cfg(test)]
mod tests;
