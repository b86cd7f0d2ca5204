//! `--aws-verify-target-group`, after the traffic has moved: before the ReplicaSets that
//! served the old version are scaled down, the AWS target groups bound to the Service now
//! selecting the new pods (TargetGroupBindings of `targetType: ip`) must have every pod of
//! that Service registered, as Argo checks them. Otherwise the load balancer could still be
//! sending traffic to the old pods only.
//!
//! The controller gathers what this module needs ([`wanted`] says which Service, [`bindings`]
//! which target groups to ask AWS about) into a [`Registration`]; [`judge`] decides.

use k8s_openapi::api::core::v1::Service;
use serde_json::Value;
use sluice_api::rollout::Rollout;

use crate::labels::POD_TEMPLATE_HASH;

/// Events Argo publishes for the check.
pub const VERIFIED_REASON: &str = "TargetGroupVerified";
pub const UNVERIFIED_REASON: &str = "TargetGroupUnverified";
pub const VERIFY_ERROR_REASON: &str = "TargetGroupVerifyError";

/// What the controller found for one Service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registration {
    pub service: String,
    /// One per binding checked, in the order the bindings were listed.
    pub checks: Vec<Check>,
    /// Listing the bindings or the Service's endpoints, or asking AWS, failed: with the target
    /// group's ARN when it was one group's call.
    pub error: Option<(String, String)>,
}

/// One target group: how many of the Service's endpoints are registered in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub arn: String,
    pub registered: usize,
    pub total: usize,
}

/// One TargetGroupBinding to check: its target group and the pods' port in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub arn: String,
    pub port: i32,
}

/// The Service whose target registration must be checked before old pods go, if any (Argo's
/// `shouldVerifyTargetGroup`): for blue-green, the active Service once it selects the new
/// pods and until the post-promotion analysis starts; for an ALB canary, the stable Service
/// once the update is promoted and it selects the new pods.
pub fn wanted<'s>(rollout: &Rollout, services: &'s [Service]) -> Option<&'s Service> {
    let status = rollout.status.as_ref()?;
    let desired = status.current_pod_hash.as_deref()?;
    let strategy = rollout.spec.strategy.as_ref()?;
    let name = if let Some(bg) = &strategy.blue_green {
        let started_post_promotion = status
            .blue_green
            .as_ref()
            .is_some_and(|b| b.post_promotion_analysis_run_status.is_some());
        if status.stable_rs.as_deref() == Some(desired) || started_post_promotion {
            return None;
        }
        bg.active_service.as_deref()?
    } else {
        let canary = strategy.canary.as_ref()?;
        canary.traffic_routing.as_ref()?.alb.as_ref()?;
        if status.stable_rs.as_deref() != Some(desired) {
            return None;
        }
        canary.stable_service.as_deref()?
    };
    services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name))
        .filter(|s| selected_hash(s) == Some(desired))
}

fn selected_hash(svc: &Service) -> Option<&str> {
    svc.spec
        .as_ref()?
        .selector
        .as_ref()?
        .get(POD_TEMPLATE_HASH)
        .map(String::as_str)
}

/// The bindings of `service` to check, from the TargetGroupBindings of its namespace: those
/// naming it whose port matches one of its ports by number or name, of `targetType: ip`
/// (instance targets are nodes, not pods), with a port the pods can be found at.
pub fn bindings(bindings: &[Value], service: &Service, endpoints: &Value) -> Vec<Binding> {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for b in bindings {
        let spec = &b["spec"];
        if spec["serviceRef"]["name"].as_str() != Some(name) {
            continue;
        }
        let wanted = &spec["serviceRef"]["port"];
        let Some(port) = ports.iter().find(|p| match wanted {
            Value::Number(n) => n.as_i64() == Some(i64::from(p.port)),
            Value::String(s) => !s.is_empty() && p.name.as_deref() == Some(s),
            _ => false,
        }) else {
            continue;
        };
        if spec["targetType"].as_str() != Some("ip") {
            continue;
        }
        let target = match &port.target_port {
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) if *n > 0 => {
                Some(*n)
            }
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s)) => {
                named_port(endpoints, s)
            }
            // No target port: the Service's own port.
            _ => Some(port.port),
        };
        if let (Some(port), Some(arn)) = (target, spec["targetGroupARN"].as_str()) {
            out.push(Binding {
                arn: arn.to_string(),
                port,
            });
        }
    }
    out
}

/// The number of a named port in the Service's Endpoints.
fn named_port(endpoints: &Value, name: &str) -> Option<i32> {
    endpoints["subsets"]
        .as_array()?
        .iter()
        .flat_map(|s| s["ports"].as_array().into_iter().flatten())
        .find(|p| p["name"].as_str() == Some(name))
        .and_then(|p| p["port"].as_i64())
        .and_then(|p| i32::try_from(p).ok())
}

/// How many of the Service's endpoint addresses (`ip:port`) are among `targets`, the
/// target group's registered `(id, port)` pairs; health does not matter, as in Argo.
pub fn check(binding: &Binding, endpoints: &Value, targets: &[(String, i32)]) -> Check {
    let addresses: std::collections::BTreeSet<String> = endpoints["subsets"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["addresses"].as_array().into_iter().flatten())
        .filter_map(|a| a["ip"].as_str())
        .map(|ip| format!("{ip}:{}", binding.port))
        .collect();
    let registered = targets
        .iter()
        .map(|(id, port)| format!("{id}:{port}"))
        .filter(|t| addresses.contains(t))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    Check {
        arn: binding.arn.clone(),
        registered,
        total: addresses.len(),
    }
}

/// Whether the old pods may go, with Argo's events: every check complete and no error.
pub fn judge(registration: &Registration) -> (bool, Vec<crate::Event>) {
    let svc = &registration.service;
    if let Some((arn, error)) = &registration.error {
        let arn = if arn.is_empty() { "unknown" } else { arn };
        let message = format!("Failed to verify Service {svc} (TargetGroup {arn}): {error}");
        return (
            false,
            vec![crate::Event::warning(VERIFY_ERROR_REASON, message)],
        );
    }
    let mut events = Vec::new();
    for c in &registration.checks {
        if c.registered != c.total {
            events.push(crate::Event::warning(
                UNVERIFIED_REASON,
                format!(
                    "Service {svc} (TargetGroup {}) not verified: {}/{} endpoints registered",
                    c.arn, c.registered, c.total
                ),
            ));
            return (false, events);
        }
        events.push(crate::Event::normal(
            VERIFIED_REASON,
            format!(
                "Service {svc} (TargetGroup {}) verified: {} endpoints registered",
                c.arn, c.registered
            ),
        ));
    }
    (true, events)
}

#[cfg(test)]
mod tests;
