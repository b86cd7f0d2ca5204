//! Pod templates, for the pod-template hash: every kind of field a template carries, with
//! the values whose Go encoding is easy to get wrong (quantities, times, escapes, empty
//! collections, zero values).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{object, sometimes};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z][a-z0-9-]{0,8}",
        1 => Just(String::new()),
        1 => Just("<a&b>".to_string()),
        1 => Just("é\u{2028}\"\\\n\t\u{1}".to_string()),
        1 => Just("ünïcödé😀".to_string()),
    ]
}

fn quantity() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            "100m", "0.1", "1", "1000m", "1Gi", "1024Mi", "1e3", "1.5", "0", "500M", "2k", "0.0001"
        ])
        .prop_map(Value::from),
        (0i64..5000).prop_map(Value::from),
    ]
}

fn container() -> impl Strategy<Value = Value> {
    (
        text(),
        text(),
        sometimes(prop::collection::vec(text().prop_map(Value::from), 0..3).prop_map(Value::from)),
        sometimes(
            prop::collection::vec(
                (text(), prop::option::of(text())).prop_map(|(n, v)| {
                    object(vec![
                        ("name", Some(n.into())),
                        ("value", v.map(Value::from)),
                    ])
                }),
                0..3,
            )
            .prop_map(Value::from),
        ),
        sometimes(
            (quantity(), quantity()).prop_map(
                |(c, m)| json!({"limits": {"cpu": c, "memory": m}, "requests": {"cpu": c}}),
            ),
        ),
        sometimes(
            prop::collection::vec(
                (1i64..65536).prop_map(|p| json!({"containerPort": p})),
                0..2,
            )
            .prop_map(Value::from),
        ),
        sometimes(prop::sample::select(vec!["Always", "IfNotPresent", ""]).prop_map(Value::from)),
        sometimes(Just(
            json!({"httpGet": {"path": "/", "port": 8080}, "initialDelaySeconds": 0}),
        )),
    )
        .prop_map(|(name, image, args, env, resources, ports, pull, probe)| {
            object(vec![
                ("name", Some(name.into())),
                ("image", Some(image.into())),
                ("args", args),
                ("env", env),
                ("resources", resources),
                ("ports", ports),
                ("imagePullPolicy", pull),
                ("readinessProbe", probe),
            ])
        })
}

/// A pod template.
pub fn template() -> impl Strategy<Value = Value> {
    (
        sometimes(
            prop::collection::btree_map("[a-z./-]{1,12}", text(), 0..4).prop_map(|m| json!(m)),
        ),
        sometimes(
            prop::collection::btree_map("[a-z./-]{1,12}", text(), 0..3).prop_map(|m| json!(m)),
        ),
        sometimes(Just(json!("2024-01-02T03:04:05Z"))),
        prop::collection::vec(container(), 0..3),
        sometimes((0i64..100).prop_map(Value::from)),
        sometimes(prop::collection::btree_map("[a-z]{1,5}", text(), 0..2).prop_map(|m| json!(m))),
        sometimes(Just(
            json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]),
        )),
        sometimes(any::<bool>().prop_map(Value::from)),
    )
        .prop_map(
            |(labels, annotations, created, containers, grace, selector, tolerations, host)| {
                json!({
                    "metadata": object(vec![
                        ("labels", labels),
                        ("annotations", annotations),
                        ("creationTimestamp", created),
                    ]),
                    "spec": object(vec![
                        ("containers", Some(Value::from(containers))),
                        ("terminationGracePeriodSeconds", grace),
                        ("nodeSelector", selector),
                        ("tolerations", tolerations),
                        ("hostNetwork", host),
                    ]),
                })
            },
        )
}
