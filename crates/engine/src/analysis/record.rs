//! Writing measurement results into a run's status: a started measurement is appended, a
//! resumed or terminated one replaces the in-flight measurement it continues, and a finished
//! one moves the metric's counters.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::analysis::{AnalysisRunStatus, Measurement, MetricResult};
use sluice_api::common::AnalysisPhase;

use super::METRIC_TERMINATED;
use super::settings::MetricSettings;
use super::task::TaskKind;

/// A metric's counters as plain numbers (the status omits zeros, as Go does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub count: i32,
    pub successful: i32,
    pub failed: i32,
    pub inconclusive: i32,
    pub error: i32,
    pub consecutive_error: i32,
    pub consecutive_success: i32,
}

impl Counters {
    pub fn of(result: &MetricResult) -> Self {
        let n = |v: Option<i32>| v.unwrap_or(0);
        Self {
            count: n(result.count),
            successful: n(result.successful),
            failed: n(result.failed),
            inconclusive: n(result.inconclusive),
            error: n(result.error),
            consecutive_error: n(result.consecutive_error),
            consecutive_success: n(result.consecutive_success),
        }
    }

    fn write(self, result: &mut MetricResult) {
        let nz = |v: i32| (v != 0).then_some(v);
        result.count = nz(self.count);
        result.successful = nz(self.successful);
        result.failed = nz(self.failed);
        result.inconclusive = nz(self.inconclusive);
        result.error = nz(self.error);
        result.consecutive_error = nz(self.consecutive_error);
        result.consecutive_success = nz(self.consecutive_success);
    }

    /// Counts one finished measurement. Only Error leaves `count` alone; any other outcome
    /// breaks a run of errors, and anything but success breaks a run of successes.
    fn add(&mut self, phase: &AnalysisPhase) {
        match phase {
            AnalysisPhase::Successful => {
                self.successful += 1;
                self.count += 1;
                self.consecutive_error = 0;
                self.consecutive_success += 1;
            }
            AnalysisPhase::Failed => {
                self.failed += 1;
                self.count += 1;
                self.consecutive_error = 0;
                self.consecutive_success = 0;
            }
            AnalysisPhase::Inconclusive => {
                self.inconclusive += 1;
                self.count += 1;
                self.consecutive_error = 0;
                self.consecutive_success = 0;
            }
            AnalysisPhase::Error => {
                self.error += 1;
                self.consecutive_error += 1;
                self.consecutive_success = 0;
            }
            _ => {}
        }
    }
}

pub(crate) fn is_finished(phase: Option<&AnalysisPhase>) -> bool {
    phase.is_some_and(AnalysisPhase::is_completed)
}

/// The measurement still waiting for its outcome, if the metric has one.
pub(crate) fn in_flight(result: &MetricResult) -> Option<&Measurement> {
    result
        .measurements
        .as_deref()
        .and_then(<[Measurement]>::last)
        .filter(|m| !is_finished(m.phase.as_ref()))
}

/// Records provider results. Results for unknown metrics, a Start while a measurement is
/// still in flight, and a Resume or Terminate with nothing in flight are stale (decided on
/// an older status) and dropped, so that nothing is counted twice.
pub(crate) fn record(
    status: &mut AnalysisRunStatus,
    settings: &[MetricSettings],
    results: Vec<(String, TaskKind, Measurement)>,
    now: Timestamp,
) {
    for (metric, kind, mut measurement) in results {
        let Some(s) = settings.iter().find(|s| s.name == metric) else {
            continue;
        };
        let outcome = measurement
            .phase
            .clone()
            .filter(AnalysisPhase::is_completed);
        if outcome.is_some() && measurement.finished_at.is_none() {
            measurement.finished_at = Some(Time(now));
        }
        // Argo 1.10 words a terminated Inconclusive measurement (a Job cut short) the same way.
        if kind == TaskKind::Terminate
            && matches!(
                outcome,
                Some(AnalysisPhase::Successful | AnalysisPhase::Inconclusive)
            )
        {
            measurement.message = Some(METRIC_TERMINATED.to_owned());
        }
        let results = status.metric_results.get_or_insert_with(Vec::new);
        let index = match results
            .iter()
            .position(|r| r.name.as_deref() == Some(metric.as_str()))
        {
            Some(i) => i,
            None if kind == TaskKind::Start => {
                results.push(MetricResult {
                    name: Some(metric.clone()),
                    phase: Some(AnalysisPhase::Running),
                    dry_run: s.dry_run.then_some(true),
                    ..Default::default()
                });
                results.len() - 1
            }
            None => continue,
        };
        let result = &mut results[index];
        let has_in_flight = in_flight(result).is_some();
        let measurements = result.measurements.get_or_insert_with(Vec::new);
        match kind {
            TaskKind::Start if !has_in_flight => measurements.push(measurement),
            TaskKind::Resume | TaskKind::Terminate if has_in_flight => {
                if let Some(last) = measurements.last_mut() {
                    *last = measurement;
                }
            }
            _ => continue,
        }
        if let Some(outcome) = outcome {
            let mut counters = Counters::of(result);
            counters.add(&outcome);
            counters.write(result);
        }
    }
}

/// Drops the oldest measurements beyond each metric's retention limit. Counters are kept.
pub(crate) fn trim(status: &mut AnalysisRunStatus, settings: &[MetricSettings]) {
    for result in status.metric_results.iter_mut().flatten() {
        let Some(s) = settings
            .iter()
            .find(|s| Some(s.name.as_str()) == result.name.as_deref())
        else {
            continue;
        };
        if let Some(measurements) = result.measurements.as_mut()
            && measurements.len() > s.retention
        {
            let excess = measurements.len() - s.retention;
            measurements.drain(..excess);
        }
    }
}
