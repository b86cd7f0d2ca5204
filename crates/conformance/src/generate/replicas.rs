//! The state a basic (no traffic router) canary is sized from.

use proptest::prelude::*;
use serde_json::{Value, json};

/// One ReplicaSet's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rs {
    pub spec: i32,
    pub available: i32,
}

/// A basic canary at some point of an update.
#[derive(Debug, Clone)]
pub struct BasicCase {
    pub replicas: i32,
    pub max_surge: Value,
    pub max_unavailable: Value,
    /// Each step: `Some(weight)` for setWeight, `None` for a pause.
    pub steps: Vec<Option<i32>>,
    pub step_index: i32,
    pub new_rs: Option<Rs>,
    /// `None`: no stable ReplicaSet; `Some(None)`: the new one is the stable one.
    pub stable_rs: Option<Option<Rs>>,
    pub others: Vec<Rs>,
    pub aborted: bool,
    pub promote_full: bool,
}

fn rs() -> impl Strategy<Value = Rs> {
    (0i32..12, 0i32..3).prop_map(|(spec, extra)| Rs {
        spec,
        // Mostly fewer available than wanted, sometimes one more (scaling down).
        available: (spec + extra - 2).max(0).min(spec + 1),
    })
}

fn limit() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => (0i64..4).prop_map(Value::from),
        3 => prop::sample::select(vec!["0%", "10%", "25%", "33%", "50%", "100%"]).prop_map(Value::from),
    ]
}

pub fn basic_case() -> impl Strategy<Value = BasicCase> {
    (
        (0i32..12, limit(), limit()),
        prop::collection::vec(
            prop_oneof![3 => (0i32..=100).prop_map(Some), 1 => Just(None)],
            0..5,
        ),
        0i32..6,
        (
            prop::option::weighted(0.9, rs()),
            prop_oneof![8 => rs().prop_map(|r| Some(Some(r))), 1 => Just(Some(None)), 1 => Just(None)],
            prop::collection::vec(rs(), 0..3),
        ),
        (prop::bool::weighted(0.15), prop::bool::weighted(0.1)),
    )
        .prop_map(
            |((replicas, max_surge, max_unavailable), steps, index, (new_rs, stable_rs, others), (aborted, promote_full))| {
                BasicCase {
                    replicas,
                    max_surge,
                    max_unavailable,
                    step_index: index.min(steps.len() as i32),
                    steps,
                    // The new ReplicaSet being the stable one needs a new one.
                    new_rs: if stable_rs == Some(None) { new_rs.or(Some(Rs { spec: 0, available: 0 })) } else { new_rs },
                    stable_rs,
                    others,
                    aborted,
                    promote_full,
                }
            },
        )
}

/// A ReplicaSet object for the oracle.
pub fn replica_set(name: &str, rs: Rs) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"rollouts-pod-template-hash": name}},
        "spec": {"replicas": rs.spec},
        "status": {"replicas": rs.spec, "availableReplicas": rs.available, "readyReplicas": rs.available},
    })
}

/// A traffic-routed canary at some point of an update.
#[derive(Debug, Clone)]
pub struct RoutedCase {
    pub replicas: i32,
    /// The steps, as Rollout JSON: setWeight, setCanaryScale (replicas, weight or
    /// matchTrafficWeight) and pause.
    pub steps: Vec<Value>,
    pub step_index: i32,
    pub dynamic_stable_scale: bool,
    pub min_pods_per_replica_set: Option<i32>,
    /// `abortScaleDownDelaySeconds`: 0 keeps the canary after an abort.
    pub abort_delay: Option<i32>,
    pub aborted: bool,
    pub promote_full: bool,
    /// The new pods are already the stable ones.
    pub new_is_stable: bool,
    /// `status.canary.weights` as (canary, stable), when recorded.
    pub weights: Option<(i32, i32)>,
}

fn routed_step() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0i32..=100).prop_map(|w| json!({"setWeight": w})),
        1 => (0i32..12).prop_map(|r| json!({"setCanaryScale": {"replicas": r}})),
        1 => (0i32..=150).prop_map(|w| json!({"setCanaryScale": {"weight": w}})),
        1 => Just(json!({"setCanaryScale": {"matchTrafficWeight": true}})),
        1 => Just(json!({"pause": {}})),
    ]
}

pub fn routed_case() -> impl Strategy<Value = RoutedCase> {
    (
        (
            0i32..12,
            prop::collection::vec(routed_step(), 0..6),
            0i32..7,
        ),
        (
            prop::bool::weighted(0.4),
            prop::option::weighted(0.3, 0i32..6),
            prop::option::weighted(0.3, prop::sample::select(vec![0, 5, 30])),
        ),
        (
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.1),
        ),
        prop::option::weighted(0.6, (0i32..=100).prop_map(|c| (c, 100 - c))),
    )
        .prop_map(
            |(
                (replicas, steps, index),
                (dss, min_pods, abort_delay),
                (aborted, promote_full, new_is_stable),
                weights,
            )| {
                RoutedCase {
                    replicas,
                    step_index: index.min(steps.len() as i32),
                    steps,
                    dynamic_stable_scale: dss,
                    min_pods_per_replica_set: min_pods,
                    abort_delay,
                    aborted,
                    promote_full,
                    new_is_stable,
                    weights,
                }
            },
        )
}
