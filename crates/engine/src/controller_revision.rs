//! A workload's ControllerRevisions, as StatefulSets and DaemonSets keep them: one per
//! template, named `<workload>-<hash>`, numbered (`revision`), holding the template as a
//! strategic merge patch, and each pod labelled with the revision it was made from. The
//! StatefulSet and DaemonSet reconciles read them, and their pods, alike.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// The label both controllers put on each pod: the revision it was made from (a StatefulSet's
/// pod carries the revision's name, a DaemonSet's its hash).
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// Whether the pod's `Ready` condition is true.
pub(crate) fn pod_is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The ControllerRevision of the workload `owner` named `<owner>-<hash>`.
pub(crate) fn find_revision<'a>(
    revisions: &'a [Value],
    owner: &str,
    hash: &str,
) -> Option<&'a Value> {
    let name = format!("{owner}-{hash}");
    revisions
        .iter()
        .find(|r| r["metadata"]["name"].as_str() == Some(name.as_str()))
}

/// A revision's number (`revision`), Argo's "revision N" of the update.
pub(crate) fn revision_number(revision: Option<&Value>) -> i64 {
    revision.and_then(|r| r["revision"].as_i64()).unwrap_or(0)
}

/// The pod template a ControllerRevision recorded. Both controllers store it as a strategic
/// merge patch (`{"spec":{"template":{..., "$patch":"replace"}}}`); the directive is not
/// part of the template.
pub(crate) fn revision_template(revision: &Value) -> Option<Value> {
    let mut template = revision["data"]["spec"]["template"].clone();
    let fields = template.as_object_mut()?;
    fields.remove("$patch");
    Some(template)
}
