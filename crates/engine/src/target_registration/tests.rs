//! Which Service is checked, which bindings count, how endpoints are counted, and Argo's
//! events.

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};
use sluice_api::rollout::Rollout;

use super::*;

fn service(name: &str, hash: &str, target_port: Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"selector": {"app": "web", "rollouts-pod-template-hash": hash},
            "ports": [{"name": "http", "port": 80, "targetPort": target_port}]},
    }))
    .unwrap()
}

fn rollout(strategy: Value, status: Value) -> Rollout {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"strategy": strategy},
        "status": status,
    }))
    .unwrap()
}

fn binding(service: &str, port: Value, target_type: &str, arn: &str) -> Value {
    json!({"metadata": {"name": arn}, "spec": {"targetGroupARN": arn, "targetType": target_type,
        "serviceRef": {"name": service, "port": port}}})
}

fn endpoints(ips: &[&str]) -> Value {
    let addresses: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    json!({"subsets": [{"addresses": addresses, "ports": [{"name": "http", "port": 8080}]}]})
}

#[test]
fn blue_green_checks_the_active_service_between_the_switch_and_the_promotion() {
    let bg = json!({"blueGreen": {"activeService": "active", "previewService": "preview"}});
    let services = [service("active", "new", json!(8080))];
    let switched = rollout(
        bg.clone(),
        json!({"currentPodHash": "new", "stableRS": "old"}),
    );
    assert_eq!(
        wanted(&switched, &services).and_then(|s| s.metadata.name.as_deref()),
        Some("active")
    );
    let promoted = rollout(
        bg.clone(),
        json!({"currentPodHash": "new", "stableRS": "new"}),
    );
    assert!(wanted(&promoted, &services).is_none());
    let not_switched = [service("active", "old", json!(8080))];
    assert!(wanted(&switched, &not_switched).is_none());
    let analysing = rollout(
        bg,
        json!({"currentPodHash": "new", "stableRS": "old",
            "blueGreen": {"postPromotionAnalysisRunStatus": {"name": "a", "status": "Running"}}}),
    );
    assert!(wanted(&analysing, &services).is_none());
}

#[test]
fn an_alb_canary_checks_the_stable_service_once_promoted() {
    let alb = json!({"canary": {"stableService": "stable", "canaryService": "canary",
        "trafficRouting": {"alb": {"ingress": "i", "servicePort": 80}}}});
    let services = [service("stable", "new", json!(8080))];
    let promoted = rollout(
        alb.clone(),
        json!({"currentPodHash": "new", "stableRS": "new"}),
    );
    assert!(wanted(&promoted, &services).is_some());
    let updating = rollout(alb, json!({"currentPodHash": "new", "stableRS": "old"}));
    assert!(wanted(&updating, &services).is_none());
    let nginx = rollout(
        json!({"canary": {"stableService": "stable", "canaryService": "canary",
            "trafficRouting": {"nginx": {"stableIngress": "i"}}}}),
        json!({"currentPodHash": "new", "stableRS": "new"}),
    );
    assert!(wanted(&nginx, &services).is_none());
}

#[test]
fn only_ip_bindings_of_the_service_and_its_port_count() {
    let svc = service("active", "new", json!("http"));
    let listed = [
        binding("active", json!(80), "ip", "by-number"),
        binding("active", json!("http"), "ip", "by-name"),
        binding("active", json!(81), "ip", "other-port"),
        binding("other", json!(80), "ip", "other-service"),
        binding("active", json!(80), "instance", "nodes"),
    ];
    let got = bindings(&listed, &svc, &endpoints(&["10.0.0.1"]));
    // The Service's named target port is found in its endpoints.
    assert_eq!(
        got,
        [
            Binding {
                arn: "by-number".into(),
                port: 8080
            },
            Binding {
                arn: "by-name".into(),
                port: 8080
            },
        ]
    );
}

#[test]
fn endpoints_count_when_registered_whatever_their_health() {
    let b = Binding {
        arn: "tg".into(),
        port: 8080,
    };
    let ep = endpoints(&["10.0.0.1", "10.0.0.2"]);
    let targets = |t: &[(&str, i32)]| -> Vec<(String, i32)> {
        t.iter().map(|(i, p)| (i.to_string(), *p)).collect()
    };
    let c = check(
        &b,
        &ep,
        &targets(&[("10.0.0.1", 8080), ("10.0.0.9", 8080), ("10.0.0.2", 80)]),
    );
    assert_eq!((c.registered, c.total), (1, 2));
    let c = check(&b, &ep, &targets(&[("10.0.0.1", 8080), ("10.0.0.2", 8080)]));
    assert_eq!((c.registered, c.total), (2, 2));
}

#[test]
fn the_verdict_and_argos_events() {
    let r = |checks: Vec<Check>, error: Option<(&str, &str)>| Registration {
        service: "active".into(),
        checks,
        error: error.map(|(a, e)| (a.into(), e.into())),
    };
    let c = |arn: &str, registered, total| Check {
        arn: arn.into(),
        registered,
        total,
    };
    let (ok, events) = judge(&r(vec![c("tg", 2, 2)], None));
    assert!(ok);
    assert_eq!(events[0].reason, "TargetGroupVerified");
    assert_eq!(
        events[0].message,
        "Service active (TargetGroup tg) verified: 2 endpoints registered"
    );
    let (ok, events) = judge(&r(vec![c("tg", 1, 2)], None));
    assert!(!ok);
    assert_eq!(events[0].reason, "TargetGroupUnverified");
    assert_eq!(
        events[0].message,
        "Service active (TargetGroup tg) not verified: 1/2 endpoints registered"
    );
    let (ok, events) = judge(&r(vec![], Some(("", "forbidden"))));
    assert!(!ok);
    assert_eq!(
        events[0].message,
        "Failed to verify Service active (TargetGroup unknown): forbidden"
    );
    // Nothing bound: nothing to wait for.
    assert!(judge(&r(vec![], None)).0);
}
