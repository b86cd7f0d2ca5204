//! The election rules, step by step on a fake clock.

use super::*;

fn config(identity: &str) -> ElectionConfig {
    ElectionConfig {
        role: LeaseRole::Leader,
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
        other => panic!("expected a write, got {other:?}"),
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

fn guard(identity: &str) -> ElectionConfig {
    ElectionConfig {
        role: LeaseRole::Guard,
        ..config(identity)
    }
}

/// `lease` as a Sluice replica named `holder` writes it for `role`.
fn annotated(mut lease: Lease, holder: &str, role: &str) -> Lease {
    let annotations = lease.metadata.annotations.get_or_insert_default();
    annotations.insert(HOLDER_ANNOTATION.into(), holder.into());
    annotations.insert(ROLE_ANNOTATION.into(), role.into());
    lease
}

#[test]
fn every_write_names_its_holder_and_role() {
    let clock = Clock::new();
    let (now, wall) = clock.at(0.0);
    let step = LeaderElector::new(guard("g")).observe(now, wall, None);
    let Step::Create(lease) = step else {
        panic!("{step:?}")
    };
    assert_eq!(LeaseRole::of(&lease), Some(LeaseRole::Guard));
    let step = LeaderElector::new(config("l")).observe(now, wall, None);
    let Step::Create(lease) = step else {
        panic!("{step:?}")
    };
    assert_eq!(LeaseRole::of(&lease), Some(LeaseRole::Leader));
}

/// Argo's client-go keeps the metadata it read when it takes a Lease over: the annotations
/// stay, the holder changes, and the Lease is no longer a Sluice replica's.
#[test]
fn a_lease_taken_over_by_client_go_is_nobody_elses_guard() {
    let clock = Clock::new();
    let (_, wall) = clock.at(0.0);
    let ours = annotated(held_by("sluice-1", wall, 0, 1), "sluice-1", "guard");
    assert_eq!(LeaseRole::of(&ours), Some(LeaseRole::Guard));
    let mut taken = ours.clone();
    taken.spec.as_mut().unwrap().holder_identity = Some("argo-7d9f_1234".into());
    assert_eq!(LeaseRole::of(&taken), None);
    assert_eq!(LeaseRole::of(&held_by("argo-7d9f_1234", wall, 0, 1)), None);
    let mut released = ours;
    released.spec.as_mut().unwrap().holder_identity = Some(String::new());
    assert_eq!(LeaseRole::of(&released), None);
}

#[test]
fn a_guard_waits_for_argo_but_shares_with_a_renewing_sluice_replica() {
    let clock = Clock::new();
    let mut e = LeaderElector::new(guard("me"));
    let (t0, wall0) = clock.at(0.0);
    // Held by Argo: wait, as for any client-go holder.
    assert_eq!(
        e.observe(t0, wall0, Some(&held_by("argo", wall0, 0, 1))),
        Step::Wait
    );

    // Held by another Sluice replica: shared until one renew deadline after it last changed.
    let other = annotated(held_by("sluice-b", wall0, 1, 2), "sluice-b", "guard");
    let (t1, wall1) = clock.at(1.0);
    assert_eq!(
        e.observe(t1, wall1, Some(&other)),
        Step::Shared(t1 + Duration::from_secs(10))
    );
    // It renews (the record changes): shared for longer.
    let (t5, wall5) = clock.at(5.0);
    let renewed = annotated(held_by("sluice-b", wall5, 1, 3), "sluice-b", "guard");
    assert_eq!(
        e.observe(t5, wall5, Some(&renewed)),
        Step::Shared(t5 + Duration::from_secs(10))
    );
    assert_eq!(e.term(t5), None, "sharing a guard is not holding it");

    // It stops renewing: past the renew deadline the guard is taken over, well before the
    // Lease could expire for an Argo controller waiting on it.
    let (t15, wall15) = clock.at(15.0);
    let step = e.observe(t15, wall15, Some(&renewed));
    let Step::Update(lease) = &step else {
        panic!("{step:?}")
    };
    assert_eq!(record(&step).holder_identity, "me");
    assert_eq!(record(&step).lease_transitions, 2);
    assert_eq!(LeaseRole::of(lease), Some(LeaseRole::Guard));
}

#[test]
fn a_leader_takes_its_lease_from_a_guard_at_once_but_not_from_a_leader() {
    let clock = Clock::new();
    let (t0, wall0) = clock.at(0.0);
    let guarded = annotated(held_by("shard-a", wall0, 3, 1), "shard-a", "guard");
    let mut e = LeaderElector::new(config("default-1"));
    let step = e.observe(t0, wall0, Some(&guarded));
    let Step::Update(lease) = &step else {
        panic!("{step:?}")
    };
    assert_eq!(record(&step).holder_identity, "default-1");
    assert_eq!(LeaseRole::of(lease), Some(LeaseRole::Leader));

    // A Sluice replica leading on the Lease is waited for like any other holder.
    let led = annotated(held_by("default-2", wall0, 3, 1), "default-2", "leader");
    let mut e = LeaderElector::new(config("default-1"));
    assert_eq!(e.observe(t0, wall0, Some(&led)), Step::Wait);
}
