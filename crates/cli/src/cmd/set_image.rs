//! `set image`: change container images of the pod template.
//!
//! A merge patch would replace the whole `containers` list, so the object is read, changed
//! and written back with its resourceVersion, retrying when someone else wrote in between.
//! The object is handled as plain JSON so fields this version does not know survive.

use anyhow::{Context as _, bail};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::Value;
use sluice_api::Rollout;

use super::{emit, explain, get_rollout, rollouts};
use crate::cli::{ImageUpdate, SetImageArgs};
use crate::kube_target::Target;

/// Read-change-write attempts before giving up on conflicts.
const MAX_ATTEMPTS: usize = 5;

/// Container lists of a pod spec, in the order `kubectl set image` searches them.
const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

pub async fn run(target: &Target, args: &SetImageArgs) -> anyhow::Result<()> {
    apply(target, &args.name, &args.images).await?;
    emit(&format!("rollout \"{}\" image updated\n", args.name))
}

/// Sets the images of rollout `name` (or of the Deployment its workloadRef names). Shared by
/// the command and the dashboard.
pub async fn apply(target: &Target, name: &str, images: &[ImageUpdate]) -> anyhow::Result<()> {
    let rollout = get_rollout(&rollouts(target), name).await?;
    match &rollout.spec.workload_ref {
        None => {
            let resource = ApiResource::erase::<Rollout>(&());
            let api = Api::namespaced_with(target.client.clone(), &target.namespace, &resource);
            update_template(&api, name, images)
                .await
                .with_context(|| format!("updating rollout {name:?}"))?;
        }
        Some(workload) => {
            let kind = workload.kind.as_deref().unwrap_or_default();
            let target_name = workload.name.as_deref().unwrap_or_default();
            if kind != "Deployment" {
                bail!(
                    "cannot set images through a workloadRef to a {kind:?}; only Deployments are supported"
                );
            }
            let resource = ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
            let api = Api::namespaced_with(target.client.clone(), &target.namespace, &resource);
            update_template(&api, target_name, images)
                .await
                .with_context(|| {
                    format!("updating deployment {target_name:?} referenced by rollout {name:?}")
                })?;
        }
    }
    Ok(())
}

/// Sets the images in `spec.template.spec` of the named object, retrying on conflicts.
async fn update_template(
    api: &Api<DynamicObject>,
    name: &str,
    updates: &[ImageUpdate],
) -> anyhow::Result<()> {
    for attempt in 1..=MAX_ATTEMPTS {
        let mut object = api.get(name).await.map_err(explain)?;
        let pod_spec = object
            .data
            .pointer_mut("/spec/template/spec")
            .context("the object has no spec.template.spec")?;
        set_images(pod_spec, updates)?;
        match api.replace(name, &PostParams::default(), &object).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.is_conflict() && attempt < MAX_ATTEMPTS => {
                continue;
            }
            Err(e) => return Err(explain(e)),
        }
    }
    bail!("the object kept changing; gave up after {MAX_ATTEMPTS} attempts")
}

/// Applies `updates` to a pod spec (JSON). `*` matches every container; a name matching no
/// container at all is an error, so a typo does not pass silently.
pub fn set_images(pod_spec: &mut Value, updates: &[ImageUpdate]) -> anyhow::Result<()> {
    for update in updates {
        let mut found = false;
        for list in CONTAINER_LISTS {
            let Some(containers) = pod_spec.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for container in containers {
                let name = container.get("name").and_then(Value::as_str);
                if update.container == "*" || name == Some(update.container.as_str()) {
                    container["image"] = Value::String(update.image.clone());
                    found = true;
                }
            }
        }
        if !found {
            bail!("unable to find container named {:?}", update.container);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn update(container: &str, image: &str) -> ImageUpdate {
        ImageUpdate {
            container: container.into(),
            image: image.into(),
        }
    }

    fn pod_spec() -> Value {
        json!({
            "containers": [
                {"name": "app", "image": "app:v1", "ports": [{"containerPort": 8080}]},
                {"name": "sidecar", "image": "proxy:v1"}
            ],
            "initContainers": [{"name": "migrate", "image": "app:v1"}],
            "futureField": {"kept": true}
        })
    }

    #[test]
    fn updates_named_containers_and_keeps_everything_else() {
        let mut spec = pod_spec();
        set_images(
            &mut spec,
            &[update("app", "app:v2"), update("migrate", "app:v2")],
        )
        .unwrap();
        assert_eq!(
            spec,
            json!({
                "containers": [
                    {"name": "app", "image": "app:v2", "ports": [{"containerPort": 8080}]},
                    {"name": "sidecar", "image": "proxy:v1"}
                ],
                "initContainers": [{"name": "migrate", "image": "app:v2"}],
                "futureField": {"kept": true}
            })
        );
    }

    #[test]
    fn star_updates_all_containers() {
        let mut spec = pod_spec();
        set_images(&mut spec, &[update("*", "all:v3")]).unwrap();
        let images: Vec<&str> = [
            "/containers/0/image",
            "/containers/1/image",
            "/initContainers/0/image",
        ]
        .iter()
        .map(|p| spec.pointer(p).unwrap().as_str().unwrap())
        .collect();
        assert_eq!(images, ["all:v3"; 3]);
    }

    #[test]
    fn unknown_container_is_an_error() {
        let mut spec = pod_spec();
        let err = set_images(&mut spec, &[update("web", "x")]).unwrap_err();
        assert_eq!(err.to_string(), r#"unable to find container named "web""#);
    }
}
