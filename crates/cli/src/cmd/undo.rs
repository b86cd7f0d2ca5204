//! `undo`: put the pod template of an earlier revision back, which starts a new update.
//! `undo --fast` also names that template's hash in `rollouts.sluice.dev/fast-undo`, in the same
//! write, and the controller then skips the update's steps, pauses and analyses.

use anyhow::{Context as _, bail};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use sluice_engine::ReplicaSetExt;
use sluice_engine::labels::POD_TEMPLATE_HASH;
use sluice_engine::reconcile::FAST_UNDO;

use super::{emit, explain, get_rollout, label_selector, rollouts};
use crate::cli::UndoArgs;
use crate::info::is_controlled_by;
use crate::kube_target::Target;

pub async fn run(target: &Target, args: &UndoArgs) -> anyhow::Result<()> {
    emit(&apply(target, &args.name, args.to_revision, args.fast).await?)
}

/// Rolls `name` back to `to_revision` (default: the one before the latest), `fast` skipping the
/// update's steps and analyses; returns what was done, in words. Shared by the command and the
/// dashboard.
pub async fn apply(
    target: &Target,
    name: &str,
    to_revision: Option<i64>,
    fast: bool,
) -> anyhow::Result<String> {
    let rollout = get_rollout(&rollouts(target), name).await?;
    let rs_api: Api<ReplicaSet> = Api::namespaced(target.client.clone(), &target.namespace);
    let mut params = ListParams::default();
    if let Some(selector) = label_selector(&rollout) {
        params = params.labels(&selector);
    }
    let replica_sets: Vec<ReplicaSet> = rs_api
        .list(&params)
        .await
        .map_err(explain)
        .context("listing ReplicaSets")?
        .items
        .into_iter()
        .filter(|rs| is_controlled_by(&rs.metadata, &rollout.metadata))
        .collect();
    let source = revision_to_restore(&replica_sets, to_revision, name)?;
    let revision = source.revision().unwrap_or(0);
    let template = restored_template(source)?;
    let fast_hash = match fast {
        false => None,
        true => Some(
            source
                .pod_hash()
                .with_context(|| {
                    format!(
                        "ReplicaSet {:?} has no {POD_TEMPLATE_HASH} label to fast-track",
                        source.name()
                    )
                })?
                .to_string(),
        ),
    };
    let annotated = rollout.metadata.annotations.is_some();

    match &rollout.spec.workload_ref {
        None => {
            let same = same_template(rollout.spec.template.as_ref(), &template)?;
            if same && fast_hash.is_none() {
                return Ok(skipped(revision));
            }
            let template = (!same).then_some(&template);
            let patch = undo_patch(template, fast_hash.as_deref(), annotated)?;
            rollouts(target)
                .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await
                .map_err(explain)
                .with_context(|| format!("patching rollout {name:?}"))?;
        }
        Some(workload) => {
            let kind = workload.kind.as_deref().unwrap_or_default();
            let target_name = workload.name.as_deref().unwrap_or_default();
            if kind != "Deployment" {
                bail!(
                    "cannot undo through a workloadRef to a {kind:?}; only Deployments are supported"
                );
            }
            let api: Api<Deployment> = Api::namespaced(target.client.clone(), &target.namespace);
            let deployment = api
                .get(target_name)
                .await
                .map_err(explain)
                .with_context(|| format!("reading deployment {target_name:?}"))?;
            let current = deployment.spec.as_ref().map(|s| &s.template);
            let same = same_template(current, &template)?;
            if same && fast_hash.is_none() {
                return Ok(skipped(revision));
            }
            if let Some(hash) = fast_hash.as_deref() {
                // The Rollout first: the annotation names a hash, so it waits for the template.
                let mark = undo_patch(None, Some(hash), annotated)?;
                rollouts(target)
                    .patch(name, &PatchParams::default(), &Patch::Json::<()>(mark))
                    .await
                    .map_err(explain)
                    .with_context(|| format!("annotating rollout {name:?}"))?;
                if same {
                    return Ok(fast_tracked(name, revision));
                }
            }
            let patch = undo_patch(Some(&template), None, true)?;
            api.patch(
                target_name,
                &PatchParams::default(),
                &Patch::Json::<()>(patch),
            )
            .await
            .map_err(explain)
            .with_context(|| format!("patching deployment {target_name:?}"))?;
        }
    }
    if fast {
        return Ok(fast_tracked(name, revision));
    }
    Ok(format!(
        "rollout '{name}' rolled back to revision {revision}\n"
    ))
}

fn fast_tracked(name: &str, revision: i64) -> String {
    format!(
        "rollout '{name}' rolled back to revision {revision}, fast: steps, pauses and analyses skipped\n"
    )
}

fn skipped(revision: i64) -> String {
    format!("skipped rollback (current template already matches revision {revision})\n")
}

/// The ReplicaSet of `to_revision`, or by default the one of the revision before the newest.
pub fn revision_to_restore<'a>(
    replica_sets: &'a [ReplicaSet],
    to_revision: Option<i64>,
    rollout: &str,
) -> anyhow::Result<&'a ReplicaSet> {
    let mut by_revision: Vec<(i64, &ReplicaSet)> = replica_sets
        .iter()
        .filter_map(|rs| rs.revision().map(|r| (r, rs)))
        .collect();
    by_revision.sort_by_key(|(revision, _)| std::cmp::Reverse(*revision));
    match to_revision.filter(|r| *r > 0) {
        Some(wanted) => by_revision
            .iter()
            .find(|(r, _)| *r == wanted)
            .map(|(_, rs)| *rs)
            .with_context(|| format!("unable to find revision {wanted} of rollout {rollout:?}")),
        None => by_revision
            .get(1)
            .map(|(_, rs)| *rs)
            .with_context(|| format!("no earlier revision of rollout {rollout:?} to go back to")),
    }
}

/// The ReplicaSet's pod template without the pod-template-hash label the controller added.
pub fn restored_template(rs: &ReplicaSet) -> anyhow::Result<PodTemplateSpec> {
    let mut template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .with_context(|| format!("ReplicaSet {:?} has no pod template", rs.name()))?;
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    Ok(template)
}

/// JSON patch replacing `/spec/template` (when given) and setting the fast-undo annotation to
/// `fast_hash` (when given), in one write. `annotated`: the object has an annotation map
/// already (a JSON patch cannot add a key to a map that is not there).
pub fn undo_patch(
    template: Option<&PodTemplateSpec>,
    fast_hash: Option<&str>,
    annotated: bool,
) -> anyhow::Result<json_patch::Patch> {
    let mut ops = Vec::new();
    if let Some(template) = template {
        let value = serde_json::to_value(template).context("encoding the pod template")?;
        ops.push(serde_json::json!({"op": "replace", "path": "/spec/template", "value": value}));
    }
    if let Some(hash) = fast_hash {
        ops.push(if annotated {
            // `/` in a key is `~1` in a JSON pointer.
            let key = FAST_UNDO.replace('/', "~1");
            serde_json::json!({"op": "add", "path": format!("/metadata/annotations/{key}"), "value": hash})
        } else {
            serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {FAST_UNDO: hash}})
        });
    }
    serde_json::from_value(serde_json::Value::Array(ops)).context("building the JSON patch")
}

/// Whether `current` already is `restored`, the hash label aside.
fn same_template(
    current: Option<&PodTemplateSpec>,
    restored: &PodTemplateSpec,
) -> anyhow::Result<bool> {
    let Some(current) = current else {
        return Ok(false);
    };
    let mut current = current.clone();
    if let Some(labels) = current.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    Ok(serde_json::to_value(&current)? == serde_json::to_value(restored)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::fixtures::replica_set;

    fn history() -> Vec<ReplicaSet> {
        vec![
            replica_set("demo-h1", "h1", 1, "demo:v1", 0, "2024-05-01T10:00:00Z"),
            replica_set("demo-h3", "h3", 3, "demo:v3", 2, "2024-05-01T12:00:00Z"),
            replica_set("demo-h2", "h2", 2, "demo:v2", 0, "2024-05-01T11:00:00Z"),
        ]
    }

    #[test]
    fn default_is_the_revision_before_the_newest() {
        let rss = history();
        assert_eq!(
            revision_to_restore(&rss, None, "demo").unwrap().name(),
            "demo-h2"
        );
        assert_eq!(
            revision_to_restore(&rss, Some(0), "demo").unwrap().name(),
            "demo-h2"
        );
        assert_eq!(
            revision_to_restore(&rss, Some(1), "demo").unwrap().name(),
            "demo-h1"
        );
    }

    #[test]
    fn missing_revisions_are_errors() {
        let rss = history();
        let err = revision_to_restore(&rss, Some(7), "demo").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unable to find revision 7 of rollout "demo""#
        );
        assert!(revision_to_restore(&rss[1..2], None, "demo").is_err());
    }

    #[test]
    fn patch_replaces_the_template_without_the_hash_label() {
        let rss = history();
        let template = restored_template(&rss[2]).unwrap();
        let patch = undo_patch(Some(&template), None, false).unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            serde_json::json!([{
                "op": "replace",
                "path": "/spec/template",
                "value": {
                    "metadata": {"labels": {"app": "demo"}},
                    "spec": {"containers": [{"name": "app", "image": "demo:v2"}]}
                }
            }])
        );
    }

    #[test]
    fn a_fast_undo_names_the_hash_in_the_same_patch() {
        let rss = history();
        let template = restored_template(&rss[2]).unwrap();
        let patch = serde_json::to_value(undo_patch(Some(&template), Some("h2"), true).unwrap());
        let patch = patch.unwrap();
        assert_eq!(patch[0]["path"], "/spec/template");
        assert_eq!(
            patch[1],
            serde_json::json!({"op": "add", "path": "/metadata/annotations/rollouts.sluice.dev~1fast-undo", "value": "h2"})
        );
        // Without an annotation map, the map itself is added.
        let bare = serde_json::to_value(undo_patch(None, Some("h2"), false).unwrap()).unwrap();
        assert_eq!(
            bare,
            serde_json::json!([{"op": "add", "path": "/metadata/annotations", "value": {"rollouts.sluice.dev/fast-undo": "h2"}}])
        );
        // Applied, both give the annotation.
        let mut with_map =
            serde_json::json!({"metadata": {"annotations": {"a": "b"}}, "spec": {"template": {}}});
        let ops: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut with_map, &ops).unwrap();
        assert_eq!(
            with_map["metadata"]["annotations"]["rollouts.sluice.dev/fast-undo"],
            "h2"
        );
        assert_eq!(with_map["metadata"]["annotations"]["a"], "b");
    }

    #[test]
    fn identical_template_is_detected() {
        let rss = history();
        let restored = restored_template(&rss[1]).unwrap();
        let with_hash = rss[1].spec.as_ref().unwrap().template.clone().unwrap();
        assert!(same_template(Some(&with_hash), &restored).unwrap());
        let other = restored_template(&rss[0]).unwrap();
        assert!(!same_template(Some(&other), &restored).unwrap());
        assert!(!same_template(None, &restored).unwrap());
    }
}
