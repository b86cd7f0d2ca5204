//! Leader election in the simulation. The candidates run the controller's own sans-IO
//! `LeaderElector` (client-go's rules); this module only supplies what it needs from outside:
//! the configuration, a monotonic clock derived from simulated time, and the API server's view
//! of the Lease that the invariant checks judge writes against.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;
use sluice_controller::leader::lease::ElectionConfig;
use tokio::time::Instant;

use crate::api_model::{ApiServer, Kind};

pub const LEASE_NAME: &str = "argo-rollouts-controller-lock";
pub const LEASE_NAMESPACE: &str = "default";
/// Argo's defaults: 15 s lease, 10 s renew deadline, 2 s retry period.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

thread_local! {
    /// Test-only: see [`with_leaders_that_never_step_down`].
    static NEVER_STEP_DOWN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Test-only (the mutation tests): runs `f` (runs of scenarios, on this thread) with Argo's bug
/// #2117 planted in the election loop: a leader whose renew deadline passes "stops leading"
/// but keeps its write gate open, reconciling and writing beside the next leader. That bug
/// lives above the write path, where no [`crate::ApplyFn`] reaches, and the write fences below
/// the election loop keep a planted writer inside its term; this switch lets a test show the
/// lease check catching a replica that writes out of it.
pub fn with_leaders_that_never_step_down<T>(f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            NEVER_STEP_DOWN.set(false);
        }
    }
    NEVER_STEP_DOWN.set(true);
    let _reset = Reset;
    f()
}

/// Whether a leader keeps its write gate open once it stopped leading (only under
/// [`with_leaders_that_never_step_down`]).
pub(crate) fn never_step_down() -> bool {
    NEVER_STEP_DOWN.get()
}

pub fn election_config(identity: String) -> ElectionConfig {
    ElectionConfig {
        role: sluice_controller::leader::lease::LeaseRole::Leader,
        identity,
        lease_name: LEASE_NAME.into(),
        lease_namespace: LEASE_NAMESPACE.into(),
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
    }
}

/// Simulated milliseconds as the monotonic instants the elector works with. The origin is
/// read from the OS once, but only differences between instants are ever used, so it has no
/// influence on the schedule.
#[derive(Debug, Clone, Copy)]
pub struct MonoClock {
    origin: Instant,
}

impl MonoClock {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    pub fn at(&self, ms: u64) -> Instant {
        self.origin + Duration::from_millis(ms)
    }

    pub fn ms(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_millis() as u64
    }
}

impl Default for MonoClock {
    fn default() -> Self {
        Self::new()
    }
}

/// The Lease as the API server holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseView {
    pub holder: String,
    /// `leaseTransitions`: the lease term.
    pub term: i64,
    pub expires: Option<Timestamp>,
}

pub fn view(api: &ApiServer) -> Option<LeaseView> {
    let lease = api.get(Kind::Lease, LEASE_NAME)?;
    let spec = lease.get("spec")?;
    let renew: Option<Timestamp> = spec
        .get("renewTime")
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok());
    let secs = spec
        .get("leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Some(LeaseView {
        holder: spec
            .get("holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        term: spec
            .get("leaseTransitions")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        expires: renew.map(|t| t + jiff::SignedDuration::from_secs(secs)),
    })
}

impl LeaseView {
    /// The holder, if its lease has not expired at `now`.
    pub fn valid_holder(&self, now: Timestamp) -> Option<&str> {
        (!self.holder.is_empty() && self.expires.is_some_and(|e| now < e))
            .then_some(self.holder.as_str())
    }
}
