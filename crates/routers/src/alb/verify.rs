//! `--aws-verify-target-group`: whether the load balancer behind each ALB Ingress routes the
//! canary weight the Ingress asks for, as the AWS Load Balancer Controller applies it some
//! time after the annotation changes.
//!
//! The controller reads what AWS says into one object of kind
//! [`RouterKind::AwsLoadBalancer`] per Ingress (named after it); this module judges it, as
//! Argo's ALB router does: the target group tagged `<ns>/<ingress>-<canary>:<port>` (and one
//! per experiment Service) must carry the desired weight in the listener rules. It fills
//! `status.alb` and `status.albs` and publishes Argo's events on the way.
//!
//! The object, as the controller writes it:
//! ```json
//! {"loadBalancers": [
//!    {"hostname": "h", "name": "n", "arn": "arn:...", "targetGroups": [
//!       {"name": "n", "arn": "arn:...", "tags": {"k": "v"}, "weight": 10}]},
//!    {"hostname": "h2", "notFound": true},
//!    {"hostname": "h3", "error": "..."}]}
//! ```
//! in the order of the Ingress's `status.loadBalancer.ingress[].hostname`; the controller stops
//! at the first load balancer not found or the first AWS error, as Argo does.

use serde_json::Value;
use sluice_api::rollout::{AlbStatus, AlbTrafficRouting, AwsResourceRef, Rollout};

use crate::kinds::{ObjectRef, RouterKind};
use crate::router::{Notice, Report, View};
use crate::{Desired, Destination};

pub const VERIFIED_REASON: &str = "TargetGroupVerified";
pub const UNVERIFIED_REASON: &str = "TargetGroupUnverified";
pub const VERIFY_ERROR_REASON: &str = "TargetGroupVerifyError";
pub const NOT_FOUND_REASON: &str = "LoadBalancerNotFound";

/// The object AWS's view of `ingress` is kept under.
pub fn key(view: &View<'_>, ingress: &str) -> ObjectRef {
    view.named(RouterKind::AwsLoadBalancer, ingress)
}

/// Whether the objects are needed this reconcile: verification is on, and the weight is one
/// to verify or the status has not been filled yet (Argo fills it once even when there is
/// nothing to verify, then leaves AWS alone until there is).
pub fn wanted(view: &View<'_>) -> bool {
    let status = view.rollout.status.as_ref();
    view.versions.aws_verify_target_group
        && (should_verify(view.rollout, None)
            || status.is_none_or(|s| s.alb.is_none() && s.albs.is_none()))
}

/// Argo's `ShouldVerifyWeight`: a stable ReplicaSet exists, the update is not fully
/// promoted, and the current step is a `setWeight`, or the steps are over (with the weight
/// at its maximum, when `desired` is given).
fn should_verify(rollout: &Rollout, desired: Option<&Desired>) -> bool {
    let Some(status) = rollout.status.as_ref() else {
        return false;
    };
    let stable = status.stable_rs.as_deref().unwrap_or_default();
    if stable.is_empty() || status.current_pod_hash.as_deref() == Some(stable) {
        return false;
    }
    let steps = rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.steps.as_deref())
        .unwrap_or_default();
    let index = status.current_step_index.unwrap_or(0);
    match usize::try_from(index).ok().and_then(|i| steps.get(i)) {
        Some(step) => step.set_weight.is_some(),
        None => desired.is_none_or(|d| d.weight == d.max_weight),
    }
}

/// The verdict for `desired` over `ingresses`, with `status.alb(s)` and the events. `None`
/// when verification is off (the ALB status is then cleared, as Argo does) or when there is
/// nothing to verify now and the status was filled before.
pub fn verify(
    view: &View<'_>,
    cfg: &AlbTrafficRouting,
    ingresses: &[String],
    desired: &Desired,
    report: &mut Report<'_>,
) -> Option<bool> {
    if !view.versions.aws_verify_target_group {
        report.status.alb = None;
        report.status.albs = None;
        return None;
    }
    let filled = view
        .rollout
        .status
        .as_ref()
        .is_some_and(|s| s.alb.is_some() || s.albs.is_some());
    if !should_verify(view.rollout, Some(desired)) && filled {
        return None;
    }
    let status = &mut *report.status;
    let mut alb = status.alb.take().unwrap_or_else(empty_status);
    let mut albs = status.albs.take().unwrap_or_default();
    if albs.len() != ingresses.len() {
        albs = vec![empty_status(); ingresses.len()];
    }
    let port = cfg.service_port.unwrap_or(0);
    let tag_key = view.versions.alb_tag_key_resource_id.as_str();
    let mut verified = 0usize;
    let mut expected = 0usize;
    let mut verdict = None;
    'ingresses: for (i, ingress) in ingresses.iter().enumerate() {
        expected += 1 + desired.additional.len();
        let Some(aws) = view.objects.get(&key(view, ingress)) else {
            verdict = Some(false);
            break;
        };
        let mut groups: Vec<&Value> = Vec::new();
        for lb in list(aws, "loadBalancers") {
            let host = text(lb, "hostname");
            if let Some(error) = lb.get("error").and_then(Value::as_str) {
                report.events.push(Notice::warning(
                    VERIFY_ERROR_REASON,
                    format!(
                        "Failed to verify Service {} (TargetGroup unknown): {error}",
                        desired.canary_service
                    ),
                ));
                verdict = Some(false);
                break 'ingresses;
            }
            if lb.get("notFound").and_then(Value::as_bool) == Some(true) {
                report.events.push(Notice::warning(
                    NOT_FOUND_REASON,
                    format!("Failed to find load balancer: {host}"),
                ));
                verdict = Some(false);
                break 'ingresses;
            }
            for s in [&mut albs[i], &mut alb] {
                s.ingress = Some(ingress.clone());
                s.load_balancer = Some(resource(lb, 2));
            }
            groups.extend(list(lb, "targetGroups"));
        }
        let id = |service: &str| format!("{}/{ingress}-{service}:{port}", view.namespace);
        let canary_id = id(&desired.canary_service);
        let stable_id = id(&desired.stable_service);
        for group in groups {
            let tag = group
                .pointer(&format!("/tags/{}", tag_key.replace('~', "~0").replace('/', "~1")))
                .and_then(Value::as_str)
                .unwrap_or_default();
            for s in [&mut albs[i], &mut alb] {
                if tag == canary_id {
                    s.canary_target_group = Some(resource(group, 1));
                } else if tag == stable_id {
                    s.stable_target_group = Some(resource(group, 1));
                }
            }
            let Some(weight) = group.get("weight").and_then(Value::as_i64) else {
                continue;
            };
            let destination = if tag == canary_id {
                Some((desired.canary_service.as_str(), desired.weight))
            } else {
                experiment(&desired.additional, tag, &id)
            };
            let Some((service, want)) = destination else {
                continue;
            };
            let arn = text(group, "arn");
            if weight == i64::from(want) {
                verified += 1;
                report.events.push(Notice::normal(
                    VERIFIED_REASON,
                    format!("Service {service} (TargetGroup {arn}) verified: canary weight {want} set"),
                ));
            } else {
                report.events.push(Notice::warning(
                    UNVERIFIED_REASON,
                    format!(
                        "Service {service} (TargetGroup {arn}) not verified: canary weight {want} not yet set (current: {weight})"
                    ),
                ));
            }
        }
    }
    status.alb = Some(alb);
    status.albs = Some(albs);
    Some(verdict.unwrap_or(verified == expected))
}

/// The experiment Service whose target group carries `tag`, with its weight.
fn experiment<'d>(
    additional: &'d [Destination],
    tag: &str,
    id: &impl Fn(&str) -> String,
) -> Option<(&'d str, i32)> {
    additional
        .iter()
        .find(|d| id(&d.service_name) == tag)
        .map(|d| (d.service_name.as_str(), d.weight))
}

/// An ALB status as Argo's Go types serialize an empty one: every reference present, blank.
fn empty_status() -> AlbStatus {
    AlbStatus {
        load_balancer: Some(blank()),
        canary_target_group: Some(blank()),
        stable_target_group: Some(blank()),
        ingress: None,
    }
}

fn blank() -> AwsResourceRef {
    AwsResourceRef {
        name: Some(String::new()),
        arn: Some(String::new()),
        full_name: Some(String::new()),
    }
}

/// Name, ARN and full name of a load balancer (the ARN from its 3rd `/` segment on) or a
/// target group (from its 2nd), blank when the ARN has fewer segments, as in Argo.
fn resource(object: &Value, skip: usize) -> AwsResourceRef {
    let arn = text(object, "arn");
    let parts: Vec<&str> = arn.split('/').collect();
    let full_name = if parts.len() > skip {
        parts[skip..].join("/")
    } else {
        String::new()
    };
    AwsResourceRef {
        name: Some(text(object, "name").to_string()),
        arn: Some(arn.to_string()),
        full_name: Some(full_name),
    }
}

fn list<'v>(object: &'v Value, field: &str) -> impl Iterator<Item = &'v Value> {
    object
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn text<'v>(object: &'v Value, field: &str) -> &'v str {
    object.get(field).and_then(Value::as_str).unwrap_or_default()
}
