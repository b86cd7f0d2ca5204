//! Argo's published replica-count cases (compat appendix A), as data.

use super::*;

fn ios(s: &str) -> IntOrString {
    match s.parse::<i32>() {
        Ok(v) => IntOrString::Int(v),
        Err(_) => IntOrString::String(s.to_string()),
    }
}

/// One `TestCalculateReplicaCountsForCanary` basic case:
/// `R/w/S/U stable(spec/avail) canary(spec/avail) [old 3/3] -> stable, canary`.
struct Basic {
    r: i32,
    w: i32,
    surge: &'static str,
    unavailable: &'static str,
    stable: (i32, i32),
    canary: (i32, i32),
    old: bool,
    expect_stable: i32,
    expect_canary: i32,
}

#[allow(clippy::too_many_arguments)]
const fn b(
    r: i32,
    w: i32,
    surge: &'static str,
    unavailable: &'static str,
    stable: (i32, i32),
    canary: (i32, i32),
    old: bool,
    expect: (i32, i32),
) -> Basic {
    Basic {
        r,
        w,
        surge,
        unavailable,
        stable,
        canary,
        old,
        expect_stable: expect.0,
        expect_canary: expect.1,
    }
}

const BASIC_CASES: &[(u32, Basic)] = &[
    (1, b(10, 100, "3", "0", (7, 8), (6, 3), false, (7, 6))),
    (2, b(10, 20, "2", "0", (10, 10), (0, 0), false, (10, 2))),
    (3, b(10, 20, "20%", "0", (10, 10), (0, 0), false, (10, 2))),
    (4, b(10, 20, "20%", "0", (10, 10), (2, 2), false, (8, 2))),
    (5, b(10, 30, "2", "0", (10, 10), (0, 0), false, (10, 2))),
    (6, b(10, 20, "0", "2", (10, 10), (0, 0), false, (8, 0))),
    (7, b(10, 20, "0", "20%", (10, 10), (0, 0), false, (8, 0))),
    (8, b(10, 30, "0", "2", (10, 10), (0, 0), false, (8, 0))),
    (9, b(10, 50, "2", "1", (10, 10), (0, 0), false, (9, 2))),
    (10, b(10, 0, "1", "1", (10, 10), (1, 1), false, (10, 0))),
    (11, b(10, 100, "1", "1", (1, 1), (10, 10), false, (0, 10))),
    (12, b(1, 20, "1", "0", (1, 1), (0, 0), false, (1, 1))),
    (13, b(1, 90, "1", "0", (1, 1), (0, 0), false, (1, 1))),
    (14, b(1, 49, "0", "1", (1, 1), (0, 0), false, (1, 0))),
    (15, b(1, 51, "0", "1", (1, 1), (0, 0), false, (0, 0))),
    (16, b(1, 51, "0", "1", (0, 0), (0, 0), false, (0, 1))),
    (17, b(10, 30, "1", "0", (1, 1), (0, 0), true, (7, 1))),
    (18, b(10, 30, "0", "3", (8, 5), (4, 4), false, (7, 3))),
    (19, b(10, 100, "1", "0", (10, 2), (10, 8), false, (2, 9))),
    (20, b(10, 30, "0", "1", (8, 6), (4, 2), true, (8, 4))),
    (21, b(10, 5, "0", "1", (10, 10), (0, 0), false, (9, 0))),
    (22, b(10, 5, "0", "1", (9, 9), (0, 0), false, (9, 1))),
    (23, b(10, 10, "0%", "0%", (10, 10), (0, 0), false, (9, 0))),
    (27, b(10, 20, "20%", "0", (10, 10), (0, 0), false, (10, 2))),
    (28, b(4, 100, "1", "0", (4, 1), (0, 0), false, (4, 1))),
    (29, b(3, 99, "0", "2", (3, 3), (0, 0), false, (1, 0))),
    (30, b(3, 99, "0", "2", (1, 1), (0, 0), false, (1, 2))),
    (31, b(4, 100, "1", "0", (4, 1), (1, 1), false, (3, 1))),
    (32, b(4, 0, "1", "0", (0, 0), (4, 4), false, (1, 4))),
    (33, b(4, 0, "1", "0", (1, 0), (4, 4), false, (1, 4))),
    (34, b(4, 0, "1", "0", (1, 1), (4, 4), false, (1, 3))),
    // promoteFull ignores the step weight: the engine passes weight 100.
    (35, b(4, 100, "4", "4", (4, 4), (0, 0), false, (0, 4))),
    (36, b(4, 100, "3", "0", (4, 4), (0, 0), false, (4, 3))),
];

#[test]
fn basic_canary_matches_argo_cases() {
    let mut failures = Vec::new();
    for (id, c) in BASIC_CASES {
        let limits =
            resolve_surge_limits(Some(&ios(c.surge)), Some(&ios(c.unavailable)), c.r).unwrap();
        let got = basic_canary_counts(BasicCanaryInputs {
            replicas: c.r,
            weight: c.w,
            limits,
            new_rs: Some(RsCounts::new(c.canary.0, c.canary.1)),
            stable_rs: Some(RsCounts::new(c.stable.0, c.stable.1)),
            new_is_stable: false,
            other_spec_total: if c.old { 3 } else { 0 },
        });
        if (got.stable, got.canary) != (c.expect_stable, c.expect_canary) {
            failures.push(format!(
                "case {id}: expected stable={} canary={}, got stable={} canary={}",
                c.expect_stable, c.expect_canary, got.stable, got.canary
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_stable_or_stable_is_new_goes_straight_to_full() {
    let limits = resolve_surge_limits(None, None, 10).unwrap();
    let base = BasicCanaryInputs {
        replicas: 10,
        weight: 20,
        limits,
        new_rs: Some(RsCounts::new(0, 0)),
        stable_rs: None,
        new_is_stable: false,
        other_spec_total: 0,
    };
    assert_eq!(
        basic_canary_counts(base),
        CanaryCounts {
            canary: 10,
            stable: 0
        }
    );
    let same = BasicCanaryInputs {
        stable_rs: Some(RsCounts::new(10, 10)),
        new_is_stable: true,
        ..base
    };
    assert_eq!(
        basic_canary_counts(same),
        CanaryCounts {
            canary: 10,
            stable: 0
        }
    );
}

struct Routed {
    id: u32,
    input: RoutedCanaryInputs,
    expect_stable: i32,
    expect_canary: i32,
}

fn routed(r: i32, w: i32) -> RoutedCanaryInputs {
    RoutedCanaryInputs {
        replicas: r,
        weight: w,
        max_weight: 100,
        canary_scale_replicas: None,
        canary_scale_weight: None,
        match_traffic_weight: false,
        promote_full: false,
        aborted: false,
        keep_canary_on_abort: false,
        min_pods_per_replica_set: None,
        dynamic_stable_scale: false,
        previous_weights: None,
    }
}

#[test]
fn routed_canary_matches_argo_cases() {
    let cases = [
        Routed {
            id: 24,
            input: RoutedCanaryInputs {
                canary_scale_replicas: Some(9),
                ..routed(1, 100)
            },
            expect_stable: 1,
            expect_canary: 9,
        },
        Routed {
            id: 25,
            input: RoutedCanaryInputs {
                canary_scale_weight: Some(200),
                ..routed(4, 100)
            },
            expect_stable: 4,
            expect_canary: 8,
        },
        Routed {
            id: 26,
            input: RoutedCanaryInputs {
                canary_scale_replicas: Some(9),
                canary_scale_weight: Some(100),
                match_traffic_weight: true,
                ..routed(10, 20)
            },
            expect_stable: 10,
            expect_canary: 2,
        },
        Routed {
            id: 37,
            input: RoutedCanaryInputs {
                canary_scale_replicas: Some(1),
                aborted: true,
                keep_canary_on_abort: true,
                ..routed(1, 0)
            },
            expect_stable: 1,
            expect_canary: 1,
        },
        Routed {
            id: 38,
            input: RoutedCanaryInputs {
                canary_scale_replicas: Some(1),
                aborted: true,
                ..routed(1, 0)
            },
            expect_stable: 1,
            expect_canary: 0,
        },
        Routed {
            id: 39,
            input: RoutedCanaryInputs {
                min_pods_per_replica_set: Some(2),
                ..routed(10, 5)
            },
            expect_stable: 10,
            expect_canary: 2,
        },
        Routed {
            id: 40,
            input: RoutedCanaryInputs {
                min_pods_per_replica_set: Some(2),
                promote_full: true,
                ..routed(1, 100)
            },
            expect_stable: 1,
            expect_canary: 1,
        },
    ];
    for c in cases {
        let got = routed_canary_counts(c.input);
        assert_eq!(
            (got.stable, got.canary),
            (c.expect_stable, c.expect_canary),
            "case {}",
            c.id
        );
    }
}

#[test]
fn dynamic_stable_scale_follows_the_larger_of_new_and_recorded_weight() {
    let dynamic = |w: i32, previous: Option<(i32, i32)>, aborted: bool| RoutedCanaryInputs {
        dynamic_stable_scale: true,
        previous_weights: previous,
        aborted,
        ..routed(10, w)
    };
    let cases = [
        // Going to 30%: the canary grows at once, the stable shrinks only once the router
        // recorded 70% for it.
        Routed {
            id: 1,
            input: dynamic(30, Some((0, 100)), false),
            expect_stable: 10,
            expect_canary: 3,
        },
        Routed {
            id: 2,
            input: dynamic(30, Some((30, 70)), false),
            expect_stable: 7,
            expect_canary: 3,
        },
        // Aborted at 30% recorded, the abort weight down to 0: the canary keeps what the
        // recorded weight needs; the stable is back to full.
        Routed {
            id: 3,
            input: dynamic(0, Some((30, 70)), true),
            expect_stable: 10,
            expect_canary: 3,
        },
        Routed {
            id: 4,
            input: dynamic(0, Some((0, 100)), true),
            expect_stable: 10,
            expect_canary: 0,
        },
        // minPodsPerReplicaSet applies to both, and to an explicit count with dynamic scale.
        Routed {
            id: 5,
            input: RoutedCanaryInputs {
                min_pods_per_replica_set: Some(2),
                canary_scale_replicas: Some(1),
                ..dynamic(5, Some((5, 95)), false)
            },
            expect_stable: 10,
            expect_canary: 2,
        },
    ];
    for c in cases {
        let got = routed_canary_counts(c.input);
        assert_eq!(
            (got.stable, got.canary),
            (c.expect_stable, c.expect_canary),
            "case {}",
            c.id
        );
    }
}

#[test]
fn traffic_weight_to_replicas_rounds_up() {
    // TestTrafficWeightToReplicas values.
    for (r, w, max, want) in [
        (10, 20, 100, 2),
        (10, 25, 100, 3),
        (10, 33, 100, 4),
        (10, 99, 100, 10),
        (23, 100_000_000, 100_000_000, 23),
    ] {
        let got = routed_canary_counts(RoutedCanaryInputs {
            max_weight: max,
            ..routed(r, w)
        });
        assert_eq!(got.canary, want, "R={r} w={w}");
    }
}

/// `TestApproximateWeightedNewStableReplicaCounts`: `(R, surge, weight, canary, stable)`.
const APPROX_CASES: &[(i32, i32, i32, i32, i32)] = &[
    (0, 0, 0, 0, 0),
    (0, 0, 50, 0, 0),
    (0, 0, 100, 0, 0),
    (0, 1, 0, 0, 0),
    (0, 1, 50, 0, 0),
    (0, 1, 100, 0, 0),
    (0, 0, 10, 0, 0),
    (0, 1, 99, 0, 0),
    (1, 0, 0, 0, 1),
    (1, 0, 1, 0, 1),
    (1, 0, 49, 0, 1),
    (1, 0, 50, 1, 0),
    (1, 0, 99, 1, 0),
    (1, 0, 100, 1, 0),
    (1, 1, 0, 0, 1),
    (1, 1, 1, 1, 1),
    (1, 1, 49, 1, 1),
    (1, 1, 50, 1, 1),
    (1, 1, 99, 1, 1),
    (1, 1, 100, 1, 0),
    (2, 0, 0, 0, 2),
    (2, 0, 1, 1, 1),
    (2, 0, 50, 1, 1),
    (2, 0, 99, 1, 1),
    (2, 0, 100, 2, 0),
    (2, 1, 0, 0, 2),
    (2, 1, 1, 1, 2),
    (2, 1, 50, 1, 1),
    (2, 1, 99, 2, 1),
    (2, 1, 100, 2, 0),
    (3, 0, 10, 1, 2),
    (3, 0, 25, 1, 2),
    (3, 0, 33, 1, 2),
    (3, 0, 34, 1, 2),
    (3, 0, 49, 1, 2),
    (3, 0, 50, 2, 1),
    (3, 1, 10, 1, 3),
    (3, 1, 25, 1, 3),
    (3, 1, 33, 1, 2),
    (3, 1, 34, 1, 2),
    (3, 1, 49, 2, 2),
    (3, 1, 50, 2, 2),
    (10, 0, 1, 1, 9),
    (10, 0, 14, 1, 9),
    (10, 0, 15, 2, 8),
    (10, 0, 16, 2, 8),
    (10, 0, 99, 9, 1),
    (10, 1, 0, 0, 10),
    (10, 1, 1, 1, 10),
    (10, 1, 18, 2, 9),
    (10, 1, 19, 2, 9),
    (10, 1, 20, 2, 8),
    (10, 1, 23, 2, 8),
    (10, 1, 24, 3, 8),
    (10, 1, 25, 3, 8),
    (10, 1, 99, 10, 1),
    (10, 1, 100, 10, 0),
];

#[test]
fn approximate_weighted_counts_matches_argo_cases() {
    let mut failures = Vec::new();
    for &(r, surge, w, canary, stable) in APPROX_CASES {
        let got = approximate_weighted_counts(r, w, 100, surge);
        if got != (canary, stable) {
            failures.push(format!(
                "R={r} surge={surge} w={w}: expected {canary}/{stable}, got {}/{}",
                got.0, got.1
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn surge_and_unavailable_resolution() {
    // Bare strings are percentages; surge rounds up, unavailable rounds down.
    assert_eq!(
        scaled_value(&IntOrString::String("25".into()), 10, true),
        Ok(3)
    );
    assert_eq!(scaled_value(&ios("25%"), 10, false), Ok(2));
    assert_eq!(scaled_value(&IntOrString::Int(3), 10, false), Ok(3));
    assert!(scaled_value(&IntOrString::String("x%".into()), 10, true).is_err());
    // Both zero: unavailable forced to 1.
    let l = resolve_surge_limits(Some(&ios("0")), Some(&ios("0%")), 10).unwrap();
    assert_eq!(
        l,
        SurgeLimits {
            max_surge: 0,
            max_unavailable: 1
        }
    );
    // Defaults: 25% each.
    let l = resolve_surge_limits(None, None, 4).unwrap();
    assert_eq!(
        l,
        SurgeLimits {
            max_surge: 1,
            max_unavailable: 1
        }
    );
    // Unavailable never exceeds replicas.
    let l = resolve_surge_limits(Some(&ios("0")), Some(&ios("5")), 2).unwrap();
    assert_eq!(l.max_unavailable, 2);
}
