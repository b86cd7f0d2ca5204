//! Experiment Services as extra backends of an HTTPRoute, and their removal once the
//! Experiment is over.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::rules::{backend_refs, backend_refs_mut, ref_name, references, set_ref_weight};
use crate::Desired;

/// Port used for an experiment Service that declares none.
const DEFAULT_PORT: i32 = 8080;

/// What the HTTPRoute experiment handling needs to know besides [`Desired`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Experiments {
    /// `status.canary.currentExperiment` is set.
    pub active: bool,
    /// Service names of the previous `status.canary.weights.additional`: the only backends
    /// this handling ever removes, so backends added by anyone else are left alone.
    pub previous_additional: Vec<String>,
    /// Port of each experiment Service that exists, from [`experiment_port`]. A destination
    /// whose Service is not here is not added (the plugin skips a Service it cannot read).
    pub ports: BTreeMap<String, i32>,
}

/// The port a backendRef to this Service uses: the port named `http`, else the first one,
/// else 8080.
pub fn experiment_port(service: &Value) -> i32 {
    let ports = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let number = |p: &Value| {
        p.get("port")
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    ports
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some("http"))
        .and_then(number)
        .or_else(|| ports.first().and_then(number))
        .unwrap_or(DEFAULT_PORT)
}

/// Applies the experiment to the first rule that references the stable or canary Service.
///
/// - Active with destinations: stable gets 100 − Σ experiment weights (the sum capped at
///   100); each destination not yet a backend is appended with the Rollout's namespace and
///   its Service's port. Existing experiment backends keep their weights.
/// - Active without destinations: nothing.
/// - Not active, and the rule still has backends of the previous destinations: they are
///   removed, stable gets 100 and canary 0.
///
/// The plugin only logs what goes wrong here, so nothing does: a route without such a rule
/// is left as it is.
pub(super) fn apply(rules: &mut [Value], experiments: &Experiments, desired: &Desired) {
    let Some(rule) = rules
        .iter_mut()
        .find(|r| references(r, &desired.stable_service) || references(r, &desired.canary_service))
    else {
        return;
    };
    if experiments.active {
        if !desired.additional.is_empty() {
            add_destinations(rule, experiments, desired);
        }
        return;
    }
    let is_previous = |r: &Value| {
        ref_name(r).is_some_and(|n| experiments.previous_additional.iter().any(|p| p == n))
    };
    if !backend_refs(rule).iter().any(is_previous) {
        return;
    }
    if let Some(refs) = rule.get_mut("backendRefs").and_then(Value::as_array_mut) {
        refs.retain(|r| !is_previous(r));
    }
    for r in backend_refs_mut(rule) {
        match ref_name(r) {
            Some(n) if n == desired.stable_service => set_ref_weight(r, 100),
            Some(n) if n == desired.canary_service => set_ref_weight(r, 0),
            _ => {}
        }
    }
}

fn add_destinations(rule: &mut Value, experiments: &Experiments, desired: &Desired) {
    let total: i32 = desired
        .additional
        .iter()
        .map(|d| d.weight)
        .fold(0, i32::saturating_add)
        .min(100);
    if let Some(stable) =
        backend_refs_mut(rule).find(|r| ref_name(r) == Some(desired.stable_service.as_str()))
    {
        set_ref_weight(stable, 100i32.saturating_sub(total));
    }
    for destination in &desired.additional {
        if references(rule, &destination.service_name) {
            continue;
        }
        let Some(port) = experiments.ports.get(&destination.service_name) else {
            continue;
        };
        if let Some(refs) = rule.get_mut("backendRefs").and_then(Value::as_array_mut) {
            refs.push(json!({
                "name": destination.service_name,
                "namespace": desired.namespace,
                "port": port,
                "weight": destination.weight,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_named_http_else_first_else_8080() {
        let service = |ports: Value| json!({"spec": {"ports": ports}});
        let cases = [
            (
                service(json!([{"name": "grpc", "port": 9090}, {"name": "http", "port": 80}])),
                80,
            ),
            (
                service(json!([{"name": "metrics", "port": 9100}, {"name": "web", "port": 80}])),
                9100,
            ),
            (service(json!([{"port": 3000}])), 3000),
            (service(json!([])), 8080),
            (json!({"spec": {}}), 8080),
            (json!(null), 8080),
        ];
        for (svc, want) in cases {
            assert_eq!(experiment_port(&svc), want, "{svc}");
        }
    }
}
