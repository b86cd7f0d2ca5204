//! The checks fed traces with a planted violation find it, and find nothing in the same traces
//! without it: a check that cannot fail would pass every run of the end-to-end test.

use super::*;

fn rs(revision: u64, name: &str, hash: &str, replicas: i32, annotations: &[&str]) -> Observation {
    Observation {
        revision,
        kind: Kind::ReplicaSet,
        name: name.into(),
        seen: Some(Seen::ReplicaSet(RsState {
            uid: format!("uid-{name}"),
            owner: "Rollout/shop".into(),
            hash: hash.into(),
            replicas,
            annotations: annotations.iter().map(|a| a.to_string()).collect(),
        })),
    }
}

fn service(revision: u64, name: &str, hash: &str) -> Observation {
    Observation {
        revision,
        kind: Kind::Service,
        name: name.into(),
        seen: Some(Seen::Service(Some(hash.into()))),
    }
}

fn weight(revision: u64, weight: i64) -> Observation {
    Observation {
        revision,
        kind: Kind::Ingress,
        name: "shop-ingress-canary".into(),
        seen: Some(Seen::Ingress(Some(weight))),
    }
}

fn canary() -> Vec<Traffic> {
    vec![Traffic::Canary {
        rollout: "shop".into(),
        replicas: 4,
        stable_service: "shop-stable".into(),
        canary_service: "shop-canary".into(),
        canary_ingress: "shop-ingress-canary".into(),
    }]
}

/// A canary update as the controller makes it: the canary scaled up, then given 25% of the
/// traffic; at the end the stable Service switched, the weight back to 0, and only then the
/// old ReplicaSet scaled down.
fn good_canary() -> Vec<Observation> {
    let a = ["rollout.argoproj.io/revision"];
    vec![
        rs(10, "shop-v1", "v1", 4, &a),
        service(11, "shop-stable", "v1"),
        service(12, "shop-canary", "v1"),
        weight(13, 0),
        rs(20, "shop-v2", "v2", 1, &a),
        service(21, "shop-canary", "v2"),
        weight(22, 25),
        rs(23, "shop-v2", "v2", 4, &a),
        weight(24, 100),
        service(25, "shop-stable", "v2"),
        weight(26, 0),
        rs(27, "shop-v1", "v1", 0, &a),
    ]
}

fn trace(observations: Vec<Observation>) -> Trace {
    Trace {
        observations,
        blind: vec![(0, 13)],
    }
}

#[test]
fn a_correct_canary_update_passes_every_check() {
    let findings = check(&trace(good_canary()), &canary());
    assert!(findings.violations.is_empty(), "{:?}", findings.violations);
    assert_eq!(findings.checked, 8);
    assert_eq!(findings.blind, 4);
    // 25% and 100% on the canary.
    assert_eq!(findings.routed, 3);
}

#[test]
fn the_states_are_replayed_by_revision_not_by_arrival() {
    // The Ingress watch delivered its change after the ReplicaSet watch delivered the later
    // scale-down: still no violation, since the weight went first.
    let mut observations = good_canary();
    let last_weight = observations.remove(10);
    observations.push(last_weight);
    let findings = check(&trace(observations), &canary());
    assert!(findings.violations.is_empty(), "{:?}", findings.violations);
}

#[test]
fn a_second_replica_set_for_one_hash_is_found() {
    let mut observations = good_canary();
    observations.push(rs(22, "shop-v2-x", "v2", 1, &[]));
    let violations = duplicate_hashes(&observations);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].contains("2 ReplicaSets for hash v2"));
    // The same ReplicaSet seen twice is not a second one.
    assert!(duplicate_hashes(&good_canary()).is_empty());
    assert!(!check(&trace(observations), &canary()).violations.is_empty());
}

#[test]
fn a_lost_annotation_is_found_and_a_removed_deadline_is_not() {
    let mut observations = good_canary();
    observations.push(rs(28, "shop-v2", "v2", 4, &[]));
    let violations = lost_annotations(&observations);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].contains("shop-v2 lost its annotations"));

    let mut observations = good_canary();
    let with_deadline = ["rollout.argoproj.io/revision", SCALE_DOWN_DEADLINE];
    observations.push(rs(28, "shop-v1", "v1", 0, &with_deadline));
    observations.push(rs(
        29,
        "shop-v1",
        "v1",
        0,
        &["rollout.argoproj.io/revision"],
    ));
    assert!(lost_annotations(&observations).is_empty());
}

#[test]
fn a_stable_replica_set_scaled_below_its_traffic_is_found() {
    // Stable scaled to 2 while it still gets 75% of 4 replicas' traffic (3 pods' worth).
    let mut observations = good_canary();
    observations.push(rs(
        22,
        "shop-v1",
        "v1",
        2,
        &["rollout.argoproj.io/revision"],
    ));
    let findings = check(&trace(observations), &canary());
    assert!(
        findings.violations.iter().any(|v| v.starts_with(
            "revision 22: shop's stable ReplicaSet (v1) has 2 replicas while 75% of the traffic"
        )),
        "{:?}",
        findings.violations
    );
}

#[test]
fn a_switch_to_a_replica_set_not_scaled_up_yet_is_found() {
    // The stable Service moved to the new ReplicaSet while it had its one canary pod.
    let mut observations = good_canary();
    observations.retain(|o| o.revision != 23 && o.revision != 24);
    let findings = check(&trace(observations), &canary());
    assert!(
        findings.violations.iter().any(|v| v.starts_with(
            "revision 25: shop's stable ReplicaSet (v2) has 1 replicas while 75% of the traffic"
        )),
        "{:?}",
        findings.violations
    );
}

#[test]
fn a_weight_raised_before_the_canary_scaled_up_is_found() {
    let mut observations = good_canary();
    observations.retain(|o| o.revision != 20);
    let findings = check(&trace(observations), &canary());
    assert!(
        findings.violations.iter().any(|v| v.starts_with(
            "revision 22: shop's canary ReplicaSet (v2) has 0 replicas while 25% of the traffic"
        )),
        "{:?}",
        findings.violations
    );
}

#[test]
fn a_violation_in_a_blind_window_is_not_reported() {
    // The watch was away from revision 21 to 23: what it replays there may be stale.
    let mut observations = good_canary();
    observations.push(rs(
        22,
        "shop-v1",
        "v1",
        2,
        &["rollout.argoproj.io/revision"],
    ));
    observations.push(rs(
        23,
        "shop-v1",
        "v1",
        4,
        &["rollout.argoproj.io/revision"],
    ));
    let mut t = trace(observations);
    t.blind.push((21, 23));
    let findings = check(&t, &canary());
    assert!(findings.violations.is_empty(), "{:?}", findings.violations);
    assert_eq!(findings.blind, 6);
}

#[test]
fn a_blue_green_active_replica_set_below_its_replicas_is_found() {
    let traffic = vec![Traffic::BlueGreen {
        rollout: "shop".into(),
        replicas: 4,
        active_service: "shop-active".into(),
    }];
    let good = vec![
        rs(10, "shop-v1", "v1", 4, &[]),
        service(11, "shop-active", "v1"),
        rs(20, "shop-v2", "v2", 4, &[]),
        service(21, "shop-active", "v2"),
        rs(22, "shop-v1", "v1", 0, &[]),
    ];
    let findings = check(&trace(good.clone()), &traffic);
    assert!(findings.violations.is_empty(), "{:?}", findings.violations);
    // Switched to the new ReplicaSet while it had 2 of 4 pods.
    let mut bad = good;
    bad[2] = rs(20, "shop-v2", "v2", 2, &[]);
    let findings = check(&trace(bad), &traffic);
    assert_eq!(
        findings.violations.first().map(String::as_str),
        Some(
            "revision 21: shop's active ReplicaSet (v2) has 2 replicas while all the traffic \
             goes to it, which needs 4"
        ),
        "{:?}",
        findings.violations
    );
}
