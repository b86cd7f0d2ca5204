//! Metrics with their counters and measurements, and metric values with conditions.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{object, sometimes};

/// A limit as a metric holds it: a small int, now and then negative, or a number in a string.
fn limit() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => (0i64..4).prop_map(Value::from),
        1 => Just(json!(-1)),
        1 => prop::sample::select(vec!["2", "0"]).prop_map(Value::from),
    ]
}

/// One metric's spec: the fields that decide its verdict.
pub fn metric() -> impl Strategy<Value = Value> {
    (
        sometimes((1i64..6).prop_map(Value::from)),
        sometimes(limit()),
        sometimes(limit()),
        sometimes(limit()),
        sometimes(limit()),
    )
        .prop_map(|(count, failure, inconclusive, errors, success)| {
            object(vec![
                ("name", Some(json!("m"))),
                ("interval", Some(json!("10s"))),
                ("count", count),
                ("failureLimit", failure),
                ("inconclusiveLimit", inconclusive),
                ("consecutiveErrorLimit", errors),
                ("consecutiveSuccessLimit", success),
                ("provider", Some(json!({"web": {"url": "http://metrics"}}))),
            ])
        })
}

/// A limit as a spec may hold it, bad values included: negative, a number in a string, a
/// string that is no number.
fn any_limit() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => (-3i64..7).prop_map(Value::from),
        1 => prop::sample::select(vec!["2", "0", "-1", "lots", ""]).prop_map(Value::from),
    ]
}

fn provider() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        8 => Just(Some(json!({"web": {"url": "http://metrics"}}))),
        1 => Just(Some(json!({"prometheus": {"query": "up"}, "job": {"spec": {"template": {"spec": {"containers": []}}}}}))),
        1 => Just(Some(json!({}))),
        1 => Just(None),
    ]
}

/// The metrics of a template or run, as Argo checks them before measuring: names (repeated,
/// empty), every limit, count, interval and initial delay, and the provider.
pub fn metric_specs() -> impl Strategy<Value = Value> {
    let one = (
        prop::sample::select(vec!["a", "b", "", "a"]),
        (
            sometimes(any_limit()),
            sometimes(any_limit()),
            sometimes(any_limit()),
        ),
        (sometimes(any_limit()), sometimes(any_limit())),
        (
            sometimes(
                prop::sample::select(vec!["10s", "1m", "", "soon", "5"]).prop_map(Value::from),
            ),
            sometimes(prop::sample::select(vec!["5s", "", "later", "1h"]).prop_map(Value::from)),
        ),
        provider(),
    )
        .prop_map(
            |(
                name,
                (count, failure, inconclusive),
                (errors, success),
                (interval, delay),
                provider,
            )| {
                object(vec![
                    ("name", Some(json!(name))),
                    ("count", count),
                    ("failureLimit", failure),
                    ("inconclusiveLimit", inconclusive),
                    ("consecutiveErrorLimit", errors),
                    ("consecutiveSuccessLimit", success),
                    ("interval", interval),
                    ("initialDelay", delay),
                    ("provider", provider),
                ])
            },
        );
    prop::collection::vec(one, 0..4).prop_map(Value::from)
}

const PHASES: [&str; 6] = [
    "Successful",
    "Failed",
    "Inconclusive",
    "Error",
    "Running",
    "Pending",
];

/// A metric's recorded result: counters consistent or not with its measurements, as a
/// status can hold after a controller swap, a retention limit or a hand edit.
pub fn result() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.2, prop::sample::select(PHASES.to_vec())),
        prop::collection::vec(prop::sample::select(PHASES.to_vec()), 0..5),
        (
            0i64..6,
            0i64..4,
            0i64..4,
            0i64..4,
            0i64..5,
            0i64..5,
            0i64..5,
        ),
    )
        .prop_map(
            |(
                phase,
                measurements,
                (count, successful, failed, inconclusive, error, c_error, c_success),
            )| {
                let measurements: Vec<Value> =
                    measurements.iter().map(|p| json!({"phase": p})).collect();
                object(vec![
                    ("name", Some(json!("m"))),
                    ("phase", phase.map(Value::from)),
                    ("measurements", Some(Value::from(measurements))),
                    ("count", Some(json!(count))),
                    ("successful", Some(json!(successful))),
                    ("failed", Some(json!(failed))),
                    ("inconclusive", Some(json!(inconclusive))),
                    ("error", Some(json!(error))),
                    ("consecutiveError", Some(json!(c_error))),
                    ("consecutiveSuccess", Some(json!(c_success))),
                ])
            },
        )
}

/// A metric value as providers return them: numbers, lists, maps, strings, nothing.
pub fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => prop::sample::select(vec![0.0f64, 0.5, 1.0, 2.0, 0.95, 100.0, -1.0]).prop_map(Value::from),
        3 => (-5i64..200).prop_map(Value::from),
        1 => prop::sample::select(vec!["ok", "1", "0.5", ""]).prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::from),
        1 => Just(Value::Null),
    ];
    let nested = leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            inner.prop_map(|v| json!({"value": v})),
        ]
    });
    // Mostly what Prometheus-like providers return: a number, or a vector of numbers.
    prop_oneof![
        4 => prop::sample::select(vec![0.0f64, 0.5, 1.0, 2.0, 0.95, 100.0, -1.0]).prop_map(Value::from),
        3 => prop::collection::vec(prop::sample::select(vec![0.0f64, 0.5, 0.95, 1.0, 100.0]), 0..3).prop_map(Value::from),
        3 => nested,
    ]
}

/// A success or failure condition over `result`, in Argo's expression language.
pub fn condition() -> impl Strategy<Value = String> {
    let number = prop::sample::select(vec!["0", "1", "0.5", "0.95", "100", "-1"]);
    let op = prop::sample::select(vec![">", ">=", "<", "<=", "==", "!="]);
    let subject = prop::sample::select(vec![
        "result",
        "result[0]",
        "len(result)",
        "result.value",
        "default(result, 0)",
        "asFloat(result)",
        "asInt(result)",
    ]);
    let atom = prop_oneof![
        6 => (subject, op, number).prop_map(|(s, o, n)| format!("{s} {o} {n}")),
        1 => prop::sample::select(vec![
            "all(result, {# > 0})",
            "any(result, {# < 1})",
            "isNaN(result)",
            "isInf(result)",
            "isNil(result)",
            "result == \"ok\"",
            "true",
            "result",
            "result > ",
        ])
        .prop_map(str::to_string),
    ];
    atom.prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} && {b}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} || {b}")),
            inner.prop_map(|a| format!("!({a})")),
        ]
    })
}

/// A metric with a success and/or failure condition.
pub fn conditions() -> impl Strategy<Value = Value> {
    (
        proptest::option::weighted(0.8, condition()),
        proptest::option::weighted(0.5, condition()),
    )
        .prop_map(|(success, failure)| {
            object(vec![
                ("name", Some(json!("m"))),
                ("successCondition", success.map(Value::from)),
                ("failureCondition", failure.map(Value::from)),
                ("provider", Some(json!({"web": {"url": "http://metrics"}}))),
            ])
        })
}
