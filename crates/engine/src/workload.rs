//! A Rollout that takes its pod template from another object (`spec.workloadRef`): a
//! Deployment, a ReplicaSet or a PodTemplate of its namespace. The controller reads that
//! object; here it is resolved into the Rollout in memory (the template, and the selector
//! when the Rollout has none), exactly as Argo does: the resolved fields are never written
//! back, and the pod-template hash is computed from the resolved template as from an inline
//! one, so an update of the referenced template is an update of the Rollout.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use sluice_api::rollout::Rollout;

/// The generation of the referenced workload the Rollout was last told of; Argo CD's health
/// check compares it with `status.workloadObservedGeneration`.
pub const WORKLOAD_GENERATION: &str = "rollout.argoproj.io/workload-generation";

/// Where a `workloadRef` points: what the controller reads and watches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadTarget {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
}

/// The kinds a Rollout may take its template from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadKind {
    Deployment,
    ReplicaSet,
    PodTemplate,
}

impl WorkloadKind {
    pub fn of(kind: &str) -> Option<Self> {
        match kind {
            "Deployment" => Some(Self::Deployment),
            "ReplicaSet" => Some(Self::ReplicaSet),
            "PodTemplate" => Some(Self::PodTemplate),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::ReplicaSet => "ReplicaSet",
            Self::PodTemplate => "PodTemplate",
        }
    }

    /// The resource as Kubernetes names it in its errors (`deployments.apps`).
    fn resource(self) -> &'static str {
        match self {
            Self::Deployment => "deployments.apps",
            Self::ReplicaSet => "replicasets.apps",
            Self::PodTemplate => "podtemplates",
        }
    }
}

/// The object the Rollout's `workloadRef` names, if it names one of a supported kind.
pub fn target(rollout: &Rollout) -> Option<WorkloadTarget> {
    let workload = rollout.spec.workload_ref.as_ref()?;
    let kind = WorkloadKind::of(workload.kind.as_deref()?)?;
    let name = workload.name.clone().filter(|n| !n.is_empty())?;
    Some(WorkloadTarget {
        kind,
        namespace: rollout.metadata.namespace.clone().unwrap_or_default(),
        name,
    })
}

/// The referenced workload's `metadata.generation`, as Argo records it (0 when unset).
pub fn generation(workload: &Value) -> String {
    workload["metadata"]["generation"]
        .as_i64()
        .unwrap_or(0)
        .to_string()
}

/// The Rollout with its template (and selector) taken from `workload`, and the annotation
/// that records the workload's generation set in memory; `Ok(None)` for a Rollout without a
/// `workloadRef`. `Err` is the text of Argo's `InvalidSpec` message: the workload is missing
/// or holds no readable template.
pub fn resolve(rollout: &Rollout, workload: Option<&Value>) -> Result<Option<Rollout>, String> {
    let Some(target) = target(rollout) else {
        return Ok(None);
    };
    let Some(object) = workload else {
        return Err(format!(
            "{} \"{}\" not found",
            target.kind.resource(),
            target.name
        ));
    };
    let (template, selector) = match target.kind {
        WorkloadKind::PodTemplate => (&object["template"], &Value::Null),
        WorkloadKind::Deployment | WorkloadKind::ReplicaSet => {
            (&object["spec"]["template"], &object["spec"]["selector"])
        }
    };
    let template: PodTemplateSpec = serde_json::from_value(template.clone()).map_err(|e| {
        format!(
            "cannot read the pod template of {} \"{}\": {e}",
            target.kind.name(),
            target.name
        )
    })?;
    let mut resolved = rollout.clone();
    resolved.spec.template = Some(template);
    if resolved.spec.selector.is_none() && !selector.is_null() {
        let selector: LabelSelector = serde_json::from_value(selector.clone()).map_err(|e| {
            format!(
                "cannot read the selector of {} \"{}\": {e}",
                target.kind.name(),
                target.name
            )
        })?;
        resolved.spec.selector = Some(selector);
    }
    resolved
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(WORKLOAD_GENERATION.to_string(), generation(object));
    Ok(Some(resolved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rollout(workload_ref: Value) -> Rollout {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"workloadRef": workload_ref, "strategy": {"canary": {}}}
        }))
        .unwrap()
    }

    fn template(image: &str) -> Value {
        json!({"metadata": {"labels": {"app": "web"}},
               "spec": {"containers": [{"name": "web", "image": image}]}})
    }

    #[test]
    fn a_deployment_gives_its_template_selector_and_generation() {
        let ro = rollout(json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}));
        let deployment = json!({
            "metadata": {"name": "web", "generation": 3},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template("a:1")}
        });
        let resolved = resolve(&ro, Some(&deployment)).unwrap().unwrap();
        let spec = &resolved.spec;
        assert_eq!(
            spec.template
                .as_ref()
                .unwrap()
                .spec
                .as_ref()
                .unwrap()
                .containers[0]
                .image,
            Some("a:1".into())
        );
        assert_eq!(
            spec.selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()["app"],
            "web"
        );
        assert_eq!(
            resolved.metadata.annotations.as_ref().unwrap()[WORKLOAD_GENERATION],
            "3"
        );
        // The hash is the hash of the same template written inline.
        let mut inline = ro.clone();
        inline.spec.template = Some(serde_json::from_value(template("a:1")).unwrap());
        assert_eq!(
            crate::pod_hash::template_hash(&resolved),
            crate::pod_hash::template_hash(&inline)
        );
    }

    #[test]
    fn the_rollouts_own_selector_wins_and_a_pod_template_has_none() {
        let mut ro = rollout(json!({"apiVersion": "v1", "kind": "PodTemplate", "name": "web"}));
        let own: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"app": "mine"}})).unwrap();
        ro.spec.selector = Some(own.clone());
        let pod_template = json!({"metadata": {"name": "web"}, "template": template("b:2")});
        let resolved = resolve(&ro, Some(&pod_template)).unwrap().unwrap();
        assert_eq!(resolved.spec.selector, Some(own));
        // Core objects without a spec carry no generation: Argo records 0.
        assert_eq!(
            resolved.metadata.annotations.as_ref().unwrap()[WORKLOAD_GENERATION],
            "0"
        );
    }

    #[test]
    fn a_missing_workload_is_reported_as_kubernetes_names_it() {
        let cases = [
            (
                "apps/v1",
                "Deployment",
                "deployments.apps \"web\" not found",
            ),
            (
                "apps/v1",
                "ReplicaSet",
                "replicasets.apps \"web\" not found",
            ),
            ("v1", "PodTemplate", "podtemplates \"web\" not found"),
        ];
        for (api_version, kind, message) in cases {
            let ro = rollout(json!({"apiVersion": api_version, "kind": kind, "name": "web"}));
            assert_eq!(resolve(&ro, None).unwrap_err(), message);
        }
        assert!(resolve(&rollout(Value::Null), None).unwrap().is_none());
    }
}
