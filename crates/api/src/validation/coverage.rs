//! Which checks have fired: the conformance tests generate Rollouts until every check of this
//! module has reported a problem at least once, and print the ones that never did.
//!
//! A check is a place in this module's source that reports a problem (a call of one of
//! `Problems`' methods); each records its file and line when recording is on. Recording is off
//! unless a test turns it on, and then costs one lock per problem found.

use std::collections::BTreeSet;
use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);
static HIT: Mutex<BTreeSet<(&'static str, u32)>> = Mutex::new(BTreeSet::new());

/// Starts recording which checks fire (for the rest of the process).
pub fn record_checks() {
    ON.store(true, Ordering::Relaxed);
}

/// The checks that have fired since [`record_checks`]: source file and line.
pub fn checks_fired() -> BTreeSet<(String, u32)> {
    HIT.lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(file, line)| (file.to_string(), *line))
        .collect()
}

pub(super) fn record(location: &'static Location<'static>) {
    if ON.load(Ordering::Relaxed) {
        HIT.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((location.file(), location.line()));
    }
}
