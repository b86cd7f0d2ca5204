//! A workload's ControllerRevisions, as StatefulSets and DaemonSets keep them: one per
//! template, named `<workload>-<hash>`, numbered (`revision`), holding the template as a
//! strategic merge patch. The StatefulSet and DaemonSet reconciles read them alike.

use serde_json::Value;

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
