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
//! [`LeaderElector`] does no I/O: its caller reads the Lease, asks [`LeaderElector::observe`]
//! what to write, performs the write and reports success with [`LeaderElector::written`].

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use tokio::time::Instant;

/// client-go's jitter factor for retries while not leading.
pub const JITTER_FACTOR: f64 = 1.2;

/// Timing and identity of one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionConfig {
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
            return Step::Update(with_record(lease, &renewed));
        }

        // Somebody else's (or nobody's): we are not leading, whatever we thought, and have
        // nothing to release.
        self.renewed_at = None;
        self.last_written = None;
        let expires =
            since + Duration::from_secs(u64::try_from(record.lease_duration_seconds).unwrap_or(0));
        if !record.holder_identity.is_empty() && now < expires {
            return Step::Wait;
        }
        let acquired = LeaseRecord {
            holder_identity: self.config.identity.clone(),
            lease_duration_seconds: self.config.lease_duration_seconds(),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            lease_transitions: record.lease_transitions.saturating_add(1),
        };
        Step::Update(with_record(lease, &acquired))
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
        Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease_name.clone()),
                namespace: Some(self.config.lease_namespace.clone()),
                ..Default::default()
            },
            spec: Some(record.to_spec()),
        }
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
mod tests {
    use super::*;

    fn config(identity: &str) -> ElectionConfig {
        ElectionConfig {
            identity: identity.into(),
            lease_name: "argo-rollouts-controller-lock".into(),
            lease_namespace: "argo-rollouts".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// A fake clock: a fixed origin plus seconds.
    struct Clock {
        origin: Instant,
        wall: Timestamp,
    }

    impl Clock {
        fn new() -> Clock {
            Clock {
                origin: Instant::now(),
                wall: "2026-01-01T00:00:00Z".parse().unwrap(),
            }
        }
        fn at(&self, secs: f64) -> (Instant, Timestamp) {
            let d = Duration::from_secs_f64(secs);
            (
                self.origin + d,
                self.wall + jiff::SignedDuration::try_from(d).unwrap(),
            )
        }
    }

    /// What the API server would store: the lease with a new resourceVersion.
    fn stored(lease: &Lease, rv: u64) -> Lease {
        let mut l = lease.clone();
        l.metadata.resource_version = Some(rv.to_string());
        l
    }

    fn held_by(holder: &str, renew: Timestamp, transitions: i32, rv: u64) -> Lease {
        let mut l = Lease {
            metadata: ObjectMeta {
                name: Some("argo-rollouts-controller-lock".into()),
                namespace: Some("argo-rollouts".into()),
                resource_version: Some(rv.to_string()),
                ..Default::default()
            },
            spec: None,
        };
        l.spec = Some(
            LeaseRecord {
                holder_identity: holder.into(),
                lease_duration_seconds: 15,
                acquire_time: Some(renew),
                renew_time: Some(renew),
                lease_transitions: transitions,
            }
            .to_spec(),
        );
        l
    }

    fn record(step: &Step) -> LeaseRecord {
        match step {
            Step::Create(l) | Step::Update(l) => LeaseRecord::from_lease(l),
            Step::Wait => panic!("expected a write, got Wait"),
        }
    }

    #[test]
    fn creates_a_missing_lease_with_a_client_go_record() {
        let clock = Clock::new();
        let mut e = LeaderElector::new(config("a"));
        let (now, wall) = clock.at(0.0);
        let step = e.observe(now, wall, None);
        let Step::Create(lease) = &step else {
            panic!("{step:?}")
        };
        assert_eq!(
            lease.metadata.name.as_deref(),
            Some("argo-rollouts-controller-lock")
        );
        assert_eq!(lease.metadata.namespace.as_deref(), Some("argo-rollouts"));
        assert_eq!(
            record(&step),
            LeaseRecord {
                holder_identity: "a".into(),
                lease_duration_seconds: 15,
                acquire_time: Some(wall),
                renew_time: Some(wall),
                lease_transitions: 0,
            }
        );
        assert_eq!(e.term(now), None, "not leading before the write succeeded");
        e.written(now, &stored(lease, 1));
        assert_eq!(e.term(now), Some(1));
    }

    #[test]
    fn leadership_ends_at_the_renew_deadline_counted_from_the_start_of_the_last_renewal() {
        let clock = Clock::new();
        let mut e = LeaderElector::new(config("a"));
        let (t0, w0) = clock.at(0.0);
        let Step::Create(l) = e.observe(t0, w0, None) else {
            panic!()
        };
        e.written(t0, &stored(&l, 1));
        assert_eq!(e.term(clock.at(9.999).0), Some(1));
        assert_eq!(e.term(clock.at(10.0).0), None);
        assert_eq!(e.deadline(), Some(t0 + Duration::from_secs(10)));

        // A renewal started at 2s moves the deadline to 12s.
        let (t2, w2) = clock.at(2.0);
        let step = e.observe(t2, w2, Some(&stored(&l, 1)));
        let r = record(&step);
        assert_eq!(r.renew_time, Some(w2));
        assert_eq!(r.acquire_time, Some(w0), "acquireTime kept while renewing");
        assert_eq!(r.lease_transitions, 0);
        let Step::Update(renewed) = step else {
            panic!()
        };
        assert_eq!(
            renewed.metadata.resource_version.as_deref(),
            Some("1"),
            "conditional on what was read"
        );
        e.written(t2, &stored(&renewed, 2));
        assert_eq!(e.term(clock.at(11.9).0), Some(1));
        assert_eq!(e.term(clock.at(12.0).0), None);
    }

    #[test]
    fn a_held_lease_is_taken_only_after_it_stayed_unchanged_for_its_duration_on_the_local_clock() {
        let clock = Clock::new();
        let mut b = LeaderElector::new(config("b"));
        // The holder's renewTime is long past by our wall clock: irrelevant, only our own
        // observation time counts (client-go's rule, immune to clock skew).
        let ancient: Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
        let lease = held_by("a", ancient, 3, 7);
        let (t0, w0) = clock.at(0.0);
        assert_eq!(b.observe(t0, w0, Some(&lease)), Step::Wait);
        let (t, w) = clock.at(14.9);
        assert_eq!(b.observe(t, w, Some(&lease)), Step::Wait);
        let (t15, w15) = clock.at(15.0);
        let step = b.observe(t15, w15, Some(&lease));
        assert_eq!(
            record(&step),
            LeaseRecord {
                holder_identity: "b".into(),
                lease_duration_seconds: 15,
                acquire_time: Some(w15),
                renew_time: Some(w15),
                lease_transitions: 4,
            }
        );
        let Step::Update(taken) = step else { panic!() };
        assert_eq!(taken.metadata.resource_version.as_deref(), Some("7"));
        b.written(t15, &stored(&taken, 8));
        assert_eq!(b.term(t15), Some(1));
    }

    #[test]
    fn every_renewal_by_the_holder_restarts_the_expiry_clock() {
        let clock = Clock::new();
        let mut b = LeaderElector::new(config("b"));
        let (t0, w0) = clock.at(0.0);
        assert_eq!(b.observe(t0, w0, Some(&held_by("a", w0, 0, 1))), Step::Wait);
        let (t10, w10) = clock.at(10.0);
        assert_eq!(
            b.observe(t10, w10, Some(&held_by("a", w10, 0, 2))),
            Step::Wait
        );
        let (t20, w20) = clock.at(20.0);
        assert_eq!(
            b.observe(t20, w20, Some(&held_by("a", w10, 0, 2))),
            Step::Wait,
            "seen unchanged for 10s only"
        );
        let (t25, w25) = clock.at(25.0);
        assert!(matches!(
            b.observe(t25, w25, Some(&held_by("a", w10, 0, 2))),
            Step::Update(_)
        ));
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let clock = Clock::new();
        let mut a = LeaderElector::new(config("a"));
        let mut b = LeaderElector::new(config("b"));
        let (t0, w0) = clock.at(0.0);
        let Step::Create(l) = a.observe(t0, w0, None) else {
            panic!()
        };
        let l = stored(&l, 1);
        a.written(t0, &l);
        assert_eq!(b.observe(t0, w0, Some(&l)), Step::Wait);

        let (t1, w1) = clock.at(1.0);
        let released = a.release(w1).expect("a holds the lease");
        assert_eq!(
            a.term(t1),
            None,
            "stops leading before the release is written"
        );
        let r = LeaseRecord::from_lease(&released);
        assert_eq!(r.holder_identity, "");
        assert_eq!(r.lease_duration_seconds, 1);
        assert_eq!(r.lease_transitions, 0);
        assert_eq!(released.metadata.resource_version.as_deref(), Some("1"));
        assert_eq!(a.release(w1), None, "released once");
        // After a conflict (a renewal landed meanwhile), the fresh Lease is released instead.
        let renewed_meanwhile = stored(&l, 7);
        let again = a.release_of(&renewed_meanwhile, w1).expect("still ours");
        assert_eq!(again.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(LeaseRecord::from_lease(&again).holder_identity, "");
        assert_eq!(
            a.release_of(&held_by("b", w1, 1, 8), w1),
            None,
            "not ours any more"
        );

        let released = stored(&released, 2);
        let (t2, w2) = clock.at(1.5);
        let step = b.observe(t2, w2, Some(&released));
        assert_eq!(record(&step).holder_identity, "b");
        assert_eq!(record(&step).lease_transitions, 1);
    }

    #[test]
    fn seeing_another_holder_ends_leadership_immediately() {
        let clock = Clock::new();
        let mut a = LeaderElector::new(config("a"));
        let (t0, w0) = clock.at(0.0);
        let Step::Create(l) = a.observe(t0, w0, None) else {
            panic!()
        };
        a.written(t0, &stored(&l, 1));
        let (t1, w1) = clock.at(1.0);
        assert_eq!(a.observe(t1, w1, Some(&held_by("b", w1, 1, 5))), Step::Wait);
        assert_eq!(a.term(t1), None);
        assert_eq!(a.release(w1), None, "nothing to release: not ours");
    }

    #[test]
    fn competing_candidates_both_write_conditionally_on_the_same_version() {
        let clock = Clock::new();
        let mut b = LeaderElector::new(config("b"));
        let mut c = LeaderElector::new(config("c"));
        let free = held_by("", clock.at(0.0).1, 2, 9);
        let (t, w) = clock.at(0.0);
        for e in [&mut b, &mut c] {
            let Step::Update(l) = e.observe(t, w, Some(&free)) else {
                panic!()
            };
            assert_eq!(l.metadata.resource_version.as_deref(), Some("9"));
        }
    }

    #[test]
    fn regaining_the_lease_starts_a_new_term() {
        let clock = Clock::new();
        let mut a = LeaderElector::new(config("a"));
        let (t0, w0) = clock.at(0.0);
        let Step::Create(l) = a.observe(t0, w0, None) else {
            panic!()
        };
        let l = stored(&l, 1);
        a.written(t0, &l);
        assert_eq!(a.term(t0), Some(1));
        // Renewals fail until the deadline passes; then one succeeds again.
        let (t11, w11) = clock.at(11.0);
        assert_eq!(a.term(t11), None);
        let step = a.observe(t11, w11, Some(&l));
        let Step::Update(renewed) = step else {
            panic!()
        };
        a.written(t11, &stored(&renewed, 2));
        assert_eq!(a.term(t11), Some(2));
    }

    #[test]
    fn configuration_rules_match_client_go() {
        assert_eq!(config("a").validate(), Ok(()));
        let mut c = config("a");
        c.renew_deadline = c.lease_duration;
        assert!(c.validate().is_err());
        let mut c = config("a");
        c.retry_period = Duration::from_secs(9);
        assert!(c.validate().is_err(), "10s <= 1.2 x 9s");
        let mut c = config("a");
        c.identity.clear();
        assert!(c.validate().is_err());
    }
}
