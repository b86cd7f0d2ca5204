//! The StatefulSet or DaemonSet a Rollout drives (`rollouts.sluice.dev/statefulset`,
//! `rollouts.sluice.dev/daemonset`) and its ControllerRevisions, and the object a
//! `workloadRef` names, read fresh from the API server (the template decides the pod-template
//! hash; the revisions and pod counts decide the steps), and the one write Sluice makes of each.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplate;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;
use sluice_engine::daemonset::DaemonSetObserved;
use sluice_engine::statefulset::StatefulSetObserved;
use sluice_engine::workload::{WorkloadKind, WorkloadTarget};

use super::WriteError;

fn to_value(object: &impl serde::Serialize) -> Result<Value, WriteError> {
    serde_json::to_value(object).map_err(|e| WriteError::Api(e.to_string()))
}

/// The Deployment, ReplicaSet or PodTemplate a `workloadRef` names, as JSON.
pub(super) async fn read_workload(
    client: &Client,
    target: &WorkloadTarget,
) -> Result<Option<Value>, WriteError> {
    let resource = match target.kind {
        WorkloadKind::Deployment => ApiResource::erase::<Deployment>(&()),
        WorkloadKind::ReplicaSet => ApiResource::erase::<ReplicaSet>(&()),
        WorkloadKind::PodTemplate => ApiResource::erase::<PodTemplate>(&()),
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &target.namespace, &resource);
    let found = api.get_opt(&target.name).await?;
    found.map(|o| to_value(&o)).transpose()
}

/// The StatefulSet a Rollout drives, and its revisions.
pub(super) async fn read_stateful_set(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<StatefulSetObserved, WriteError> {
    let (stateful_set, revisions) = read::<StatefulSet>(client, namespace, name).await?;
    Ok(StatefulSetObserved {
        stateful_set,
        revisions,
    })
}

/// The DaemonSet a Rollout drives, and its revisions.
pub(super) async fn read_daemon_set(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<DaemonSetObserved, WriteError> {
    let (daemon_set, revisions) = read::<DaemonSet>(client, namespace, name).await?;
    Ok(DaemonSetObserved {
        daemon_set,
        revisions,
    })
}

/// The workload of kind `K` named `name` in `namespace` and the ControllerRevisions it
/// controls (found by its selector, kept by owner). One that does not exist reads as `None`.
async fn read<K>(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<(Option<Value>, Vec<Value>), WriteError>
where
    K: kube::Resource<DynamicType = ()>,
{
    // Read whole, as JSON, so that the write gives back every field as it was read.
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let Some(object) = api.get_opt(name).await? else {
        return Ok((None, Vec::new()));
    };
    let uid = object.metadata.uid.clone();
    let value = to_value(&object)?;
    let selector = serde_json::from_value::<LabelSelector>(value["spec"]["selector"].clone())
        .ok()
        .map(|s| sluice_engine::selector::format_selector(&s))
        .unwrap_or_default();
    let revisions = if selector.is_empty() {
        // An empty selector would list every revision of the namespace; none is ours then.
        Vec::new()
    } else {
        let api: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
        api.list(&ListParams::default().labels(&selector))
            .await?
            .items
            .into_iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
            })
            .map(|r| to_value(&r))
            .collect::<Result<_, _>>()?
    };
    Ok((Some(value), revisions))
}

/// Replaces the workload with its edited copy, which carries the resourceVersion it was read
/// at: one changed since is refused with a conflict, never overwritten.
pub(super) async fn replace<K>(
    client: &Client,
    namespace: &str,
    name: &str,
    object: &Value,
) -> Result<(), WriteError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let object: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| WriteError::Api(e.to_string()))?;
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    api.replace(name, &super::field_manager::post_params(), &object)
        .await?;
    Ok(())
}
