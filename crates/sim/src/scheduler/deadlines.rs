//! Timed checks: after every change the scheduler books a look at the end of grace of each
//! deadline whose work is still undone ([`crate::invariants::Checker::pending_deadlines`]), so
//! that a deadline nobody acts on is caught even in a world where nothing else happens.

use jiff::Timestamp;

use super::{EPOCH_SECONDS, Ev, Sim};

impl Sim {
    /// Books a check just after the end of grace of every pending deadline (one per instant).
    pub(super) fn book_deadline_checks(&mut self) {
        let epoch = Timestamp::from_second(EPOCH_SECONDS).unwrap_or(Timestamp::UNIX_EPOCH);
        for deadline in self.checker.pending_deadlines(&self.api) {
            let after = deadline.check_at().duration_since(epoch).as_millis();
            let at_ms = u64::try_from(after).unwrap_or(0) + 1;
            if at_ms > self.now_ms && self.deadline_checks.insert(at_ms) {
                self.at(at_ms, Ev::CheckDeadlines);
            }
        }
    }

    /// A booked check: whatever was due by now is done.
    pub(super) fn check_deadlines(&mut self) {
        self.deadline_checks.remove(&self.now_ms);
        let now = self.now();
        self.checker.check_deadlines(&self.api, self.now_ms, now);
    }
}
