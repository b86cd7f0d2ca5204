//! The verdicts of [`super::verify`] on what AWS says, for every case of Argo's ALB
//! verification: off, nothing to verify, verified, not yet, an experiment's group, a load
//! balancer not found and an AWS error.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sluice_api::rollout::{Rollout, RolloutStatus};

use super::fixtures::{cfg, desired};
use super::verify::{key, verify, wanted};
use crate::kinds::ApiVersions;
use crate::router::{Notice, Report, View};
use crate::{Desired, Destination};

const INGRESS: &str = "alb-canary-ingress";
const CANARY_ARN: &str = "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/canary/c1";
const STABLE_ARN: &str = "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/stable/s1";
const LB_ARN: &str = "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/lb/l1";

/// The corpus Rollout at its first step (setWeight 10) of an update, with `status` merged in.
fn rollout(status: Value) -> Rollout {
    let mut ro = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
        "metadata": {"name": "alb-canary", "namespace": "shop"},
        "spec": {"strategy": {"canary": {
            "canaryService": "alb-canary-desired", "stableService": "alb-canary-stable",
            "trafficRouting": {"alb": {"ingress": INGRESS, "rootService": "alb-canary-root",
                "servicePort": 80}},
            "steps": [{"setWeight": 10}, {"pause": {}}]}}},
        "status": {"stableRS": "old", "currentPodHash": "new", "currentStepIndex": 0},
    });
    if let (Some(s), Some(extra)) = (ro["status"].as_object_mut(), status.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(ro).unwrap()
}

fn group(name: &str, arn: &str, service: &str, weight: Option<i64>) -> Value {
    json!({"name": name, "arn": arn, "weight": weight,
        "tags": {"ingress.k8s.aws/resource": format!("shop/{INGRESS}-{service}:80")}})
}

fn aws(canary_weight: i64) -> Value {
    json!({"loadBalancers": [{"hostname": "lb.example", "name": "lb", "arn": LB_ARN,
        "targetGroups": [
            group("canary", CANARY_ARN, "alb-canary-desired", Some(canary_weight)),
            group("stable", STABLE_ARN, "alb-canary-stable", Some(100 - canary_weight)),
        ]}]})
}

/// The verdict, the status and the events for `aws` with verification `on`.
fn judge(
    ro: &Rollout,
    on: bool,
    aws: Option<Value>,
    d: &Desired,
) -> (Option<bool>, RolloutStatus, Vec<Notice>) {
    let versions = ApiVersions {
        aws_verify_target_group: on,
        ..ApiVersions::default()
    };
    let empty = BTreeMap::new();
    let view = View::of(ro, &versions, &empty, Default::default()).unwrap();
    let objects: BTreeMap<_, _> = aws.into_iter().map(|a| (key(&view, INGRESS), a)).collect();
    let view = View::of(ro, &versions, &objects, Default::default()).unwrap();
    let mut status = ro.status.clone().unwrap_or_default();
    let mut report = Report {
        status: &mut status,
        events: Vec::new(),
    };
    let verdict = verify(&view, &cfg(), &[INGRESS.to_string()], d, &mut report);
    let events = report.events;
    (verdict, status, events)
}

#[test]
fn off_clears_the_alb_status_and_says_nothing() {
    let ro = rollout(json!({"alb": {"ingress": INGRESS}, "albs": [{"ingress": INGRESS}]}));
    let (verdict, status, events) = judge(&ro, false, Some(aws(10)), &desired());
    assert_eq!(verdict, None);
    assert_eq!((status.alb, status.albs), (None, None));
    assert!(events.is_empty());
}

#[test]
fn the_weight_routed_verifies_the_step_and_fills_the_status_as_argo() {
    let (verdict, status, events) = judge(&rollout(json!({})), true, Some(aws(10)), &desired());
    assert_eq!(verdict, Some(true));
    let alb = serde_json::to_value(status.alb.unwrap()).unwrap();
    assert_eq!(
        alb,
        json!({
            "loadBalancer": {"name": "lb", "arn": LB_ARN, "fullName": "lb/l1"},
            "canaryTargetGroup": {"name": "canary", "arn": CANARY_ARN, "fullName": "canary/c1"},
            "stableTargetGroup": {"name": "stable", "arn": STABLE_ARN, "fullName": "stable/s1"},
            "ingress": INGRESS,
        })
    );
    assert_eq!(serde_json::to_value(status.albs.unwrap()).unwrap(), json!([alb]));
    assert_eq!(
        events,
        [Notice::normal(
            "TargetGroupVerified",
            format!(
                "Service alb-canary-desired (TargetGroup {CANARY_ARN}) verified: canary weight 10 set"
            )
        )]
    );
}

#[test]
fn a_weight_not_routed_yet_holds_the_step() {
    let (verdict, _, events) = judge(&rollout(json!({})), true, Some(aws(0)), &desired());
    assert_eq!(verdict, Some(false));
    assert_eq!(
        events,
        [Notice::warning(
            "TargetGroupUnverified",
            format!(
                "Service alb-canary-desired (TargetGroup {CANARY_ARN}) not verified: canary weight 10 not yet set (current: 0)"
            )
        )]
    );
}

#[test]
fn an_experiment_group_must_carry_its_weight_too() {
    let with_experiment = Desired {
        additional: vec![Destination {
            service_name: "exp".into(),
            pod_template_hash: "e".into(),
            weight: 5,
        }],
        ..desired()
    };
    let mut answer = aws(10);
    let groups = answer["loadBalancers"][0]["targetGroups"].as_array_mut().unwrap();
    groups.push(group("exp", "arn:x/exp/e1", "exp", Some(0)));
    let (verdict, _, events) = judge(&rollout(json!({})), true, Some(answer.clone()), &with_experiment);
    assert_eq!(verdict, Some(false));
    assert!(events.iter().any(|n| n.message
        == "Service exp (TargetGroup arn:x/exp/e1) not verified: canary weight 5 not yet set (current: 0)"));
    answer["loadBalancers"][0]["targetGroups"][2]["weight"] = json!(5);
    let (verdict, _, _) = judge(&rollout(json!({})), true, Some(answer), &with_experiment);
    assert_eq!(verdict, Some(true));
    // Without its target group it cannot be verified.
    let (verdict, _, _) = judge(&rollout(json!({})), true, Some(aws(10)), &with_experiment);
    assert_eq!(verdict, Some(false));
}

#[test]
fn a_missing_load_balancer_or_an_aws_error_is_not_verified_with_argos_warning() {
    let not_found = json!({"loadBalancers": [{"hostname": "lb.example", "notFound": true}]});
    let (verdict, _, events) = judge(&rollout(json!({})), true, Some(not_found), &desired());
    assert_eq!(verdict, Some(false));
    assert_eq!(
        events,
        [Notice::warning(
            "LoadBalancerNotFound",
            "Failed to find load balancer: lb.example".into()
        )]
    );
    let error = json!({"loadBalancers": [{"hostname": "lb.example", "error": "throttled"}]});
    let (verdict, _, events) = judge(&rollout(json!({})), true, Some(error), &desired());
    assert_eq!(verdict, Some(false));
    assert_eq!(
        events,
        [Notice::warning(
            "TargetGroupVerifyError",
            "Failed to verify Service alb-canary-desired (TargetGroup unknown): throttled".into()
        )]
    );
    // Not read at all (the reading failed before AWS): not verified, nothing claimed.
    let (verdict, _, _) = judge(&rollout(json!({})), true, None, &desired());
    assert_eq!(verdict, Some(false));
}

#[test]
fn nothing_to_verify_reads_aws_once_to_fill_the_status_then_leaves_it() {
    // At the pause step: nothing to verify.
    let paused = |extra: Value| {
        let mut s = json!({"currentStepIndex": 1});
        s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        rollout(s)
    };
    let versions = ApiVersions {
        aws_verify_target_group: true,
        ..ApiVersions::default()
    };
    let empty = BTreeMap::new();
    let unfilled = paused(json!({}));
    let filled = paused(json!({"alb": {"ingress": INGRESS}}));
    let view = |ro| View::of(ro, &versions, &empty, Default::default()).unwrap();
    assert!(wanted(&view(&unfilled)));
    assert!(!wanted(&view(&filled)));
    let (verdict, status, _) = judge(&unfilled, true, Some(aws(10)), &desired());
    assert_eq!(verdict, Some(true));
    assert!(status.alb.is_some());
    let (verdict, status, events) = judge(&filled, true, None, &desired());
    assert_eq!((verdict, events.len()), (None, 0));
    assert_eq!(status.alb, filled.status.as_ref().unwrap().alb);
    // Fully promoted: nothing to verify either.
    let promoted = rollout(json!({"currentPodHash": "old", "alb": {}}));
    assert!(!wanted(&view(&promoted)));
    // At the setWeight step of an update: always.
    assert!(wanted(&view(&rollout(json!({"alb": {}})))));
}
