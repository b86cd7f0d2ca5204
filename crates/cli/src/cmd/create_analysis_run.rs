//! `create analysisrun`: an AnalysisRun from an AnalysisTemplate or ClusterAnalysisTemplate, in
//! the cluster or a file. The template is handled as plain JSON, so that fields this version
//! does not know reach the run; the arguments are merged as the controller merges a Rollout's
//! (the engine's `merge_args`), with Argo's error naming an argument left without a value.

use anyhow::{Context as _, anyhow, bail};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use sluice_api::analysis::{AnalysisRun, AnalysisTemplate, ClusterAnalysisTemplate};
use sluice_api::common::Argument;
use sluice_engine::labels::CONTROLLER_INSTANCE_ID;

use super::{emit, explain};
use crate::cli::CreateAnalysisRunArgs;
use crate::kube_target::Target;

pub async fn run(target: &Target, args: &CreateAnalysisRunArgs) -> anyhow::Result<()> {
    let cli_args = parse_arguments(&args.arguments)?;
    let template = match (&args.from, &args.from_file) {
        (Some(name), None) => read_template(target, name, args.global).await?,
        (None, Some(path)) => {
            let shown = path.display().to_string();
            let text = super::lint::read_input(path).with_context(|| format!("reading {shown}"))?;
            sluice_api::yaml::from_multi_doc_str(&text)
                .with_context(|| format!("{shown}: invalid YAML"))?
                .into_iter()
                .find(|doc| !doc.is_null())
                .ok_or_else(|| anyhow!("{shown}: no template in the file"))?
        }
        _ => bail!("one of --from or --from-file must be specified"),
    };
    let template_name = template
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let naming = match (&args.name, &args.generate_name) {
        (Some(name), _) => Naming::Name(name.clone()),
        (None, Some(prefix)) => Naming::GenerateName(prefix.clone()),
        (None, None) => Naming::GenerateName(format!("{template_name}-")),
    };
    let what = if args.global {
        "ClusterAnalysisTemplate"
    } else {
        "AnalysisTemplate"
    };
    let run = analysis_run_from_template(
        template,
        &cli_args,
        &naming,
        &target.namespace,
        args.instance_id.as_deref(),
    )
    .with_context(|| format!("creating an AnalysisRun from {what} {template_name:?}"))?;
    let resource = ApiResource::erase::<AnalysisRun>(&());
    let api: Api<DynamicObject> =
        Api::namespaced_with(target.client.clone(), &target.namespace, &resource);
    let object: DynamicObject = serde_json::from_value(run)?;
    let made = api
        .create(&PostParams::default(), &object)
        .await
        .map_err(explain)
        .with_context(|| format!("creating an AnalysisRun from {what} {template_name:?}"))?;
    emit(&format!(
        "analysisrun.argoproj.io/{} created\n",
        made.metadata.name.unwrap_or_default()
    ))
}

/// Reads the template from the cluster as plain JSON.
async fn read_template(target: &Target, name: &str, global: bool) -> anyhow::Result<Value> {
    let (api, what): (Api<DynamicObject>, _) = if global {
        let resource = ApiResource::erase::<ClusterAnalysisTemplate>(&());
        (
            Api::all_with(target.client.clone(), &resource),
            "ClusterAnalysisTemplate",
        )
    } else {
        let resource = ApiResource::erase::<AnalysisTemplate>(&());
        (
            Api::namespaced_with(target.client.clone(), &target.namespace, &resource),
            "AnalysisTemplate",
        )
    };
    let object = api
        .get(name)
        .await
        .map_err(explain)
        .with_context(|| format!("reading {what} {name:?}"))?;
    Ok(serde_json::to_value(object)?)
}

/// `-a NAME=VALUE` flags as arguments, in Argo's words when one is malformed.
pub fn parse_arguments(flags: &[String]) -> anyhow::Result<Vec<Argument>> {
    flags
        .iter()
        .map(|flag| match flag.split_once('=') {
            Some((name, value)) => Ok(Argument {
                name: Some(name.to_owned()),
                value: Some(value.to_owned()),
                value_from: None,
            }),
            None => Err(anyhow!("arguments must be in the form NAME=VALUE")),
        })
        .collect()
}

/// How the run is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Naming {
    Name(String),
    GenerateName(String),
}

/// The AnalysisRun for a template: its spec with the arguments merged, Argo's kind, the given
/// name, the namespace, and the instance-id label. The template's labels and annotations
/// stay; the server's own metadata (uid, resourceVersion, ...) does not.
pub fn analysis_run_from_template(
    mut template: Value,
    cli_args: &[Argument],
    naming: &Naming,
    namespace: &str,
    instance_id: Option<&str>,
) -> anyhow::Result<Value> {
    if matches!(naming, Naming::GenerateName(prefix) if prefix == "-") {
        bail!("name is invalid");
    }
    let spec = template
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| anyhow!("the template has no spec"))?;
    let args = match spec.get("args") {
        None => cli_args.to_vec(),
        Some(declared) => {
            let declared: Vec<Argument> =
                serde_json::from_value(declared.clone()).context("reading the template's args")?;
            sluice_engine::analysis::merge_args(cli_args, &declared).map_err(|e| anyhow!(e))?
        }
    };
    if args.is_empty() {
        spec.remove("args");
    } else {
        spec.insert("args".into(), serde_json::to_value(args)?);
    }
    let old = template.get("metadata").cloned().unwrap_or(Value::Null);
    let mut metadata = json!({"namespace": namespace});
    match naming {
        Naming::Name(name) => metadata["name"] = json!(name),
        Naming::GenerateName(prefix) => metadata["generateName"] = json!(prefix),
    }
    for kept in ["labels", "annotations"] {
        if let Some(value) = old.get(kept).filter(|v| !v.is_null()) {
            metadata[kept] = value.clone();
        }
    }
    if let Some(id) = instance_id {
        metadata["labels"][CONTROLLER_INSTANCE_ID] = json!(id);
    }
    Ok(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": metadata,
        "spec": template["spec"].clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Value {
        json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "success-rate", "namespace": "other", "uid": "u1",
                         "resourceVersion": "7", "labels": {"team": "web"}},
            "spec": {
                "args": [{"name": "service-name"}, {"name": "threshold", "value": "0.9"}],
                "metrics": [{"name": "m", "provider": {"job": {}}}]
            }
        })
    }

    #[test]
    fn arguments_fill_the_template() {
        let args = parse_arguments(&["service-name=web".into(), "unused=x".into()]).unwrap();
        let run = analysis_run_from_template(
            template(),
            &args,
            &Naming::GenerateName("success-rate-".into()),
            "shop",
            Some("blue"),
        )
        .unwrap();
        assert_eq!(
            run,
            json!({
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "AnalysisRun",
                "metadata": {"namespace": "shop", "generateName": "success-rate-",
                             "labels": {"team": "web", CONTROLLER_INSTANCE_ID: "blue"}},
                "spec": {
                    "args": [{"name": "service-name", "value": "web"},
                             {"name": "threshold", "value": "0.9"}],
                    "metrics": [{"name": "m", "provider": {"job": {}}}]
                }
            })
        );
    }

    #[test]
    fn a_missing_argument_is_named() {
        let err =
            analysis_run_from_template(template(), &[], &Naming::Name("r".into()), "shop", None)
                .unwrap_err();
        assert_eq!(err.to_string(), "args.service-name was not resolved");
    }

    #[test]
    fn argo_errors_for_bad_flags() {
        assert_eq!(
            parse_arguments(&["novalue".into()])
                .unwrap_err()
                .to_string(),
            "arguments must be in the form NAME=VALUE"
        );
        let nameless = json!({"metadata": {}, "spec": {"metrics": []}});
        let err = analysis_run_from_template(
            nameless,
            &[],
            &Naming::GenerateName("-".into()),
            "shop",
            None,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "name is invalid");
    }

    #[test]
    fn a_template_without_args_takes_the_given_ones() {
        let plain = json!({"metadata": {"name": "t"}, "spec": {"metrics": []}});
        let args = parse_arguments(&["a=1".into()]).unwrap();
        let run = analysis_run_from_template(plain, &args, &Naming::Name("r".into()), "ns", None)
            .unwrap();
        assert_eq!(run["spec"]["args"], json!([{"name": "a", "value": "1"}]));
        assert_eq!(run["metadata"], json!({"namespace": "ns", "name": "r"}));
    }
}
