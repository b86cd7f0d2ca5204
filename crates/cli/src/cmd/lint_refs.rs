//! `lint`'s checks of the objects a Rollout references, when the file holds them: its
//! Services (their selector against the pod template's labels, and no other Rollout's
//! managed-by annotation), and its traffic router objects (Ingresses, VirtualServices, ...)
//! through each router's own reference check, the one the controller runs. As Argo's lint,
//! only objects in the file are checked: one the file lacks is not reported missing.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use serde_json::Value;
use sluice_api::Rollout;
use sluice_routers::kinds::{ObjectRef, RouterKind};
use sluice_routers::router::View;
use sluice_routers::{Desired, REGISTRY};

use sluice_engine::labels::{MANAGED_BY, POD_TEMPLATE_HASH};

/// Objects of a manifest a Rollout may reference.
#[derive(Debug, Default)]
pub struct Referenced {
    pub services: Vec<Service>,
    pub router_objects: BTreeMap<ObjectRef, Value>,
}

impl Referenced {
    /// Keeps `doc` if it is a Service or a router object; others are ignored.
    pub fn add(&mut self, doc: &Value) {
        let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        if group.is_empty() && kind == "Service" {
            if let Ok(service) = serde_json::from_value(doc.clone()) {
                self.services.push(service);
            }
            return;
        }
        let group = if kind == "Ingress" && group == "extensions" {
            "networking.k8s.io"
        } else {
            group
        };
        let Some(router_kind) = RouterKind::ALL
            .into_iter()
            .find(|k| k.kind() == kind && k.group() == group)
        else {
            return;
        };
        let meta = |field: &str| {
            doc.pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let key = ObjectRef::new(router_kind, meta("namespace"), meta("name"));
        self.router_objects.insert(key, doc.clone());
    }
}

/// The problems of the objects `rollout` references that `objects` holds, in Argo's field
/// error form.
pub fn reference_problems(rollout: &Rollout, objects: &Referenced) -> Vec<String> {
    let mut problems = service_problems(rollout, &objects.services);
    problems.extend(router_problems(rollout, &objects.router_objects));
    problems
}

/// The Services a Rollout names, with the field naming each.
fn named_services(rollout: &Rollout) -> Vec<(&'static str, String)> {
    let Some(strategy) = rollout.spec.strategy.as_ref() else {
        return Vec::new();
    };
    let bg = strategy.blue_green.as_ref();
    let canary = strategy.canary.as_ref();
    let ping_pong = canary.and_then(|c| c.ping_pong.as_ref());
    [
        (
            "spec.strategy.blueGreen.activeService",
            bg.and_then(|b| b.active_service.clone()),
        ),
        (
            "spec.strategy.blueGreen.previewService",
            bg.and_then(|b| b.preview_service.clone()),
        ),
        (
            "spec.strategy.canary.canaryService",
            canary.and_then(|c| c.canary_service.clone()),
        ),
        (
            "spec.strategy.canary.stableService",
            canary.and_then(|c| c.stable_service.clone()),
        ),
        (
            "spec.strategy.canary.pingPong.pingService",
            ping_pong.and_then(|p| p.ping_service.clone()),
        ),
        (
            "spec.strategy.canary.pingPong.pongService",
            ping_pong.and_then(|p| p.pong_service.clone()),
        ),
    ]
    .into_iter()
    .filter_map(|(path, name)| name.filter(|n| !n.is_empty()).map(|n| (path, n)))
    .collect()
}

fn service_problems(rollout: &Rollout, services: &[Service]) -> Vec<String> {
    let rollout_name = rollout.metadata.name.as_deref().unwrap_or_default();
    let labels = rollout
        .spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let mut problems = Vec::new();
    for (path, name) in named_services(rollout) {
        let Some(service) = services
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name.as_str()))
        else {
            continue;
        };
        let selector = service
            .spec
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        for (key, value) in &selector {
            if key != POD_TEMPLATE_HASH && labels.get(key) != Some(value) {
                problems.push(format!(
                    "{path}: Invalid value: \"{name}\": Service \"{name}\" has unmatch label \"{key}\" in rollout"
                ));
            }
        }
        let manager = service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MANAGED_BY));
        if manager.is_some_and(|m| m != rollout_name) {
            problems.push(format!(
                "{path}: Invalid value: \"{name}\": Service \"{name}\" is managed by another Rollout"
            ));
        }
    }
    problems
}

/// Each configured router's own check, for the routers with an object in the file (an object
/// the file lacks is not reported missing).
fn router_problems(rollout: &Rollout, objects: &BTreeMap<ObjectRef, Value>) -> Vec<String> {
    let namespace = rollout.metadata.namespace.clone().unwrap_or_default();
    // The file's objects in the Rollout's namespace, as the controller would find them.
    let objects: BTreeMap<ObjectRef, Value> = objects
        .iter()
        .map(|(key, value)| {
            let ns = if key.namespace.is_empty() {
                namespace.clone()
            } else {
                key.namespace.clone()
            };
            (
                ObjectRef::new(key.kind, ns, key.name.clone()),
                value.clone(),
            )
        })
        .collect();
    let canary = rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref());
    let (canary_service, stable_service) = (
        canary
            .and_then(|c| c.canary_service.clone())
            .unwrap_or_default(),
        canary
            .and_then(|c| c.stable_service.clone())
            .unwrap_or_default(),
    );
    let versions = Default::default();
    let Some(view) = View::of(
        rollout,
        &versions,
        &objects,
        (canary_service.clone(), stable_service.clone()),
    ) else {
        return Vec::new();
    };
    let desired = Desired {
        rollout: rollout.metadata.name.clone().unwrap_or_default(),
        namespace,
        canary_service,
        stable_service,
        max_weight: view.routing.max_traffic_weight(),
        managed_routes: view
            .routing
            .managed_routes
            .iter()
            .flatten()
            .filter_map(|r| r.name.clone())
            .collect(),
        ..Desired::default()
    };
    let mut problems = Vec::new();
    for router in REGISTRY.iter().filter(|r| r.configured(view.routing)) {
        let references = router.references(&view);
        if !references.iter().any(|r| objects.contains_key(r)) {
            continue;
        }
        if let Err(problem) = router.check(&view, &desired) {
            // An object the file lacks (another of the router's, or an optional one the
            // controller makes) is not this file's problem.
            let lacking = references.iter().any(|r| {
                !objects.contains_key(r) && problem.ends_with(&format!("\"{}\" not found", r.name))
            });
            if !lacking {
                problems.push(framed(&view, problem));
            }
        } else if router.key() == "nginx"
            && let Err(problem) = edit_check(*router, &view, &desired)
        {
            problems.push(problem);
        }
    }
    problems
}

/// A router's problem at Argo's field: an Istio VirtualService's route problems come without
/// it (`spec.strategy.canary.trafficRouting.istio.virtualService.name: Invalid value: ...`).
fn framed(view: &View<'_>, problem: String) -> String {
    if problem.starts_with("spec.") {
        return problem;
    }
    let Some(istio) = view.routing.istio.as_ref() else {
        return problem;
    };
    let (field, name) = match (&istio.virtual_service, &istio.virtual_services) {
        (Some(vs), _) => ("virtualService", vs.name.clone()),
        (None, Some(list)) => (
            "virtualServices",
            list.first().and_then(|vs| vs.name.clone()),
        ),
        (None, None) => return problem,
    };
    let name = name.unwrap_or_default();
    let name = name.split('.').next().unwrap_or_default();
    format!(
        "{}.istio.{field}.name: Invalid value: \"{name}\": {problem}",
        sluice_routers::router::PATH
    )
}

/// NGINX's stable Ingress is checked when its canary Ingress is made from it: an edit of
/// the router (thrown away) reports an Ingress without a rule for the stable Service, placed
/// at Argo's field.
fn edit_check(
    router: &dyn sluice_routers::TrafficRouter,
    view: &View<'_>,
    desired: &Desired,
) -> Result<(), String> {
    let calls = sluice_routers::router::Calls {
        desired,
        remove_managed_routes: false,
        step_route_names: Vec::new(),
        header_route: None,
        mirror_route: None,
        previous_additional: Vec::new(),
        versions: view.versions,
        rollout_name: view.name,
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    // A weight to route, so that the canary Ingress is made from the stable one.
    let desired = &Desired {
        weight: 1,
        ..desired.clone()
    };
    let calls = sluice_routers::router::Calls { desired, ..calls };
    let mut edits = sluice_routers::Edits::default();
    router.edit(view, &calls, &mut edits).map_err(|e| {
        match e
            .strip_prefix("ingress `")
            .and_then(|rest| rest.split_once('`'))
        {
            Some((ingress, _)) => {
                let nginx = view.routing.nginx.as_ref();
                let listed = nginx
                    .and_then(|n| n.stable_ingresses.as_ref())
                    .is_some_and(|l| l.iter().any(|i| i == ingress));
                let field = if listed {
                    "stableIngresses"
                } else {
                    "stableIngress"
                };
                format!(
                    "{}.nginx.{field}: Invalid value: \"{ingress}\": {e}",
                    sluice_routers::router::PATH
                )
            }
            None => e,
        }
    })
}

#[cfg(test)]
mod tests;
