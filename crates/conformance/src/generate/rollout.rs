//! Rollouts: every field of a Rollout's spec that validation reads, alone and in combination.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{
    boolean, count, int_or_percent, name, object, often, pause_duration, sometimes, weight,
};

/// A whole Rollout object.
pub fn rollout() -> impl Strategy<Value = Value> {
    spec().prop_map(|spec| {
        json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": spec,
        })
    })
}

fn spec() -> impl Strategy<Value = Value> {
    (
        (
            sometimes(count()),
            selector_and_template(),
            sometimes(count()),
            sometimes(count()),
            sometimes(prop_oneof![count(), Just(json!(600))]),
            sometimes(boolean()),
        ),
        (
            sometimes(rollback_window()),
            sometimes(history_limits()),
            strategy(),
            sometimes(boolean()),
        ),
    )
        .prop_map(
            |(
                (replicas, (selector, template, workload_ref), min_ready, history, deadline, abort),
                (rollback, analysis, strategy, paused),
            )| {
                object(vec![
                    ("replicas", replicas),
                    ("selector", selector),
                    ("template", template),
                    ("workloadRef", workload_ref),
                    ("minReadySeconds", min_ready),
                    ("revisionHistoryLimit", history),
                    ("progressDeadlineSeconds", deadline),
                    ("progressDeadlineAbort", abort),
                    ("rollbackWindow", rollback),
                    ("analysis", analysis),
                    ("strategy", strategy),
                    ("paused", paused),
                ])
            },
        )
}

type SelectorTemplate = (Option<Value>, Option<Value>, Option<Value>);

/// The selector, the template and the workload reference, which go together.
fn selector_and_template() -> impl Strategy<Value = SelectorTemplate> {
    let labels = prop_oneof![
        30 => Just(json!({"app": "web"})),
        1 => Just(json!({"app": "other"})),
        1 => Just(json!({})),
    ];
    let selector = prop_oneof![
        30 => Just(Some(json!({"matchLabels": {"app": "web"}}))),
        1 => Just(None),
        1 => Just(Some(json!({}))),
        1 => Just(Some(json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}))),
        1 => Just(Some(json!({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}))),
        1 => Just(Some(json!({"matchLabels": {"bad key!": "web"}}))),
        1 => Just(Some(json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "app", "operator": "In"}]}))),
        1 => Just(Some(json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}))),
        1 => Just(Some(json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "", "operator": "Exists"}]}))),
    ];
    let containers = prop_oneof![
        30 => Just(json!([{"name": "web", "image": "nginx:1.27"}])),
        1 => Just(json!([])),
        1 => Just(json!([{"name": "Bad_Name", "image": "nginx"}])),
        1 => Just(json!([{"name": "web", "image": "nginx", "ports": [{"containerPort": 0}]}])),
        1 => Just(json!([{"name": "", "image": "nginx"}])),
        1 => Just(json!([{"name": "web"}])),
        1 => Just(json!([{"name": "web", "image": "nginx"}, {"name": "web", "image": "nginx"}])),
    ];
    let workload = prop_oneof![
        1 => Just(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})),
        1 => Just(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "scaleDown": "progressively"})),
        1 => Just(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "scaleDown": "sometimes"})),
        1 => Just(json!({"apiVersion": "apps/v1", "kind": "Deployment"})),
        1 => Just(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "web"})),
    ];
    prop_oneof![
        20 => (selector, labels, containers, prop::option::weighted(0.05, prop::sample::select(vec!["Never", "OnFailure", "Sometimes"])))
            .prop_map(|(selector, labels, containers, restart)| {
                let mut pod = json!({"containers": containers});
                if let Some(policy) = restart {
                    pod["restartPolicy"] = json!(policy);
                }
                (selector, Some(json!({"metadata": {"labels": labels}, "spec": pod})), None)
            }),
        1 => (workload, prop::option::of(Just(json!({"matchLabels": {"app": "web"}}))), prop::option::weighted(0.2, Just(json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}))))
            .prop_map(|(workload, selector, template)| (selector, template, Some(workload))),
    ]
}

fn rollback_window() -> impl Strategy<Value = Value> {
    count().prop_map(|revisions| json!({ "revisions": revisions }))
}

fn history_limits() -> impl Strategy<Value = Value> {
    (sometimes(count()), sometimes(count())).prop_map(|(ok, bad)| {
        object(vec![
            ("successfulRunHistoryLimit", ok),
            ("unsuccessfulRunHistoryLimit", bad),
        ])
    })
}

fn strategy() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        24 => canary().prop_map(|c| Some(json!({"canary": c}))),
        12 => blue_green().prop_map(|b| Some(json!({"blueGreen": b}))),
        1 => Just(None),
        1 => Just(Some(json!({}))),
        1 => (canary(), blue_green()).prop_map(|(c, b)| Some(json!({"canary": c, "blueGreen": b}))),
    ]
}

fn anti_affinity() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"requiredDuringSchedulingIgnoredDuringExecution": {}})),
        Just(json!({"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 50}})),
        Just(json!({"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 0}})),
        Just(json!({})),
        Just(
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {}, "preferredDuringSchedulingIgnoredDuringExecution": {"weight": 1}})
        ),
    ]
}

/// An analysis reference as steps, background and blue-green analyses hold it.
pub fn analysis() -> impl Strategy<Value = Value> {
    let template = prop_oneof![
        6 => Just(json!({"templateName": "success-rate"})),
        1 => Just(json!({"templateName": "error-rate", "clusterScope": true})),
        1 => Just(json!({})),
        1 => Just(json!({"templateName": ""})),
    ];
    let arg = prop_oneof![
        Just(json!({"name": "service", "value": "web"})),
        Just(json!({"name": "hash", "valueFrom": {"podTemplateHashValue": "Latest"}})),
        Just(json!({"name": "hash", "valueFrom": {"podTemplateHashValue": "Sideways"}})),
        Just(json!({"name": "ns", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})),
        Just(json!({"name": "x", "valueFrom": {"fieldRef": {"fieldPath": "spec.nope"}}})),
        Just(
            json!({"name": "both", "value": "a", "valueFrom": {"podTemplateHashValue": "Stable"}})
        ),
        Just(json!({"name": ""})),
        Just(json!({"name": "service"})),
        Just(json!({"name": "none", "valueFrom": {}})),
        Just(json!({"name": "empty", "valueFrom": {"fieldRef": {"fieldPath": ""}}})),
        Just(
            json!({"name": "label", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}})
        ),
        Just(
            json!({"name": "gen", "valueFrom": {"fieldRef": {"fieldPath": "metadata.generation"}}})
        ),
        Just(json!({"name": "service", "value": "again"})),
    ];
    (
        prop::collection::vec(template, 0..3),
        sometimes(prop::collection::vec(arg, 0..3).prop_map(Value::from)),
        sometimes(prop_oneof![
            Just(json!([{"metricName": "*"}])),
            Just(json!([{}]))
        ]),
        sometimes(prop_oneof![
            Just(json!([{"metricName": "m", "limit": 2}])),
            Just(json!([{"limit": 2}])),
            Just(json!([{"metricName": "m"}])),
            Just(json!([{"metricName": "m", "limit": -1}])),
        ]),
    )
        .prop_map(|(templates, args, dry_run, retention)| {
            object(vec![
                ("templates", Some(Value::from(templates))),
                ("args", args),
                ("dryRun", dry_run),
                ("measurementRetention", retention),
            ])
        })
}

fn blue_green() -> impl Strategy<Value = Value> {
    (
        (
            often(name()),
            sometimes(name()),
            sometimes(boolean()),
            sometimes(count()),
            sometimes(count()),
            sometimes(count()),
        ),
        (
            sometimes(count()),
            sometimes(int_or_percent()),
            sometimes(analysis()),
            sometimes(analysis()),
            sometimes(anti_affinity()),
            sometimes(count()),
        ),
    )
        .prop_map(
            |(
                (active, preview, auto, auto_seconds, delay, limit),
                (preview_count, unavailable, pre, post, anti, abort_delay),
            )| {
                object(vec![
                    ("activeService", active),
                    ("previewService", preview),
                    ("autoPromotionEnabled", auto),
                    ("autoPromotionSeconds", auto_seconds),
                    ("scaleDownDelaySeconds", delay),
                    ("scaleDownDelayRevisionLimit", limit),
                    ("previewReplicaCount", preview_count),
                    ("maxUnavailable", unavailable),
                    ("prePromotionAnalysis", pre),
                    ("postPromotionAnalysis", post),
                    ("antiAffinity", anti),
                    ("abortScaleDownDelaySeconds", abort_delay),
                ])
            },
        )
}

fn canary() -> impl Strategy<Value = Value> {
    (
        (
            sometimes(name()),
            sometimes(name()),
            sometimes(int_or_percent()),
            sometimes(int_or_percent()),
            sometimes(prop::collection::vec(step(), 0..6).prop_map(Value::from)),
            sometimes(traffic_routing()),
        ),
        (
            sometimes(count()),
            sometimes(count()),
            sometimes(count()),
            sometimes(count()),
            sometimes(boolean()),
            sometimes(background_analysis()),
        ),
        (
            sometimes(anti_affinity()),
            sometimes(ping_pong()),
            sometimes(replica_progress_threshold()),
        ),
    )
        .prop_map(
            |(
                (canary_svc, stable_svc, surge, unavailable, steps, routing),
                (abort_delay, delay, limit, min_pods, dynamic, background),
                (anti, ping_pong, threshold),
            )| {
                object(vec![
                    ("canaryService", canary_svc),
                    ("stableService", stable_svc),
                    ("maxSurge", surge),
                    ("maxUnavailable", unavailable),
                    ("steps", steps),
                    ("trafficRouting", routing),
                    ("abortScaleDownDelaySeconds", abort_delay),
                    ("scaleDownDelaySeconds", delay),
                    ("scaleDownDelayRevisionLimit", limit),
                    ("minPodsPerReplicaSet", min_pods),
                    ("dynamicStableScale", dynamic),
                    ("analysis", background),
                    ("antiAffinity", anti),
                    ("pingPong", ping_pong),
                    ("replicaProgressThreshold", threshold),
                ])
            },
        )
}

fn background_analysis() -> impl Strategy<Value = Value> {
    (analysis(), sometimes(count())).prop_map(|(mut a, starting)| {
        if let (Some(obj), Some(s)) = (a.as_object_mut(), starting) {
            obj.insert("startingStep".into(), s);
        }
        a
    })
}

fn ping_pong() -> impl Strategy<Value = Value> {
    (name(), name()).prop_map(|(ping, pong)| json!({"pingService": ping, "pongService": pong}))
}

fn replica_progress_threshold() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(
            0.9,
            prop::sample::select(vec!["Pod", "Pods", "Percent", "Other"]),
        ),
        sometimes(prop_oneof![count(), Just(json!(150)), Just(json!(-2))]),
    )
        .prop_map(|(t, v)| object(vec![("type", t.map(Value::from)), ("value", v)]))
}

fn string_match() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!({"exact": "x"})),
        2 => Just(json!({"prefix": "x"})),
        2 => Just(json!({"regex": "x.*"})),
        1 => Just(json!({})),
        1 => Just(json!({"exact": "x", "regex": "y"})),
    ]
}

fn step() -> impl Strategy<Value = Value> {
    let header_route = (
        name(),
        sometimes(
            prop::collection::vec(
                // Now and then without a value, which Argo refuses.
                (
                    prop::option::of(name()),
                    prop::option::weighted(0.9, string_match()),
                )
                    .prop_map(|(h, v)| object(vec![("headerName", h), ("headerValue", v)])),
                0..3,
            )
            .prop_map(Value::from),
        ),
    )
        .prop_map(
            |(n, m)| json!({"setHeaderRoute": object(vec![("name", Some(n)), ("match", m)])}),
        );
    let mirror_route = (
        name(),
        sometimes(
            prop::collection::vec(
                (
                    sometimes(string_match()),
                    sometimes(string_match()),
                    sometimes(prop_oneof![
                        Just(json!({"x-user": {"exact": "a"}})),
                        Just(json!({"x-user": {"exact": "a", "prefix": "b"}})),
                    ]),
                )
                    .prop_map(|(method, path, headers)| {
                        object(vec![("method", method), ("path", path), ("headers", headers)])
                    }),
                0..3,
            )
            .prop_map(Value::from),
        ),
        sometimes(weight()),
    )
        .prop_map(|(n, m, p)| {
            json!({"setMirrorRoute": object(vec![("name", Some(n)), ("match", m), ("percentage", p)])})
        });
    let canary_scale = (sometimes(weight()), sometimes(count()), sometimes(super::boolean())).prop_map(
        |(w, r, m)| {
            json!({"setCanaryScale": object(vec![("weight", w), ("replicas", r), ("matchTrafficWeight", m)])})
        },
    );
    let experiment = (
        prop::collection::vec(
            (
                prop::option::of(name()),
                prop::option::of(prop::sample::select(vec!["canary", "stable", "other"])),
                sometimes(count()),
                sometimes(weight()),
            )
                .prop_map(|(n, r, c, w)| {
                    object(vec![
                        ("name", n),
                        ("specRef", r.map(Value::from)),
                        ("replicas", c),
                        ("weight", w),
                    ])
                }),
            0..3,
        ),
        sometimes(pause_duration().prop_filter("a string", Value::is_string)),
        sometimes(
            prop::collection::vec(
                (
                    prop::option::of(name()),
                    prop::option::of(Just(json!("success-rate"))),
                )
                    .prop_map(|(n, t)| object(vec![("name", n), ("templateName", t)])),
                0..3,
            )
            .prop_map(Value::from),
        ),
    )
        .prop_map(|(templates, duration, analyses)| {
            json!({"experiment": object(vec![
                ("templates", Some(Value::from(templates))),
                ("duration", duration),
                ("analyses", analyses),
            ])})
        });
    prop_oneof![
        6 => weight().prop_map(|w| json!({"setWeight": w})),
        3 => sometimes(pause_duration()).prop_map(|d| json!({"pause": object(vec![("duration", d)])})),
        2 => analysis().prop_map(|a| json!({"analysis": a})),
        2 => experiment,
        2 => canary_scale,
        1 => header_route,
        1 => mirror_route,
        1 => prop::option::of(name()).prop_map(|n| json!({"plugin": object(vec![("name", n), ("config", Some(json!({"a": 1})))])})),
        1 => Just(json!({})),
        1 => (weight(), pause_duration()).prop_map(|(w, d)| json!({"setWeight": w, "pause": {"duration": d}})),
        1 => weight().prop_map(|w| json!({"plugin": {"name": "p"}, "setWeight": w})),
        1 => Just(json!({"pause": {"duration": "-0.5s"}})),
    ]
}

fn traffic_routing() -> impl Strategy<Value = Value> {
    let router = prop_oneof![
        3 => prop_oneof![
            Just(json!({"nginx": {"stableIngress": "web"}})),
            Just(json!({"nginx": {"stableIngresses": ["web", "web2"]}})),
            Just(json!({"nginx": {"stableIngress": "web", "stableIngresses": ["web2"]}})),
            Just(json!({"nginx": {}})),
            // A header of the user's own, which a header route of Sluice's would replace.
            Just(json!({"nginx": {"stableIngress": "web", "additionalIngressAnnotations": {"canary-by-header": "X-Canary"}}})),
        ],
        3 => prop_oneof![
            Just(json!({"alb": {"ingress": "web", "servicePort": 80}})),
            Just(json!({"alb": {"ingresses": ["web"], "servicePort": 80}})),
            Just(json!({"alb": {"servicePort": 80}})),
            Just(json!({"alb": {"ingress": "web"}})),
        ],
        4 => prop_oneof![
            Just(json!({"istio": {"virtualService": {"name": "web", "routes": ["primary"]}}})),
            Just(json!({"istio": {"virtualService": {"name": "web"}}})),
            Just(json!({"istio": {"virtualServices": [{"name": "web", "routes": ["primary"]}]}})),
            Just(json!({"istio": {}})),
            Just(json!({"istio": {"virtualService": {"name": "web"}, "destinationRule": {"name": "web", "canarySubsetName": "canary", "stableSubsetName": "stable"}}})),
            Just(json!({"istio": {"virtualService": {"name": "web"}, "destinationRule": {"name": "web"}}})),
        ],
        1 => Just(json!({"smi": {}})),
        1 => Just(json!({"nginx": {}, "alb": {"ingress": "web", "servicePort": 80}})),
        1 => Just(json!({"ambassador": {"mappings": ["web"]}})),
        1 => Just(json!({"ambassador": {}})),
        1 => Just(json!({"appMesh": {"virtualService": {"name": "web"}, "virtualNodeGroup": {"canaryVirtualNodeRef": {"name": "c"}, "stableVirtualNodeRef": {"name": "s"}}}})),
        1 => Just(json!({"traefik": {"weightedTraefikServiceName": "web"}})),
        1 => Just(json!({"apisix": {"route": {"name": "web"}}})),
        1 => Just(json!({"plugins": {"argoproj-labs/sample": {}}})),
        1 => Just(json!({})),
    ];
    (
        router,
        sometimes(prop_oneof![
            Just(json!(100)),
            Just(json!(1000)),
            Just(json!(0)),
            Just(json!(-5))
        ]),
        sometimes(
            prop::collection::vec(name().prop_map(|n| json!({ "name": n })), 0..3)
                .prop_map(Value::from),
        ),
    )
        .prop_map(|(mut router, max_weight, managed)| {
            if let Some(obj) = router.as_object_mut() {
                if let Some(w) = max_weight {
                    obj.insert("maxTrafficWeight".into(), w);
                }
                if let Some(m) = managed {
                    obj.insert("managedRoutes".into(), m);
                }
            }
            router
        })
}
