//! Judging: a metric's phase from its counters and last measurement, and the run's phase,
//! message and summaries from its metrics.

use sluice_api::analysis::{AnalysisRunStatus, MetricResult, RunSummary};
use sluice_api::common::AnalysisPhase;

use super::RUN_TERMINATED;
use super::record::{Counters, in_flight};
use super::settings::MetricSettings;

/// Rank of a finished phase, best first (Argo's order). Unknown phases rank as best.
fn rank(phase: &AnalysisPhase) -> u8 {
    match phase {
        AnalysisPhase::Successful => 0,
        AnalysisPhase::Running => 1,
        AnalysisPhase::Pending => 2,
        AnalysisPhase::Inconclusive => 3,
        AnalysisPhase::Error => 4,
        AnalysisPhase::Failed => 5,
        AnalysisPhase::Other(_) => 0,
    }
}

/// Whether `candidate` is a worse outcome than `current`.
pub(crate) fn is_worse(current: &AnalysisPhase, candidate: &AnalysisPhase) -> bool {
    rank(candidate) > rank(current)
}

/// The phase of one metric. A finished phase never changes.
pub(crate) fn metric_phase(
    m: &MetricSettings,
    result: &MetricResult,
    terminating: bool,
) -> AnalysisPhase {
    if let Some(phase) = result.phase.as_ref().filter(|p| p.is_completed()) {
        return phase.clone();
    }
    if result
        .measurements
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        // Stopped before its first measurement: nothing went wrong.
        return if terminating {
            AnalysisPhase::Successful
        } else {
            AnalysisPhase::Pending
        };
    }
    if in_flight(result).is_some() {
        return AnalysisPhase::Running;
    }
    if let Some((phase, _)) = limit_breach(m, result) {
        return phase;
    }
    let c = Counters::of(result);
    if m.success_limit_applies() && c.consecutive_success >= m.consecutive_success_limit {
        return AnalysisPhase::Successful;
    }
    if m.count_reached(c.count) {
        // Neither limit was hit within the count: with both limits in play nobody won, and
        // with only the success limit the metric never got there.
        return match (m.failure_limit_applies(), m.success_limit_applies()) {
            (true, true) => AnalysisPhase::Inconclusive,
            (false, true) => AnalysisPhase::Failed,
            _ => AnalysisPhase::Successful,
        };
    }
    if terminating {
        AnalysisPhase::Successful
    } else {
        AnalysisPhase::Running
    }
}

/// The limit a metric's counters exceed. Checked failed → inconclusive → consecutive errors;
/// the last one exceeded decides.
fn limit_breach(m: &MetricSettings, result: &MetricResult) -> Option<(AnalysisPhase, String)> {
    let c = Counters::of(result);
    let mut breach = None;
    if m.failure_limit_applies() && c.failed > m.failure_limit {
        breach = Some((
            AnalysisPhase::Failed,
            format!("failed ({}) > failureLimit ({})", c.failed, m.failure_limit),
        ));
    }
    if c.inconclusive > m.inconclusive_limit {
        breach = Some((
            AnalysisPhase::Inconclusive,
            format!(
                "inconclusive ({}) > inconclusiveLimit ({})",
                c.inconclusive, m.inconclusive_limit
            ),
        ));
    }
    if c.consecutive_error > m.consecutive_error_limit {
        breach = Some((
            AnalysisPhase::Error,
            format!(
                "consecutiveErrors ({}) > consecutiveErrorLimit ({})",
                c.consecutive_error, m.consecutive_error_limit
            ),
        ));
    }
    breach
}

/// Why a finished metric did not simply succeed, for the run's message.
fn reason(m: &MetricSettings, result: &MetricResult) -> Option<String> {
    if let Some((_, why)) = limit_breach(m, result) {
        return Some(why);
    }
    let c = Counters::of(result);
    (m.count_reached(c.count)
        && m.success_limit_applies()
        && c.consecutive_success < m.consecutive_success_limit)
        .then(|| {
            format!(
                "consecutiveSuccess ({}) < consecutiveSuccessLimit ({}) after count ({}) reached",
                c.consecutive_success, m.consecutive_success_limit, c.count
            )
        })
}

/// The run's phase and message, and its summaries.
pub(crate) struct RunVerdict {
    pub phase: AnalysisPhase,
    pub message: String,
    pub summary: RunSummary,
    pub dry_run_summary: RunSummary,
}

#[derive(Default)]
struct Tally {
    count: i32,
    successful: i32,
    failed: i32,
    inconclusive: i32,
    error: i32,
}

impl Tally {
    fn add(&mut self, phase: &AnalysisPhase) {
        match phase {
            AnalysisPhase::Failed => self.failed += 1,
            AnalysisPhase::Inconclusive => self.inconclusive += 1,
            AnalysisPhase::Error => self.error += 1,
            _ => self.successful += 1,
        }
    }

    fn summary(&self) -> RunSummary {
        let nz = |v: i32| (v != 0).then_some(v);
        RunSummary {
            count: nz(self.count),
            successful: nz(self.successful),
            failed: nz(self.failed),
            inconclusive: nz(self.inconclusive),
            error: nz(self.error),
        }
    }
}

/// Updates every metric's phase (and, on a change, its message from the last measurement),
/// then judges the run: Running while any metric is unfinished, otherwise the worst metric
/// phase. Dry-run metrics never make the run worse. A terminating run ends at once with the
/// worst phase so far, or Successful.
pub(crate) fn judge(
    status: &mut AnalysisRunStatus,
    settings: &[MetricSettings],
    terminate_requested: bool,
    terminating: bool,
) -> RunVerdict {
    let mut worst: Option<AnalysisPhase> = None;
    let mut message = if terminate_requested {
        RUN_TERMINATED.to_owned()
    } else {
        String::new()
    };
    let mut all_finished = true;
    let mut tally = Tally::default();
    let mut dry_tally = Tally::default();
    let mut results = status.metric_results.take().unwrap_or_default();

    for m in settings {
        let counts = if m.dry_run {
            &mut dry_tally
        } else {
            &mut tally
        };
        counts.count += 1;
        let Some(result) = results
            .iter_mut()
            .find(|r| r.name.as_deref() == Some(m.name.as_str()))
        else {
            all_finished = false;
            continue;
        };
        let phase = metric_phase(m, result, terminating);
        if result.phase.as_ref() != Some(&phase) {
            result.message = result
                .measurements
                .as_deref()
                .and_then(<[_]>::last)
                .and_then(|last| last.message.clone())
                .filter(|s| !s.is_empty());
            result.phase = Some(phase.clone());
        }
        if !phase.is_completed() {
            all_finished = false;
            continue;
        }
        counts.add(&phase);
        let why = reason(m, result);
        if m.dry_run {
            worst.get_or_insert(AnalysisPhase::Successful);
            if let Some(why) = why {
                result.message = Some(format!("Metric assessed {phase} due to {why}"));
            }
        } else if worst.as_ref().is_none_or(|w| is_worse(w, &phase)) {
            worst = Some(phase.clone());
            if let Some(why) = why {
                message = format!("Metric \"{}\" assessed {phase} due to {why}", m.name);
                if let Some(detail) = result.message.as_deref() {
                    message.push_str(&format!(": \"Error Message: {detail}\""));
                }
            }
        }
    }
    status.metric_results = (!results.is_empty()).then_some(results);

    let (phase, message) = if terminating {
        (worst.unwrap_or(AnalysisPhase::Successful), message)
    } else {
        match worst {
            Some(worst) if all_finished => (worst, message),
            _ => (AnalysisPhase::Running, String::new()),
        }
    };
    RunVerdict {
        phase,
        message,
        summary: tally.summary(),
        dry_run_summary: dry_tally.summary(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_phase_order() {
        use AnalysisPhase::*;
        let order = [Successful, Running, Pending, Inconclusive, Error, Failed];
        for (i, better) in order.iter().enumerate() {
            for worse in &order[i + 1..] {
                assert!(
                    is_worse(better, worse),
                    "{worse} should be worse than {better}"
                );
                assert!(
                    !is_worse(worse, better),
                    "{better} should not be worse than {worse}"
                );
            }
        }
        assert!(!is_worse(&Successful, &Other("Unknown".into())));
    }
}
