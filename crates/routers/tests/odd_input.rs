//! Router objects come from the API as free-form JSON, and weights from user specs: no input,
//! however malformed or extreme, may make an edit panic. Every public function is called with
//! every combination of odd objects and extreme weights; errors are fine, panics are not.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sluice_api::rollout::{
    AlbTrafficRouting, ApisixRoute, ApisixTrafficRouting, AppMeshTrafficRouting,
    AppMeshVirtualNodeGroup, AppMeshVirtualNodeReference, AppMeshVirtualService,
    HeaderRoutingMatch, NginxTrafficRouting, SetHeaderRoute, SmiTrafficRouting, StickinessConfig,
    StringMatch,
};
use sluice_routers::kinds::RouterKind;
use sluice_routers::{
    Desired, Destination, alb, ambassador, apisix, appmesh, gateway, nginx, smi, traefik,
};

fn odd_objects() -> Vec<Value> {
    let mut values = vec![
        json!(null),
        json!(true),
        json!(-1),
        json!("text"),
        json!([]),
        json!({}),
        json!({"metadata": 1, "spec": 1}),
        json!({"metadata": {"name": 1, "annotations": [], "labels": 5, "ownerReferences": {}}}),
        json!({"metadata": {"name": "x", "annotations": {"nginx.ingress.kubernetes.io/canary": "true",
            "nginx.ingress.kubernetes.io/canary-weight": "9223372036854775807",
            "nginx.ingress.kubernetes.io/canary-weight-total": "3"}}}),
        json!({"metadata": {"name": "x", "annotations": {"nginx.ingress.kubernetes.io/canary": "true",
            "nginx.ingress.kubernetes.io/canary-weight": "9223372036854775806",
            "nginx.ingress.kubernetes.io/canary-weight-total": "9223372036854775807"}}}),
        json!({"spec": {"rules": [null, 1, {"http": 1}, {"http": {"paths": [null, 1, {"backend": 1},
            {"backend": {"service": 1}}, {"backend": {"service": {"name": "stable"}}}]}}]}}),
        json!({"spec": {"rules": [{"backendRefs": [1]}, {"matches": [1]}]}}),
        json!({"spec": {"rules": [{"name": 3, "backendRefs": [{"name": 1, "weight": "x"}],
            "matches": [{"headers": 1, "path": null}], "filters": 1}]}}),
        json!({"spec": {"backends": [1, {"service": 1, "weight": {}}, {"service": "canary", "weight": 1e300}]}}),
        json!({"spec": {"ports": [{"name": "http", "port": 1e30}, 7]}}),
        json!({"spec": {"weighted": {"services": [1, {"name": 2}, {"name": "canary", "weight": 1e300},
            {"name": "stable", "weight": "x"}]}}}),
        json!({"spec": {"weight": 9223372036854775807_i64, "service": 1}}),
        json!({"spec": {"weight": 0, "service": "stable"}, "metadata": {"name": "ü".repeat(300)}}),
        json!({"spec": {"http": [null, {"name": "r", "backends": [1, {"serviceName": "canary",
            "weight": -9223372036854775807_i64}, {"serviceName": "stable"}], "match": 1,
            "priority": 9223372036854775807_i64}]}}),
        json!({"spec": {"http": [{"name": "r", "backends": [{"serviceName": "canary"},
            {"serviceName": "stable"}], "match": null, "priority": "x"}]},
            "metadata": {"ownerReferences": [{"uid": "uid", "controller": true}]}}),
        json!({"spec": {"routes": [null, {"name": "r", "httpRoute": 1}, {"grpcRoute": {"action":
            {"weightedTargets": [1, {"virtualNodeRef": 1}, {"virtualNodeRef": {"name": "canary"},
            "weight": 1e300}]}}}]}}),
        json!({"kind": "VirtualRouter", "spec": {"routes": [{"name": "r", "tcpRoute": {"action":
            {"weightedTargets": [{"virtualNodeRef": {"name": "canary", "namespace": 1},
            "weight": -9223372036854775807_i64}, {"virtualNodeRef": {"name": "stable"},
            "weight": 9223372036854775807_i64}]}}}]}}),
        json!({"spec": {"provider": {"virtualRouter": {"virtualRouterRef": {"name": 1,
            "namespace": []}}}, "podSelector": {"matchLabels": null}}}),
    ];
    // An ALB Ingress with a header route and an action whose weights are out of range.
    values.push(json!({
        "apiVersion": "extensions/v1beta1",
        "metadata": {"name": "i", "annotations": {
            "alb.ingress.kubernetes.io/actions.stable": "{\"ForwardConfig\":{\"TargetGroups\":[{\"ServiceName\":\"canary\",\"Weight\":1e300},{\"ServiceName\":\"stable\",\"Weight\":\"-9223372036854775809\"}]}}",
            "alb.ingress.kubernetes.io/actions.managed": 7,
            "rollouts.argoproj.io/managed-alb-annotations": "{\"ro\":[1]}"}},
        "spec": {"rules": [{"http": {"paths": {}}}, {"http": null},
            {"http": {"paths": [{"backend": {"serviceName": "stable"}}, {"backend": {"serviceName": "managed"}}]}}]}
    }));
    // A well-formed route whose rules reference both Services, so edits get past the checks.
    values.push(json!({
        "metadata": {"name": "r", "labels": null,
            "ownerReferences": [{"uid": "uid", "controller": true}]},
        "spec": {"rules": [
            {"matches": [{"headers": null}, {"path": 1, "headers": [1]}],
             "backendRefs": [{"name": "stable", "port": null, "weight": null},
                             {"name": "canary", "port": {"x": 1}}, {"name": "exp"}]},
            {"name": "managed-9", "backendRefs": [{"name": "canary"}]}
        ]}
    }));
    values
}

fn desireds() -> Vec<Desired> {
    let base = Desired {
        rollout: "ro".into(),
        namespace: "ns".into(),
        rollout_uid: "uid".into(),
        canary_service: "canary".into(),
        stable_service: "stable".into(),
        managed_routes: vec!["managed".into(), String::new()],
        max_weight: 100,
        ..Desired::default()
    };
    let extreme = |weight, extra| Desired {
        weight,
        additional: vec![
            Destination {
                service_name: "exp".into(),
                pod_template_hash: String::new(),
                weight: extra,
            },
            Destination {
                service_name: "exp2".into(),
                pod_template_hash: String::new(),
                weight: extra,
            },
        ],
        ..base.clone()
    };
    vec![
        base.clone(),
        extreme(i32::MIN, i32::MIN),
        extreme(i32::MAX, i32::MAX),
        extreme(0, -1),
        Desired {
            max_weight: 0,
            ..base.clone()
        },
        Desired::default(),
    ]
}

fn header_steps() -> Vec<SetHeaderRoute> {
    let m = |value: Option<StringMatch>| HeaderRoutingMatch {
        header_name: None,
        header_value: value,
    };
    vec![
        SetHeaderRoute::default(),
        SetHeaderRoute {
            name: None,
            match_: Some(vec![]),
        },
        SetHeaderRoute {
            name: Some("managed".into()),
            match_: Some(vec![
                m(Some(StringMatch {
                    prefix: Some("p".into()),
                    ..StringMatch::default()
                })),
                m(None),
            ]),
        },
        SetHeaderRoute {
            name: Some("managed".into()),
            match_: Some(vec![m(Some(StringMatch {
                exact: Some("e".into()),
                ..StringMatch::default()
            }))]),
        },
    ]
}

#[test]
fn nginx_never_panics() {
    let cfgs = [
        NginxTrafficRouting::default(),
        NginxTrafficRouting {
            annotation_prefix: Some(String::new()),
            additional_ingress_annotations: Some(BTreeMap::from([(String::new(), String::new())])),
            canary_ingress_annotations: Some(BTreeMap::from([("k".into(), "v".into())])),
            ..NginxTrafficRouting::default()
        },
    ];
    for cfg in &cfgs {
        let _ = nginx::stable_ingresses(cfg);
        for max in [None, Some(0), Some(-1), Some(i32::MAX)] {
            for stable in odd_objects() {
                for existing in odd_objects() {
                    for desired in desireds() {
                        let _ = nginx::desired_canary_ingress(&stable, cfg, max, &desired);
                        let _ = nginx::set_weight(&stable, Some(&existing), cfg, max, &desired);
                        let _ = nginx::set_weight(&stable, None, cfg, max, &desired);
                    }
                }
                let _ = nginx::observed_weight(&stable, cfg, max);
            }
        }
    }
    let _ = nginx::canary_ingress_name(&"ü".repeat(300), "");
}

#[test]
fn smi_never_panics() {
    let cfg = SmiTrafficRouting {
        root_service: Some(String::new()),
        traffic_split_name: Some(String::new()),
    };
    for flag in ["", "v1alpha1", "v1alpha3", "junk"] {
        for existing in odd_objects() {
            for desired in desireds() {
                let _ = smi::set_weight(Some(&existing), &cfg, flag, &desired);
                let _ = smi::set_weight(None, &cfg, flag, &desired);
                let _ = smi::observed_weight(&existing, &desired);
            }
        }
    }
}

#[test]
fn gateway_never_panics() {
    let cfg = gateway::parse_config(&json!({"httpRoute": "r"})).unwrap();
    for value in odd_objects() {
        let _ = gateway::parse_config(&value);
        let _ = gateway::experiment_port(&value);
    }
    let experiments = [
        gateway::Experiments::default(),
        gateway::Experiments {
            active: true,
            previous_additional: vec!["exp".into()],
            ports: BTreeMap::from([("exp".into(), 1), ("exp2".into(), i32::MIN)]),
        },
        gateway::Experiments {
            active: false,
            previous_additional: vec!["exp".into(), "stable".into()],
            ports: BTreeMap::new(),
        },
    ];
    for kind in gateway::RouteKind::ALL {
        for route in odd_objects() {
            for desired in desireds() {
                for experiments in &experiments {
                    let _ = gateway::set_weight(&route, kind, &cfg, experiments, &desired);
                }
                for step in header_steps() {
                    let _ = gateway::set_header_route(&route, kind, "managed", &step, &desired);
                    let _ = gateway::set_header_route(&route, kind, "", &step, &desired);
                }
                let _ = gateway::remove_managed_routes(&route, kind, &desired);
                let _ = gateway::observed_weight(&route, kind, &desired);
            }
        }
    }
}

#[test]
fn alb_never_panics() {
    let cfgs = [
        AlbTrafficRouting::default(),
        AlbTrafficRouting {
            ingress: Some(String::new()),
            ingresses: Some(vec![String::new()]),
            service_port: Some(i32::MIN),
            root_service: Some(String::new()),
            annotation_prefix: Some(String::new()),
            stickiness_config: Some(StickinessConfig {
                enabled: Some(true),
                duration_seconds: Some(i64::MIN),
            }),
        },
        AlbTrafficRouting {
            root_service: Some("stable".into()),
            service_port: Some(80),
            stickiness_config: Some(StickinessConfig {
                enabled: Some(true),
                duration_seconds: None,
            }),
            ..AlbTrafficRouting::default()
        },
    ];
    for cfg in &cfgs {
        let _ = alb::ingresses(cfg);
        let _ = alb::annotation_prefix(cfg);
        for ingress in odd_objects() {
            for desired in desireds() {
                let _ = alb::action_service(cfg, &desired);
                let _ = alb::set_weight(&ingress, cfg, &desired);
                let _ = alb::observed_weight(&ingress, cfg, &desired);
                let _ = alb::remove_managed_routes(&ingress, cfg, &desired);
                for step in header_steps() {
                    let _ = alb::set_header_route(&ingress, cfg, &step, &desired);
                }
            }
        }
    }
}

#[test]
fn traefik_never_panics() {
    for ts in odd_objects() {
        for desired in desireds() {
            let _ = traefik::set_weight(&ts, &desired);
            let _ = traefik::observed_weight(&ts, &desired);
        }
    }
}

#[test]
fn ambassador_never_panics() {
    let kinds = [
        RouterKind::AmbassadorMapping,
        RouterKind::AmbassadorXMapping,
        RouterKind::Ingress,
    ];
    for base in odd_objects() {
        let _ = ambassador::check_base(&base);
        let _ = ambassador::observed_weight(Some(&base));
        for canary in odd_objects() {
            for desired in desireds() {
                for kind in kinds {
                    let _ = ambassador::set_weight(&base, Some(&canary), kind, "", &desired);
                    let _ = ambassador::set_weight(&base, None, kind, "", &desired);
                }
            }
        }
    }
    let _ = ambassador::canary_mapping_name(&"ü".repeat(300));
}

#[test]
fn apisix_never_panics() {
    let cfgs = [
        ApisixTrafficRouting::default(),
        ApisixTrafficRouting {
            route: Some(ApisixRoute {
                name: Some(String::new()),
                rules: Some(vec![String::new(), "r".into()]),
            }),
        },
    ];
    for cfg in &cfgs {
        for main in odd_objects() {
            for desired in desireds() {
                let _ = apisix::set_weight(&main, cfg, &desired);
                let _ = apisix::observed_weight(&main, cfg, &desired);
                let _ = apisix::remove_managed_route(&main, &desired);
                for step in header_steps() {
                    let _ = apisix::set_header_route(&main, None, cfg, &step, &desired);
                    for existing in odd_objects() {
                        let _ =
                            apisix::set_header_route(&main, Some(&existing), cfg, &step, &desired);
                    }
                }
            }
        }
    }
}

#[test]
fn appmesh_never_panics() {
    let node = |name: &str| {
        Some(AppMeshVirtualNodeReference {
            name: Some(name.into()),
        })
    };
    let cfgs = [
        AppMeshTrafficRouting::default(),
        AppMeshTrafficRouting {
            virtual_service: Some(AppMeshVirtualService {
                name: Some("vs".into()),
                routes: Some(vec!["r".into(), String::new()]),
            }),
            virtual_node_group: Some(AppMeshVirtualNodeGroup {
                canary_virtual_node_ref: node("canary"),
                stable_virtual_node_ref: node("stable"),
            }),
        },
    ];
    for cfg in &cfgs {
        for object in odd_objects() {
            let _ = appmesh::virtual_router_ref(&object, "");
            let _ = appmesh::check_routes(&object, cfg);
            for desired in desireds() {
                let _ = appmesh::set_weight(&object, cfg, "", &desired);
                let _ = appmesh::observed_weight(&object, cfg, "ns", &desired);
                for role in [appmesh::NodeRole::Canary, appmesh::NodeRole::Stable] {
                    let _ = appmesh::update_hash(&object, role, &desired);
                }
            }
        }
    }
}
