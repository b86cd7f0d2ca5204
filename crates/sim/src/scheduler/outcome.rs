//! What a run reports: counters, violations, the trace, and how to replay it.

use super::TRACE_TAIL;
use crate::invariants::Violation;

/// Counters for reports.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub events: u64,
    pub reconciles: u64,
    pub controller_writes: u64,
    pub conflicts: u64,
    pub crashes: u64,
    pub partitions: u64,
    pub leader_changes: u64,
    pub watch_breaks: u64,
    pub sim_ms: u64,
    /// Notifications the recording service delivered, repeats included.
    pub notifications_delivered: u64,
    /// Repeats from a sender that stopped between a send and its record (exempt from
    /// at-most-once).
    pub notification_window_repeats: u64,
    /// Notifications of events whose publisher stopped before recording them as pending
    /// (exempt from at-least-once).
    pub notifications_lost_unwritten: u64,
}

impl Stats {
    /// Adds another run's counters.
    pub fn add(&mut self, o: &Stats) {
        self.events += o.events;
        self.reconciles += o.reconciles;
        self.controller_writes += o.controller_writes;
        self.conflicts += o.conflicts;
        self.crashes += o.crashes;
        self.partitions += o.partitions;
        self.leader_changes += o.leader_changes;
        self.watch_breaks += o.watch_breaks;
        self.sim_ms += o.sim_ms;
        self.notifications_delivered += o.notifications_delivered;
        self.notification_window_repeats += o.notification_window_repeats;
        self.notifications_lost_unwritten += o.notifications_lost_unwritten;
    }
}

/// The result of one seed.
#[derive(Debug)]
pub struct Outcome {
    pub scenario: &'static str,
    pub seed: u64,
    pub violations: Vec<Violation>,
    /// Significant events, with their simulated time in ms.
    pub trace: Vec<(u64, String)>,
    pub stats: Stats,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// The command that replays this seed.
    pub fn replay_command(&self) -> String {
        format!(
            "SLUICE_SIM_SCENARIO={} SLUICE_SIM_SEED={} cargo test -p sluice-sim --test sim replay:: -- --nocapture",
            self.scenario, self.seed
        )
    }

    /// A failure report: violations, the end of the trace, and how to replay.
    pub fn report(&self) -> String {
        let mut out = format!("scenario {} seed {}: ", self.scenario, self.seed);
        if self.passed() {
            out.push_str("ok\n");
            return out;
        }
        out.push_str(&format!("{} violation(s)\n", self.violations.len()));
        for v in self.violations.iter().take(10) {
            out.push_str(&format!(
                "  [{} ms] {}: {}\n",
                v.at_ms, v.invariant, v.detail
            ));
        }
        // The events leading up to the first violation, and a few after.
        let first = self.violations.iter().map(|v| v.at_ms).min().unwrap_or(0);
        let upto = self.trace.partition_point(|(t, _)| *t <= first);
        let start = upto.saturating_sub(TRACE_TAIL);
        let end = (upto + 10).min(self.trace.len());
        out.push_str(&format!(
            "  trace up to the first violation at {first} ms:\n"
        ));
        for (t, line) in &self.trace[start..end] {
            out.push_str(&format!("    {t:>8} {line}\n"));
        }
        out.push_str(&format!("  replay: {}\n", self.replay_command()));
        out
    }
}
