//! Executes a [`Plan`] through a [`ClusterAccess`], in order, stopping at the first failure.
//!
//! Every patch names only the fields the plan changes and carries the resourceVersion the
//! decision was based on. So a write never carries a stale copy of other fields (no annotation
//! is ever blanked by a conflict path), and a decision made on stale state is refused with a
//! conflict, after which the controller observes again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value, json};
use sluice_api::Rollout;
use sluice_engine::labels::{EPHEMERAL_METADATA, MANAGED_BY, POD_TEMPLATE_HASH};
use sluice_engine::{Action, Plan};

use crate::cluster::{ClusterAccess, WriteError};

/// What applying a plan did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub writes: usize,
    pub status_written: bool,
    /// The Rollout's resourceVersions after each of the plan's writes of it, in order.
    pub rollout_versions: Vec<String>,
}

pub async fn apply_plan<W: ClusterAccess>(
    writer: &W,
    rollout: &Rollout,
    plan: &Plan,
) -> Result<Applied, WriteError> {
    apply_plan_counting(writer, rollout, plan, &AtomicUsize::new(0)).await
}

/// [`apply_plan`], counting in `actions_done` the plan's actions that were written, so that a
/// caller whose plan stopped at the status patch knows its writes all landed.
pub async fn apply_plan_counting<W: ClusterAccess>(
    writer: &W,
    rollout: &Rollout,
    plan: &Plan,
    actions_done: &AtomicUsize,
) -> Result<Applied, WriteError> {
    let ns = rollout.metadata.namespace.as_deref().unwrap_or("default");
    let name = rollout.metadata.name.as_deref().unwrap_or_default();
    let mut rollout_rv = rollout.metadata.resource_version.clone();
    let mut applied = Applied::default();

    for action in &plan.actions {
        // Fencing: a replica that lost the leader lease stops between two writes.
        writer.may_write()?;
        match action {
            Action::CreateReplicaSet { replica_set } => {
                writer.create_replica_set(ns, replica_set).await?;
            }
            Action::ScaleReplicaSet {
                name: rs,
                resource_version,
                to,
                annotations,
                ..
            } => {
                let mut patch = annotations_patch(resource_version.as_deref(), annotations);
                patch["spec"] = json!({ "replicas": to });
                writer.patch_replica_set(ns, rs, &patch).await?;
            }
            Action::ConfirmReplicaSet {
                name: rs,
                resource_version,
            } => {
                writer
                    .confirm_replica_set(ns, rs, resource_version.as_deref())
                    .await?;
            }
            Action::AnnotateReplicaSet {
                name: rs,
                resource_version,
                annotations,
            } => {
                let patch = annotations_patch(resource_version.as_deref(), annotations);
                writer.patch_replica_set(ns, rs, &patch).await?;
            }
            Action::DeleteReplicaSet { name: rs, uid } => {
                writer.delete_replica_set(ns, rs, uid.as_deref()).await?;
            }
            Action::SwitchService {
                name: svc,
                resource_version,
                pod_hash,
                rollout: owner,
            } => {
                let mut annotations = BTreeMap::new();
                annotations.insert(MANAGED_BY.to_string(), Some(owner.clone()));
                let mut patch = annotations_patch(resource_version.as_deref(), &annotations);
                patch["spec"] = json!({ "selector": { POD_TEMPLATE_HASH: pod_hash } });
                writer.patch_service(ns, svc, &patch).await?;
            }
            Action::ReleaseService {
                name: svc,
                resource_version,
            } => {
                let mut annotations = BTreeMap::new();
                annotations.insert(MANAGED_BY.to_string(), None);
                let mut patch = annotations_patch(resource_version.as_deref(), &annotations);
                patch["spec"] = json!({ "selector": { POD_TEMPLATE_HASH: null } });
                writer.patch_service(ns, svc, &patch).await?;
            }
            Action::EvictPod { name: pod, uid } => {
                writer.evict_pod(ns, pod, uid.as_deref()).await?;
            }
            Action::SetReplicaSetPodMetadata {
                name: rs,
                resource_version,
                labels,
                annotations,
                record,
            } => {
                let patch = pod_metadata_patch(
                    resource_version.as_deref(),
                    labels,
                    annotations,
                    record.as_ref(),
                );
                writer.patch_replica_set(ns, rs, &patch).await?;
            }
            Action::PatchPodMetadata {
                name: pod,
                resource_version,
                labels,
                annotations,
            } => {
                let mut patch = annotations_patch(resource_version.as_deref(), annotations);
                if !labels.is_empty() {
                    patch["metadata"]["labels"] = key_changes(labels);
                }
                match writer.patch_pod(ns, pod, &patch).await {
                    // Gone meanwhile: nothing left to relabel.
                    Err(WriteError::NotFound) => {}
                    other => other?,
                }
            }
            Action::AnnotateRollout { annotations, .. } => {
                let patch = annotations_patch(rollout_rv.as_deref(), annotations);
                rollout_rv = writer.patch_rollout(ns, name, &patch).await?;
                applied.rollout_versions.extend(rollout_rv.clone());
            }
            Action::CreateAnalysisRun { run } => {
                writer.create_analysis_run(ns, run).await?;
            }
            Action::TerminateAnalysisRun { name: run } => {
                let patch = json!({ "spec": { "terminate": true } });
                match writer.patch_analysis_run(ns, run, &patch).await {
                    // Already gone: nothing left to stop.
                    Err(WriteError::NotFound) => {}
                    other => other?,
                }
            }
            Action::AnnotateAnalysisRun {
                name: run,
                resource_version,
                annotations,
            } => {
                let patch = annotations_patch(resource_version.as_deref(), annotations);
                writer.patch_analysis_run(ns, run, &patch).await?;
            }
            Action::DeleteAnalysisRun { name: run, uid } => {
                writer.delete_analysis_run(ns, run, uid.as_deref()).await?;
            }
            Action::CreateRouterObject { target, object } => {
                writer.create_router_object(target, object).await?;
            }
            Action::UpdateRouterObject { target, object } => {
                writer.replace_router_object(target, object).await?;
            }
            Action::DeleteRouterObject { target, uid } => {
                writer.delete_router_object(target, uid.as_deref()).await?;
            }
            Action::CreateExperiment { experiment } => {
                writer.create_experiment(ns, experiment).await?;
            }
            Action::TerminateExperiment { name: exp } => {
                let patch = json!({ "spec": { "terminate": true } });
                match writer.patch_experiment(ns, exp, &patch).await {
                    // Gone meanwhile: nothing left to stop.
                    Err(WriteError::NotFound) => {}
                    other => other?,
                }
            }
            Action::DeleteExperiment { name: exp, uid } => {
                writer.delete_experiment(ns, exp, uid.as_deref()).await?;
            }
            Action::ScaleDeployment {
                name: deployment,
                object,
                ..
            } => {
                writer.replace_deployment(ns, deployment, object).await?;
            }
            Action::UpdateStatefulSet {
                name: stateful_set,
                object,
            } => {
                writer
                    .replace_stateful_set(ns, stateful_set, object)
                    .await?;
            }
            Action::UpdateDaemonSet {
                name: daemon_set,
                object,
            } => {
                writer.replace_daemon_set(ns, daemon_set, object).await?;
            }
            Action::CopyConfig {
                kind,
                source,
                hash,
                copy,
            } => {
                writer
                    .copy_config(rollout, *kind, source, hash, copy)
                    .await?;
            }
            Action::OwnConfigCopy {
                kind,
                name: copy,
                resource_version,
                owners,
            } => {
                writer
                    .set_config_owners(ns, *kind, copy, resource_version.as_deref(), owners)
                    .await?;
            }
        }
        applied.writes += 1;
        actions_done.fetch_add(1, Ordering::Relaxed);
    }

    let old_status =
        serde_json::to_value(rollout.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    let new_status = serde_json::to_value(&plan.status).unwrap_or(Value::Null);
    if let Some(diff) = merge_diff(&old_status, &new_status) {
        writer.may_write()?;
        let mut patch = json!({ "status": diff });
        if let Some(rv) = &rollout_rv {
            patch["metadata"] = json!({ "resourceVersion": rv });
        }
        tracing::trace!(rollout = name, %patch, "status patch");
        let written = writer.patch_rollout_status(ns, name, &patch).await?;
        applied.rollout_versions.extend(written);
        applied.writes += 1;
        applied.status_written = true;
    }
    Ok(applied)
}

/// A merge patch of `metadata`: the resourceVersion it was decided on, and annotations set
/// (`Some`) or removed (`None`).
pub fn annotations_patch(
    resource_version: Option<&str>,
    annotations: &BTreeMap<String, Option<String>>,
) -> Value {
    let mut meta = Map::new();
    if let Some(rv) = resource_version {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), key_changes(annotations));
    }
    json!({ "metadata": meta })
}

/// A merge patch of a string map: `None` becomes `null`, which removes the key.
fn key_changes(changes: &BTreeMap<String, Option<String>>) -> Value {
    let m: Map<String, Value> = changes
        .iter()
        .map(|(k, v)| (k.clone(), v.as_ref().map_or(Value::Null, |v| json!(v))))
        .collect();
    Value::Object(m)
}

/// The ReplicaSet patch for ephemeral metadata: the pod template's labels and annotations and
/// the record of what is injected, in one write under the observed resourceVersion.
fn pod_metadata_patch(
    resource_version: Option<&str>,
    labels: &BTreeMap<String, Option<String>>,
    annotations: &BTreeMap<String, Option<String>>,
    record: Option<&String>,
) -> Value {
    let mut recorded = BTreeMap::new();
    recorded.insert(EPHEMERAL_METADATA.to_string(), record.cloned());
    let mut patch = annotations_patch(resource_version, &recorded);
    let mut template_meta = Map::new();
    if !labels.is_empty() {
        template_meta.insert("labels".into(), key_changes(labels));
    }
    if !annotations.is_empty() {
        template_meta.insert("annotations".into(), key_changes(annotations));
    }
    if !template_meta.is_empty() {
        patch["spec"] = json!({ "template": { "metadata": template_meta } });
    }
    patch
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`, or `None` when they are equal.
/// Objects are diffed key by key (removed keys become `null`); anything else is replaced whole.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            out.insert(k.clone(), d);
                        }
                    }
                    None => {
                        out.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (o, n) if o == n => None,
        (_, n) => Some(n.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_diff_minimal() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1, 2], "gone": true});
        let new = json!({"a": 1, "b": {"c": 2, "d": 4}, "e": [1], "f": "x"});
        assert_eq!(
            merge_diff(&old, &new),
            Some(json!({"b": {"d": 4}, "e": [1], "f": "x", "gone": null}))
        );
        assert_eq!(merge_diff(&old, &old), None);
    }

    #[test]
    fn annotation_patch_removes_with_null_and_keeps_others_untouched() {
        let mut a = BTreeMap::new();
        a.insert("scale-down-deadline".to_string(), None);
        a.insert(
            "rollout.argoproj.io/desired-replicas".to_string(),
            Some("5".to_string()),
        );
        let p = annotations_patch(Some("42"), &a);
        assert_eq!(
            p,
            json!({"metadata": {"resourceVersion": "42", "annotations": {
                "rollout.argoproj.io/desired-replicas": "5",
                "scale-down-deadline": null
            }}})
        );
    }

    #[test]
    fn pod_metadata_patch_sets_the_template_and_the_record_under_a_precondition() {
        let labels: BTreeMap<String, Option<String>> = [
            ("role".to_string(), Some("active".to_string())),
            ("old".to_string(), None),
        ]
        .into();
        let annotations: BTreeMap<String, Option<String>> = [("stage".to_string(), None)].into();
        let record = r#"{"labels":{"role":"active"}}"#.to_string();
        let p = pod_metadata_patch(Some("7"), &labels, &annotations, Some(&record));
        assert_eq!(
            p,
            json!({
                "metadata": {"resourceVersion": "7",
                             "annotations": {EPHEMERAL_METADATA: record}},
                "spec": {"template": {"metadata": {
                    "labels": {"old": null, "role": "active"},
                    "annotations": {"stage": null}
                }}}
            })
        );
        // Metadata removed from the spec: the record goes; no template change, no `spec`.
        let p = pod_metadata_patch(Some("8"), &BTreeMap::new(), &BTreeMap::new(), None);
        assert_eq!(
            p,
            json!({"metadata": {"resourceVersion": "8", "annotations": {EPHEMERAL_METADATA: null}}})
        );
    }
}
