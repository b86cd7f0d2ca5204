//! Leader election on a `coordination.k8s.io/v1` Lease, as a pure state machine.
//!
//! The rules are client-go's (`tools/leaderelection`), so Sluice and Argo Rollouts (or any other
//! client-go controller) can campaign for the same Lease and respect each other:
//!
//! - The Lease spec is the election record: `holderIdentity`, `leaseDurationSeconds`,
//!   `acquireTime`, `renewTime`, `leaseTransitions`.
//! - A candidate that does not hold the lease may take it only when it is free (empty holder) or
//!   expired. Expiry is judged on the candidate's **own** clock: the lease expires
//!   `leaseDurationSeconds` after the moment this candidate last saw the record change. The
//!   `renewTime` written by another machine is never compared with the local clock, so clock
//!   skew between machines does not matter (only clock rates do).
//! - Every write is an update conditional on the `resourceVersion` just read, so when two
//!   candidates race for an expired lease the API server lets exactly one win.
//! - The leader stops acting as leader when it has not renewed for `renewDeadline`, measured
//!   from the moment it *started* its last successful renewal. Since that is no later than the
//!   moment anybody else could have seen the renewal, and `renewDeadline < leaseDuration`, the
//!   leader has stopped before any standby may take over.
//! - Releasing (on shutdown) writes an empty holder with a one-second duration, so a standby
//!   takes over at its next attempt instead of waiting for expiry.
//!
//! Sluice adds one thing client-go does not have: a Lease written by Sluice names its holder and
//! its [`LeaseRole`] in two annotations ([`HOLDER_ANNOTATION`], [`ROLE_ANNOTATION`]). A client-go
//! controller that takes the Lease over keeps the annotations but changes the holder, so "held by
//! a Sluice replica" is exactly "the holder annotation names the current holder". That lets a
//! *guard* lease (Argo Rollouts 1.9's lock name, which every 1.9 controller campaigns for
//! whatever its instance id) keep Argo 1.9 out while several Sluice instances share it.
//!
//! [`LeaderElector`] does no I/O: its caller reads the Lease, asks [`LeaderElector::observe`]
//! what to write, performs the write and reports success with [`LeaderElector::written`].

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use tokio::time::Instant;

/// client-go's jitter factor for retries while not leading.
pub const JITTER_FACTOR: f64 = 1.2;

/// Annotation naming the Sluice replica that wrote the Lease (see the module documentation).
pub const HOLDER_ANNOTATION: &str = "rollouts.sluice.dev/lease-holder";
/// Annotation saying what the writing Sluice replica holds the Lease for: `leader` or `guard`.
pub const ROLE_ANNOTATION: &str = "rollouts.sluice.dev/lease-role";

/// What a candidate campaigns for a Lease for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeaseRole {
    /// The Lease that elects one leader among the replicas of one instance.
    #[default]
    Leader,
    /// A Lease held only to keep other controllers (Argo Rollouts 1.9) from leading: any Sluice
    /// replica holding it will do, so a guard never waits for another Sluice replica, and a
    /// replica that needs this Lease as its leader lease takes it from a guard at once.
    Guard,
}

impl LeaseRole {
    fn as_str(self) -> &'static str {
        match self {
            LeaseRole::Leader => "leader",
            LeaseRole::Guard => "guard",
        }
    }

    /// The role a Sluice replica holds `lease` for, or `None` if nobody or somebody other than
    /// a Sluice replica holds it.
    pub fn of(lease: &Lease) -> Option<LeaseRole> {
        let holder = lease.spec.as_ref()?.holder_identity.as_deref()?;
        let annotations = lease.metadata.annotations.as_ref()?;
        if holder.is_empty()
            || annotations.get(HOLDER_ANNOTATION).map(String::as_str) != Some(holder)
        {
            return None;
        }
        match annotations.get(ROLE_ANNOTATION).map(String::as_str) {
            Some("guard") => Some(LeaseRole::Guard),
            _ => Some(LeaseRole::Leader),
        }
    }
}

/// Timing and identity of one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionConfig {
    pub role: LeaseRole,
    pub identity: String,
    pub lease_name: String,
    pub lease_namespace: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl ElectionConfig {
    /// client-go's sanity rules: the leader must give up before its lease can expire, and get
    /// more than one retry within its renew deadline.
    pub fn validate(&self) -> Result<(), String> {
        if self.identity.is_empty() {
            return Err("the leader-election identity must not be empty".into());
        }
        if self.lease_name.is_empty() || self.lease_namespace.is_empty() {
            return Err("the lease name and namespace must not be empty".into());
        }
        if self.lease_duration.is_zero()
            || self.renew_deadline.is_zero()
            || self.retry_period.is_zero()
        {
            return Err("leader-election durations must be positive".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "--leader-election-lease-duration ({:?}) must be greater than --leader-election-renew-deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * JITTER_FACTOR {
            return Err(format!(
                "--leader-election-renew-deadline ({:?}) must be greater than {JITTER_FACTOR} x --leader-election-retry-period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        if self.lease_duration.as_secs() == 0 || self.lease_duration.as_secs() > i32::MAX as u64 {
            return Err("--leader-election-lease-duration must be between 1s and 68 years".into());
        }
        Ok(())
    }

    /// Whole seconds written as `leaseDurationSeconds` (the Lease API has no finer unit).
    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// The election record held in a Lease's spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Empty when nobody holds the lease.
    pub holder_identity: String,
    pub lease_duration_seconds: i32,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub lease_transitions: i32,
}

impl LeaseRecord {
    pub fn from_lease(lease: &Lease) -> LeaseRecord {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaseRecord {
            holder_identity: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            lease_transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.lease_transitions),
            ..Default::default()
        }
    }
}

/// What the caller should write after reading the Lease.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// The Lease does not exist: create it (fails with a conflict if somebody else just did).
    Create(Lease),
    /// Replace the Lease; it carries the resourceVersion that was read, so it fails with a
    /// conflict if the Lease changed meanwhile.
    Update(Lease),
    /// Somebody else holds an unexpired lease: try again after the retry period.
    Wait,
    /// A guard only: another Sluice replica holds the Lease, which keeps Argo out as well as
    /// holding it ourselves would, as long as that replica renews it; counted as held until
    /// the instant given (one renew deadline after the Lease last changed, by our clock).
    Shared(Instant),
}

/// The lease as last seen, and when (local clock) it was first seen in that state.
#[derive(Clone, Debug)]
struct Observation {
    record: LeaseRecord,
    since: Instant,
}

/// One candidate's view of the election. See the module documentation for the rules.
#[derive(Debug)]
pub struct LeaderElector {
    config: ElectionConfig,
    observed: Option<Observation>,
    /// The Lease as stored by our last successful write (the base of a release).
    last_written: Option<Lease>,
    /// When our last successful write started, while we count as leader.
    renewed_at: Option<Instant>,
    /// Incremented each time this candidate becomes leader.
    term: u64,
}

impl LeaderElector {
    pub fn new(config: ElectionConfig) -> LeaderElector {
        LeaderElector {
            config,
            observed: None,
            last_written: None,
            renewed_at: None,
            term: 0,
        }
    }

    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// The current term while this candidate leads at `now`, `None` otherwise.
    pub fn term(&self, now: Instant) -> Option<u64> {
        self.deadline()
            .filter(|deadline| now < *deadline)
            .map(|_| self.term)
    }

    /// When leadership ends unless renewed before.
    pub fn deadline(&self) -> Option<Instant> {
        self.renewed_at.map(|at| at + self.config.renew_deadline)
    }

    /// Decides what to write, given the Lease as read at `now` (`wall` is the same moment on
    /// the wall clock, written into the record). `None` means the Lease does not exist.
    pub fn observe(&mut self, now: Instant, wall: Timestamp, current: Option<&Lease>) -> Step {
        let Some(lease) = current else {
            let record = LeaseRecord {
                holder_identity: self.config.identity.clone(),
                lease_duration_seconds: self.config.lease_duration_seconds(),
                acquire_time: Some(wall),
                renew_time: Some(wall),
                lease_transitions: 0,
            };
            return Step::Create(self.new_lease(&record));
        };
        let record = LeaseRecord::from_lease(lease);
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|seen| seen.record != record);
        if changed {
            self.observed = Some(Observation {
                record: record.clone(),
                since: now,
            });
        }
        let since = self.observed.as_ref().map_or(now, |seen| seen.since);

        if record.holder_identity == self.config.identity {
            // Ours: renew, keeping when and how often it changed hands.
            let renewed = LeaseRecord {
                holder_identity: self.config.identity.clone(),
                lease_duration_seconds: self.config.lease_duration_seconds(),
                acquire_time: record.acquire_time.or(Some(wall)),
                renew_time: Some(wall),
                lease_transitions: record.lease_transitions,
            };
            return Step::Update(self.ours(lease, &renewed));
        }

        // Somebody else's (or nobody's): we are not leading, whatever we thought, and have
        // nothing to release.
        self.renewed_at = None;
        self.last_written = None;
        let expires =
            since + Duration::from_secs(u64::try_from(record.lease_duration_seconds).unwrap_or(0));
        let fresh_until = since + self.config.renew_deadline;
        let held = !record.holder_identity.is_empty() && now < expires;
        match (self.config.role, LeaseRole::of(lease)) {
            // A leader lease held by a Sluice guard: the guard is as well served by us.
            (LeaseRole::Leader, Some(LeaseRole::Guard)) => {}
            // Another Sluice replica keeps the guard while it renews; one that stopped
            // renewing is replaced before its Lease could expire for anybody else.
            (LeaseRole::Guard, Some(_)) if now < fresh_until => return Step::Shared(fresh_until),
            (LeaseRole::Guard, Some(_)) => {}
            _ if held => return Step::Wait,
            _ => {}
        }
        let acquired = LeaseRecord {
            holder_identity: self.config.identity.clone(),
            lease_duration_seconds: self.config.lease_duration_seconds(),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            lease_transitions: record.lease_transitions.saturating_add(1),
        };
        Step::Update(self.ours(lease, &acquired))
    }

    /// The write decided by the [`observe`](Self::observe) call made at `at` succeeded; `stored`
    /// is the Lease the API server returned.
    pub fn written(&mut self, at: Instant, stored: &Lease) {
        let record = LeaseRecord::from_lease(stored);
        if record.holder_identity != self.config.identity {
            return;
        }
        if self.term(at).is_none() {
            self.term += 1;
        }
        self.renewed_at = Some(at);
        self.observed = Some(Observation { record, since: at });
        self.last_written = Some(stored.clone());
    }

    /// Stops leading at once and returns the update that frees the Lease for the next
    /// candidate (empty holder, one-second duration), if we hold it.
    pub fn release(&mut self, wall: Timestamp) -> Option<Lease> {
        self.renewed_at = None;
        let lease = self.last_written.take()?;
        self.release_of(&lease, wall)
    }

    /// The update that frees `current` (the Lease as just read, when the release built from
    /// our last write met a conflict), if it still names us.
    pub fn release_of(&mut self, current: &Lease, wall: Timestamp) -> Option<Lease> {
        self.renewed_at = None;
        let lease = current;
        let record = LeaseRecord::from_lease(lease);
        if record.holder_identity != self.config.identity {
            return None;
        }
        let released = LeaseRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(wall),
            renew_time: Some(wall),
            lease_transitions: record.lease_transitions,
        };
        Some(with_record(lease, &released))
    }

    fn new_lease(&self, record: &LeaseRecord) -> Lease {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease_name.clone()),
                namespace: Some(self.config.lease_namespace.clone()),
                ..Default::default()
            },
            spec: None,
        };
        self.ours(&lease, record)
    }

    /// `lease` with `record` (naming us) as its spec, and annotated as ours and why.
    fn ours(&self, lease: &Lease, record: &LeaseRecord) -> Lease {
        let mut ours = with_record(lease, record);
        let annotations = ours.metadata.annotations.get_or_insert_default();
        annotations.insert(HOLDER_ANNOTATION.into(), self.config.identity.clone());
        annotations.insert(ROLE_ANNOTATION.into(), self.config.role.as_str().into());
        ours
    }
}

/// `lease` (metadata and resourceVersion kept) with its spec replaced by `record`.
fn with_record(lease: &Lease, record: &LeaseRecord) -> Lease {
    Lease {
        metadata: lease.metadata.clone(),
        spec: Some(record.to_spec()),
    }
}

#[cfg(test)]
mod tests;
