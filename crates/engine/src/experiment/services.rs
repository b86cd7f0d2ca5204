//! The Service of a template that asks for one: it fronts the template's pods while they are
//! wanted, so that a Rollout can route traffic to them, and goes away once the pods are gone
//! (or at once when the template no longer asks for a Service).

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sluice_api::experiment::{Experiment, TemplateSpec, TemplateStatus};

use super::observed::{claimed_template, controller_ref, experiment_name};
use super::plan::ExperimentAction;
use super::replica_sets::{experiment_annotations, replica_set_name};
use crate::observed::ReplicaSetExt;

/// `service.name`, else the ReplicaSet's name. Nothing shortens it: a name over 63
/// characters makes the create fail, as in Argo.
pub fn service_name(experiment: &str, template: &TemplateSpec) -> String {
    let template_name = template.name.as_deref().unwrap_or_default();
    template
        .service
        .as_ref()
        .and_then(|s| s.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| replica_set_name(experiment, template_name))
}

/// One port per container port of the ReplicaSet's pods, target = port.
fn ports(rs: &ReplicaSet) -> Vec<ServicePort> {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .map(|p| p.containers.iter())
        .into_iter()
        .flatten()
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| ServicePort {
            name: p.name.clone(),
            protocol: p.protocol.clone(),
            port: p.container_port,
            target_port: Some(IntOrString::Int(p.container_port)),
            ..Default::default()
        })
        .collect()
}

/// The Service for a template, selecting its ReplicaSet's pods (hash included). `None` when
/// the pods declare no port: Argo then creates no Service.
pub fn build_service(
    experiment: &Experiment,
    uid: &str,
    template: &TemplateSpec,
    rs: &ReplicaSet,
) -> Option<Service> {
    let ports = ports(rs);
    if ports.is_empty() {
        return None;
    }
    let exp_name = experiment_name(experiment);
    Some(Service {
        metadata: ObjectMeta {
            name: Some(service_name(exp_name, template)),
            namespace: experiment.metadata.namespace.clone(),
            annotations: Some(experiment_annotations(
                exp_name,
                template.name.as_deref().unwrap_or_default(),
            )),
            owner_references: Some(vec![controller_ref(experiment, uid)]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: rs.metadata.labels.clone(),
            ports: Some(ports),
            ..Default::default()
        }),
        status: None,
    })
}

/// Creates or deletes the template's Service as the desired pod count asks, recording the
/// Service in the template status. Returns the writes, or Argo's error message (the template
/// then goes to Error) when the name is taken by a Service the template does not own.
pub(crate) fn reconcile_service(
    experiment: &Experiment,
    uid: &str,
    services: &[Service],
    template: &TemplateSpec,
    rs: &ReplicaSet,
    desired: i32,
    status: &mut TemplateStatus,
) -> Result<Vec<ExperimentAction>, String> {
    let exp_name = experiment_name(experiment);
    let template_name = template.name.as_deref().unwrap_or_default();
    let ours = |svc: &Service| {
        claimed_template(&svc.metadata, exp_name, uid) == Some(template_name)
            && svc.metadata.deletion_timestamp.is_none()
    };
    let delete = |svc: &Service| ExperimentAction::DeleteService {
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone(),
    };
    let mut actions = Vec::new();

    if template.service.is_none() {
        for svc in services.iter().filter(|s| ours(s)) {
            actions.push(delete(svc));
            status.service_name = None;
            status.pod_template_hash = None;
        }
        return Ok(actions);
    }

    let name = service_name(exp_name, template);
    let existing = services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(name.as_str()));
    if desired > 0 {
        match existing {
            None => {
                if let Some(svc) = build_service(experiment, uid, template, rs) {
                    actions.push(ExperimentAction::CreateService(Box::new(svc)));
                    status.service_name = Some(name);
                    status.pod_template_hash = rs.pod_hash().map(str::to_owned);
                }
            }
            Some(svc) if ours(svc) => {
                // Ours already; a status lost since it was made is recorded again.
                if status.service_name.is_none() {
                    status.service_name = Some(name);
                    status.pod_template_hash = rs.pod_hash().map(str::to_owned);
                }
            }
            Some(svc) if svc.metadata.deletion_timestamp.is_some() => {}
            Some(_) => {
                return Err(format!(
                    "Failed to create Service {name} for template '{template_name}': service \
                     {name} already exists and is not owned by experiment template {template_name}"
                ));
            }
        }
    } else if rs.available_replicas() == 0
        && let Some(svc) = existing.filter(|s| ours(s))
    {
        actions.push(delete(svc));
        status.service_name = None;
        status.pod_template_hash = None;
    }
    Ok(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::{EXPERIMENT_NAME, EXPERIMENT_TEMPLATE_NAME, POD_TEMPLATE_HASH};
    use serde_json::{Value, json};

    fn experiment() -> Experiment {
        serde_json::from_value(json!({
            "metadata": {"name": "ex", "namespace": "ns", "uid": "u1"},
            "spec": {"templates": []}
        }))
        .unwrap()
    }

    fn template(service: Value) -> TemplateSpec {
        serde_json::from_value(json!({"name": "canary", "service": service,
            "selector": {"matchLabels": {"app": "a"}}}))
        .unwrap()
    }

    fn rs(ports: Value, available: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "ex-canary", "labels": {"app": "a", POD_TEMPLATE_HASH: "h1"}},
            "spec": {"replicas": 1, "selector": {}, "template": {"spec": {"containers": [
                {"name": "c", "image": "i", "ports": ports}]}}},
            "status": {"replicas": 1, "availableReplicas": available}
        }))
        .unwrap()
    }

    fn svc(name: &str, owner_uid: &str, template: &str) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": "s1",
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
                    "name": "ex", "uid": owner_uid, "controller": true}],
                "annotations": {EXPERIMENT_NAME: "ex", EXPERIMENT_TEMPLATE_NAME: template}}
        }))
        .unwrap()
    }

    fn one_port() -> Value {
        json!([{"containerPort": 8080, "protocol": "TCP"}])
    }

    #[test]
    fn service_is_named_after_the_template_or_its_replica_set() {
        assert_eq!(service_name("ex", &template(json!({}))), "ex-canary");
        assert_eq!(service_name("ex", &template(json!({"name": "svc"}))), "svc");
        assert_eq!(
            service_name("ex", &template(json!({"name": ""}))),
            "ex-canary"
        );
    }

    #[test]
    fn service_has_a_port_per_container_port_and_selects_the_replica_set() {
        let ports = json!([
            {"name": "p1", "containerPort": 8080, "protocol": "TCP"},
            {"name": "p2", "containerPort": 8081, "protocol": "UDP"}]);
        let s = build_service(&experiment(), "u1", &template(json!({})), &rs(ports, 0)).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("ex-canary"));
        let annotations = s.metadata.annotations.unwrap();
        assert_eq!(annotations[EXPERIMENT_NAME], "ex");
        assert_eq!(annotations[EXPERIMENT_TEMPLATE_NAME], "canary");
        assert_eq!(s.metadata.owner_references.unwrap()[0].kind, "Experiment");
        let spec = s.spec.unwrap();
        assert_eq!(spec.selector.unwrap()[POD_TEMPLATE_HASH], "h1");
        let ports = spec.ports.unwrap();
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[1].name.as_deref(), Some("p2"));
        assert_eq!(ports[1].protocol.as_deref(), Some("UDP"));
        assert_eq!(ports[1].port, 8081);
        assert_eq!(ports[1].target_port, Some(IntOrString::Int(8081)));
        assert!(
            build_service(&experiment(), "u1", &template(json!({})), &rs(json!([]), 0)).is_none()
        );
    }

    #[test]
    fn create_keep_delete_rules() {
        let e = experiment();
        let with = template(json!({}));
        let without: TemplateSpec = serde_json::from_value(json!({"name": "canary"})).unwrap();
        let ours = svc("ex-canary", "u1", "canary");
        let foreign = svc("ex-canary", "other", "canary");
        let recorded = || TemplateStatus {
            service_name: Some("ex-canary".into()),
            pod_template_hash: Some("h1".into()),
            ..Default::default()
        };

        // Wanted pods and no Service: created and recorded.
        let mut st = TemplateStatus::default();
        let a = reconcile_service(&e, "u1", &[], &with, &rs(one_port(), 0), 1, &mut st).unwrap();
        assert!(matches!(a[..], [ExperimentAction::CreateService(_)]));
        assert_eq!(st, recorded());
        // No port: no Service.
        let mut st = TemplateStatus::default();
        let a = reconcile_service(&e, "u1", &[], &with, &rs(json!([]), 0), 1, &mut st).unwrap();
        assert!(a.is_empty());
        // Ours exists: kept.
        let mut st = recorded();
        let a = reconcile_service(
            &e,
            "u1",
            std::slice::from_ref(&ours),
            &with,
            &rs(one_port(), 1),
            1,
            &mut st,
        )
        .unwrap();
        assert!(a.is_empty());
        assert_eq!(st, recorded());
        // Someone else's: Argo's error.
        let mut st = TemplateStatus::default();
        let err = reconcile_service(&e, "u1", &[foreign], &with, &rs(one_port(), 1), 1, &mut st)
            .unwrap_err();
        assert_eq!(
            err,
            "Failed to create Service ex-canary for template 'canary': service ex-canary already \
             exists and is not owned by experiment template canary"
        );
        // No pods wanted but some still available: kept.
        let mut st = recorded();
        let a = reconcile_service(
            &e,
            "u1",
            std::slice::from_ref(&ours),
            &with,
            &rs(one_port(), 1),
            0,
            &mut st,
        )
        .unwrap();
        assert!(a.is_empty());
        // No pods wanted and none available: deleted, status cleared.
        let mut st = recorded();
        let a = reconcile_service(
            &e,
            "u1",
            std::slice::from_ref(&ours),
            &with,
            &rs(one_port(), 0),
            0,
            &mut st,
        )
        .unwrap();
        assert_eq!(
            a,
            [ExperimentAction::DeleteService {
                name: "ex-canary".into(),
                uid: Some("s1".into())
            }]
        );
        assert_eq!(st, TemplateStatus::default());
        // The template no longer asks for a Service: deleted at once.
        let mut st = recorded();
        let a =
            reconcile_service(&e, "u1", &[ours], &without, &rs(one_port(), 1), 1, &mut st).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(st, TemplateStatus::default());
    }
}
