//! Generators of inputs, from plain to tricky: edge values, fields Argo's docs say not to
//! combine, and the odd wrong value a person types.

pub mod analysis;
pub mod duration;
pub mod replicas;
pub mod rollout;
pub mod template;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// A JSON object of the fields that are present.
pub fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
    let map: Map<String, Value> = fields
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
        .collect();
    Value::Object(map)
}

/// A field that is absent about two times in three.
pub fn sometimes<S>(s: S) -> impl Strategy<Value = Option<Value>>
where
    S: Strategy<Value = Value>,
{
    proptest::option::weighted(0.35, s)
}

/// A field that is present about two times in three.
pub fn often<S>(s: S) -> impl Strategy<Value = Option<Value>>
where
    S: Strategy<Value = Value>,
{
    proptest::option::weighted(0.65, s)
}

/// A count: mostly small and sensible, sometimes zero, negative or large.
pub fn count() -> impl Strategy<Value = Value> {
    prop_oneof![
        30 => (0i64..6).prop_map(Value::from),
        1 => Just(json!(-1)),
        3 => Just(json!(30)),
        3 => (0i64..1000).prop_map(Value::from),
    ]
}

/// An int-or-percent as users write them, with a few that are wrong.
pub fn int_or_percent() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => (0i64..5).prop_map(Value::from),
        1 => Just(json!(-1)),
        12 => prop::sample::select(vec!["0%", "10%", "25%", "50%", "100%"]).prop_map(Value::from),
        1 => prop::sample::select(vec!["150%", "-10%", "abc", "25", "", "1.5%"]).prop_map(Value::from),
    ]
}

/// A resource name: usually one of a few (so that two fields can name the same one), now and
/// then empty or not a DNS label.
pub fn name() -> impl Strategy<Value = Value> {
    prop_oneof![
        30 => prop::sample::select(vec!["a", "b", "web", "web-canary", "web-stable"]).prop_map(Value::from),
        1 => Just(json!("")),
        1 => Just(json!("Not_A.Name")),
    ]
}

/// A weight: mostly 0-100 in steps, sometimes out of range.
pub fn weight() -> impl Strategy<Value = Value> {
    prop_oneof![
        24 => prop::sample::select(vec![0i64, 1, 5, 20, 33, 50, 99, 100]).prop_map(Value::from),
        1 => prop::sample::select(vec![-1i64, 101, 1000]).prop_map(Value::from),
    ]
}

/// A Go duration string or a count of seconds, as a pause's `duration` takes.
pub fn pause_duration() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => prop::sample::select(vec!["10s", "1m", "1h", "0s", "1m30s", "500ms"]).prop_map(Value::from),
        8 => (0i64..100).prop_map(Value::from),
        1 => prop::sample::select(vec!["1x", "", "10", "-5s", "1d"]).prop_map(Value::from),
        1 => Just(json!(-1)),
    ]
}

/// A boolean.
pub fn boolean() -> impl Strategy<Value = Value> {
    any::<bool>().prop_map(Value::from)
}

/// An Experiment's templates as its spec checks see them: selectors (missing, empty, empty
/// maps, real), names (empty, repeated) and minReadySeconds against the deadline.
pub fn experiment() -> impl Strategy<Value = Value> {
    let selector = prop_oneof![
        1 => Just(None),
        1 => Just(Some(json!({}))),
        1 => Just(Some(json!({"matchLabels": {}}))),
        1 => Just(Some(json!({"matchExpressions": []}))),
        5 => Just(Some(json!({"matchLabels": {"app": "a"}}))),
    ];
    let template = (
        selector,
        prop::sample::select(vec!["a", "b", "", "a"]),
        sometimes((0i64..900).prop_map(Value::from)),
    )
        .prop_map(|(selector, name, min_ready)| {
            object(vec![
                ("name", Some(json!(name))),
                ("selector", selector),
                ("minReadySeconds", min_ready),
                (
                    "template",
                    Some(json!({"metadata": {"labels": {"app": "a"}}})),
                ),
            ])
        });
    (
        prop::collection::vec(template, 0..4),
        sometimes((0i64..900).prop_map(Value::from)),
    )
        .prop_map(|(templates, deadline)| {
            json!({
                "metadata": {"name": "ex"},
                "spec": object(vec![
                    ("templates", Some(Value::from(templates))),
                    ("progressDeadlineSeconds", deadline),
                ]),
            })
        })
}
