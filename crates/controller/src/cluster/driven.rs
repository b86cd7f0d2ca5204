//! The StatefulSet or DaemonSet a Rollout drives (`rollouts.sluice.dev/statefulset`,
//! `rollouts.sluice.dev/daemonset`) and its ControllerRevisions, read fresh from the API
//! server (as a `workloadRef`'s object is: the revisions and pod counts decide the steps), and
//! the one write Sluice makes of it.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::Value;

use super::WriteError;

fn to_value(object: &impl serde::Serialize) -> Result<Value, WriteError> {
    serde_json::to_value(object).map_err(|e| WriteError::Api(e.to_string()))
}

/// The workload of kind `K` named `name` in `namespace` and the ControllerRevisions it
/// controls (found by its selector, kept by owner). One that does not exist reads as `None`.
pub(super) async fn read<K>(
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
    params: &PostParams,
) -> Result<(), WriteError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let object: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| WriteError::Api(e.to_string()))?;
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    api.replace(name, params, &object).await?;
    Ok(())
}
