//! `create -f FILE`: create Rollouts, Experiments, AnalysisTemplates, ClusterAnalysisTemplates
//! and AnalysisRuns from manifests, checked as strictly as Argo's plugin decodes them (wrong
//! types and unknown fields are refused before anything is sent).

use std::path::Path;

use anyhow::{Context as _, bail};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::experiment::Experiment;

use super::{emit, explain};
use crate::cli::{CreateArgs, GetExperimentArgs, GetRolloutArgs};
use crate::kube_target::Target;

/// A kind `create` accepts: how to reach it and how Argo names it in its output.
struct Kind {
    resource: ApiResource,
    /// The word before `.argoproj.io/NAME created`.
    singular: &'static str,
    namespaced: bool,
    /// Strict decoding: the object encoded again, to find fields the API does not have.
    decode: fn(&Value) -> Result<Value, serde_json::Error>,
}

fn reencoded<K: serde::de::DeserializeOwned + serde::Serialize>(
    doc: &Value,
) -> Result<Value, serde_json::Error> {
    serde_json::to_value(serde_json::from_value::<K>(doc.clone())?)
}

/// The kind of a document, or Argo's error for any other.
fn kind_of(doc: &Value) -> anyhow::Result<Kind> {
    let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let group = api_version.split_once('/').map_or("", |(group, _)| group);
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    let found = match (group, kind) {
        ("argoproj.io", "Rollout") => Kind {
            resource: ApiResource::erase::<Rollout>(&()),
            singular: "rollout",
            namespaced: true,
            decode: reencoded::<Rollout>,
        },
        ("argoproj.io", "Experiment") => Kind {
            resource: ApiResource::erase::<Experiment>(&()),
            singular: "experiment",
            namespaced: true,
            decode: reencoded::<Experiment>,
        },
        ("argoproj.io", "AnalysisTemplate") => Kind {
            resource: ApiResource::erase::<AnalysisTemplate>(&()),
            singular: "analysistemplate",
            namespaced: true,
            decode: reencoded::<AnalysisTemplate>,
        },
        ("argoproj.io", "ClusterAnalysisTemplate") => Kind {
            resource: ApiResource::erase::<ClusterAnalysisTemplate>(&()),
            // Argo's plugin reports these as analysistemplates too; scripts match on it.
            singular: "analysistemplate",
            namespaced: false,
            decode: reencoded::<ClusterAnalysisTemplate>,
        },
        ("argoproj.io", "AnalysisRun") => Kind {
            resource: ApiResource::erase::<AnalysisRun>(&()),
            singular: "analysisrun",
            namespaced: true,
            decode: reencoded::<AnalysisRun>,
        },
        _ => bail!("creates of {group}/{kind} unsupported"),
    };
    Ok(found)
}

/// Checks one document as Argo's plugin would before creating it: its kind, its field types,
/// and no unknown fields. Returns the kind.
fn check(doc: &Value) -> anyhow::Result<Kind> {
    let kind = kind_of(doc)?;
    let decoded = (kind.decode)(doc)?;
    let mut unknown = Vec::new();
    super::lint::unknown_fields(doc, &decoded, "", &mut unknown);
    if let Some(field) = unknown.first() {
        bail!("unknown field {field:?}");
    }
    Ok(kind)
}

pub async fn run(target: &Target, args: &CreateArgs) -> anyhow::Result<()> {
    if args.files.is_empty() {
        bail!("no file given: create needs -f FILE (or a subcommand such as `create analysisrun`)");
    }
    if args.files.len() > 1 && args.watch {
        bail!("Cannot watch multiple resources");
    }
    let mut created = Vec::new();
    for path in &args.files {
        created.extend(create_file(target, path).await?);
    }
    if !args.watch {
        return Ok(());
    }
    let Some((kind, name, namespace)) = created.first() else {
        return Ok(());
    };
    let watched = Target {
        client: target.client.clone(),
        namespace: namespace.clone(),
    };
    match kind.as_str() {
        "Rollout" => {
            let args = GetRolloutArgs {
                name: name.clone(),
                watch: true,
                no_color: args.no_color,
            };
            super::get::run(&watched, &args).await
        }
        "Experiment" => {
            let args = GetExperimentArgs {
                name: name.clone(),
                watch: true,
                no_color: args.no_color,
            };
            super::get_experiment::run(&watched, &args).await
        }
        _ => bail!("Can only watch resources of type Rollout or Experiment"),
    }
}

/// Creates every document of one file, in order; returns (kind, name, namespace) of each.
async fn create_file(
    target: &Target,
    path: &Path,
) -> anyhow::Result<Vec<(String, String, String)>> {
    let shown = path.display().to_string();
    let text = super::lint::read_input(path).with_context(|| format!("reading {shown}"))?;
    let docs = sluice_api::yaml::from_multi_doc_str(&text)
        .with_context(|| format!("{shown}: invalid YAML"))?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    if docs.is_empty() {
        bail!("{shown}: no object to create");
    }
    // Every document is checked before the first is created, so a bad file creates nothing.
    let mut checked = Vec::new();
    for doc in docs {
        let kind = check(&doc).with_context(|| format!("{shown}: {}", describe(&doc)))?;
        checked.push((doc, kind));
    }
    let mut created = Vec::new();
    for (doc, kind) in checked {
        let namespace = doc
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(&target.namespace)
            .to_owned();
        let api: Api<DynamicObject> = if kind.namespaced {
            Api::namespaced_with(target.client.clone(), &namespace, &kind.resource)
        } else {
            Api::all_with(target.client.clone(), &kind.resource)
        };
        let object: DynamicObject = serde_json::from_value(doc.clone())
            .with_context(|| format!("{shown}: {}", describe(&doc)))?;
        let made = api
            .create(&PostParams::default(), &object)
            .await
            .map_err(explain)
            .with_context(|| format!("creating {}", describe(&doc)))?;
        let name = made.metadata.name.clone().unwrap_or_default();
        emit(&format!("{}.argoproj.io/{name} created\n", kind.singular))?;
        created.push((kind.resource.kind.clone(), name, namespace));
    }
    Ok(created)
}

/// `Rollout "web"` for messages.
fn describe(doc: &Value) -> String {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("object");
    match doc.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => format!("{kind} {name:?}"),
        None => match doc
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
        {
            Some(prefix) => format!("{kind} {prefix:?}*"),
            None => kind.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_argos_kinds_only() {
        let template = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
            "metadata": {"name": "t"}, "spec": {"metrics": []}});
        assert_eq!(check(&template).unwrap().singular, "analysistemplate");
        let cat = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "ClusterAnalysisTemplate",
            "metadata": {"name": "t"}, "spec": {}});
        assert!(!check(&cat).unwrap().namespaced);
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
        assert_eq!(
            check(&service).err().unwrap().to_string(),
            "creates of /Service unsupported"
        );
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
        assert_eq!(
            check(&deployment).err().unwrap().to_string(),
            "creates of apps/Deployment unsupported"
        );
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_refused() {
        let misspelt = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
            "metadata": {"name": "e"}, "spec": {"templates": [], "duraton": "1m"}});
        assert_eq!(
            check(&misspelt).err().unwrap().to_string(),
            "unknown field \"spec.duraton\""
        );
        let wrong = json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": "r"}, "spec": {"replicas": "two"}});
        assert!(check(&wrong).is_err());
        assert_eq!(describe(&wrong), "Rollout \"r\"");
        assert_eq!(
            describe(&json!({"kind": "AnalysisRun", "metadata": {"generateName": "x-"}})),
            "AnalysisRun \"x-\"*"
        );
    }
}
