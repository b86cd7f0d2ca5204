//! The AnalysisRun state machine.
//!
//! `next_tasks` says which measurements are due; the caller has providers start, resume or
//! terminate them and passes the resulting measurements to `assess`, which records them,
//! judges every metric and the run, and says when to come back.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sluice_api::AnalysisRun;
use sluice_api::analysis::{AnalysisRunSpec, AnalysisRunStatus, Measurement, MetricResult};
use sluice_api::common::AnalysisPhase;
use sluice_api::time::whole_seconds;

use super::record::{self, Counters, in_flight};
use super::settings::{MetricSettings, metric_settings};
use super::task::{MetricTask, TaskKind};
use super::{ERROR_RETRY_INTERVAL, IN_FLIGHT_POLL_INTERVAL, phase};

/// What one assessment decided.
#[derive(Debug, Clone, PartialEq)]
pub struct RunAssessment {
    /// The status the run should have now.
    pub status: AnalysisRunStatus,
    /// Come back after this long: the earliest time a measurement falls due. `None` once the
    /// run is complete.
    pub requeue_after: Option<Duration>,
    /// The run reached a final phase.
    pub completed: bool,
    /// When the finished run should be deleted, from its `ttlStrategy`.
    pub delete_at: Option<Timestamp>,
}

/// When a metric next needs a provider.
enum Due {
    Never,
    /// Due at once, with no time of its own.
    Now(TaskKind),
    At(Timestamp, TaskKind),
}

/// Whether the run is stopping: termination was requested, or a metric that is not in
/// dry-run mode ended Failed, Error or Inconclusive.
pub fn is_terminating(run: &AnalysisRun) -> bool {
    match &run.status {
        Some(status) => terminating(&run.spec, status),
        None => run.spec.is_terminating(),
    }
}

fn terminating(spec: &AnalysisRunSpec, status: &AnalysisRunStatus) -> bool {
    spec.is_terminating()
        || status.metric_results.iter().flatten().any(|r| {
            r.dry_run != Some(true)
                && matches!(
                    r.phase,
                    Some(
                        AnalysisPhase::Failed | AnalysisPhase::Error | AnalysisPhase::Inconclusive
                    )
                )
        })
}

/// The measurements to start, resume or terminate at `now`, in metric order. Nothing for a
/// finished or invalid run.
pub fn next_tasks(run: &AnalysisRun, now: Timestamp) -> Vec<MetricTask> {
    let status = run.status.clone().unwrap_or_default();
    if record::is_finished(status.phase.as_ref()) {
        return Vec::new();
    }
    let Ok(settings) = metric_settings(run) else {
        return Vec::new();
    };
    let stopping = terminating(&run.spec, &status);
    let started_at = status.started_at.as_ref().map_or(now, |t| t.0);
    settings
        .iter()
        .filter_map(|m| {
            let kind = match metric_due(m, status.metric_result(&m.name), started_at, stopping) {
                Due::Never => return None,
                Due::Now(kind) => kind,
                Due::At(at, kind) if at <= now => kind,
                Due::At(..) => return None,
            };
            Some(MetricTask {
                metric: m.name.clone(),
                kind,
            })
        })
        .collect()
}

fn metric_due(
    m: &MetricSettings,
    result: Option<&MetricResult>,
    started_at: Timestamp,
    stopping: bool,
) -> Due {
    if result.is_some_and(|r| record::is_finished(r.phase.as_ref())) {
        return Due::Never;
    }
    if let Some(pending) = result.and_then(in_flight) {
        // Termination does not wait for a provider's resumeAt.
        return match (stopping, &pending.resume_at) {
            (true, _) => Due::Now(TaskKind::Terminate),
            (false, Some(at)) => Due::At(at.0, TaskKind::Resume),
            (false, None) => Due::Now(TaskKind::Resume),
        };
    }
    if stopping {
        return Due::Never;
    }
    let last = result
        .and_then(|r| r.measurements.as_deref())
        .and_then(<[Measurement]>::last);
    let Some(last) = last else {
        return match m.initial_delay {
            Some(delay) => Due::At(add(started_at, delay), TaskKind::Start),
            None => Due::Now(TaskKind::Start),
        };
    };
    if m.count_reached(result.map(Counters::of).unwrap_or_default().count) {
        return Due::Never;
    }
    let wait = match (&last.phase, m.interval) {
        (Some(AnalysisPhase::Error), _) => ERROR_RETRY_INTERVAL,
        (_, Some(interval)) => interval,
        // A single measurement that did not count (cannot happen once recorded): nothing to repeat.
        (_, None) => return Due::Never,
    };
    match &last.finished_at {
        Some(finished) => Due::At(add(finished.0, wait), TaskKind::Start),
        None => Due::Now(TaskKind::Start),
    }
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// Records `results` (from the tasks `next_tasks` gave), then judges the metrics and the run.
///
/// A run already complete is returned unchanged. An invalid spec, or placeholders that cannot
/// be resolved, end the run in Error with a message saying why.
pub fn assess(
    run: &AnalysisRun,
    results: Vec<(String, TaskKind, Measurement)>,
    now: Timestamp,
) -> RunAssessment {
    let now = whole_seconds(now);
    let mut status = run.status.clone().unwrap_or_default();
    if record::is_finished(status.phase.as_ref()) {
        return finished(run, status);
    }
    let settings = match metric_settings(run) {
        Ok(settings) => settings,
        Err(message) => {
            status.phase = Some(AnalysisPhase::Error);
            status.message = Some(message);
            status.started_at.get_or_insert(Time(now));
            status.completed_at.get_or_insert(Time(now));
            return finished(run, status);
        }
    };

    record::record(&mut status, &settings, results, now);
    // Judged on the metric phases as they were before this assessment, as Argo does: a metric
    // failing now makes the run terminate on the next pass, after in-flight work is stopped.
    let was_terminating = terminating(&run.spec, &status);
    status.started_at.get_or_insert(Time(now));
    let verdict = phase::judge(
        &mut status,
        &settings,
        run.spec.is_terminating(),
        was_terminating,
    );
    if status.phase.as_ref() != Some(&verdict.phase) {
        status.phase = Some(verdict.phase);
        status.message = (!verdict.message.is_empty()).then_some(verdict.message);
    }
    status.run_summary = Some(verdict.summary);
    status.dry_run_summary = Some(verdict.dry_run_summary);
    record::trim(&mut status, &settings);

    if record::is_finished(status.phase.as_ref()) {
        status.completed_at.get_or_insert(Time(now));
        return finished(run, status);
    }
    let requeue_after = requeue_after(&run.spec, &status, &settings, now);
    RunAssessment {
        status,
        requeue_after,
        completed: false,
        delete_at: None,
    }
}

fn finished(run: &AnalysisRun, status: AnalysisRunStatus) -> RunAssessment {
    let delete_at = delete_at(&run.spec, &status);
    RunAssessment {
        status,
        requeue_after: None,
        completed: true,
        delete_at,
    }
}

/// The earliest time any metric needs a provider again.
fn requeue_after(
    spec: &AnalysisRunSpec,
    status: &AnalysisRunStatus,
    settings: &[MetricSettings],
    now: Timestamp,
) -> Option<Duration> {
    let stopping = terminating(spec, status);
    if stopping {
        // Whatever is left (stopping in-flight measurements, then the final verdict) is due now.
        return Some(Duration::ZERO);
    }
    let started_at = status.started_at.as_ref().map_or(now, |t| t.0);
    settings
        .iter()
        .filter_map(
            |m| match metric_due(m, status.metric_result(&m.name), started_at, false) {
                Due::Never => None,
                Due::At(at, _) => Some(at),
                // In flight with no resumeAt: poll. Never started though due: the provider gave
                // no result, so try again later rather than spin.
                Due::Now(TaskKind::Resume) => Some(add(now, IN_FLIGHT_POLL_INTERVAL)),
                Due::Now(_) => Some(add(now, ERROR_RETRY_INTERVAL)),
            },
        )
        .min()
        .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or_default())
}

/// `completedAt` plus the TTL that applies to the final phase: `secondsAfterSuccess` for
/// Successful, `secondsAfterFailure` for Failed, else `secondsAfterCompletion`.
fn delete_at(spec: &AnalysisRunSpec, status: &AnalysisRunStatus) -> Option<Timestamp> {
    let ttl = spec.ttl_strategy.as_ref()?;
    let completed_at = status.completed_at.as_ref()?.0;
    let seconds = match status.phase.as_ref()? {
        AnalysisPhase::Successful if ttl.seconds_after_success.is_some() => {
            ttl.seconds_after_success
        }
        AnalysisPhase::Failed if ttl.seconds_after_failure.is_some() => ttl.seconds_after_failure,
        _ => ttl.seconds_after_completion,
    }?;
    completed_at
        .checked_add(jiff::SignedDuration::from_secs(i64::from(seconds)))
        .ok()
}

#[cfg(test)]
mod tests;
