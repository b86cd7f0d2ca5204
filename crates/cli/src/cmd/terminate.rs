//! `terminate experiment|analysisrun`: end an Experiment or AnalysisRun early.

use std::fmt::Debug;

use anyhow::Context as _;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;

use super::{emit, explain};
use crate::kube_target::Target;

/// Terminates the Experiment `name`.
pub async fn experiment(target: &Target, name: &str) -> anyhow::Result<()> {
    let api: Api<Experiment> = Api::namespaced(target.client.clone(), &target.namespace);
    terminate(&api, "experiment", name).await
}

/// Terminates the AnalysisRun `name`.
pub async fn analysis_run(target: &Target, name: &str) -> anyhow::Result<()> {
    let api: Api<AnalysisRun> = Api::namespaced(target.client.clone(), &target.namespace);
    terminate(&api, "analysisrun", name).await
}

async fn terminate<K>(api: &Api<K>, kind: &str, name: &str) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(terminate_patch()),
    )
    .await
    .map_err(explain)
    .with_context(|| format!("terminating {kind} {name:?}"))?;
    emit(&terminated(kind, name))
}

/// Merge patch that asks the controller to end the object.
pub fn terminate_patch() -> Value {
    json!({"spec": {"terminate": true}})
}

/// What is printed once the patch is in, as Argo's plugin prints it.
pub fn terminated(kind: &str, name: &str) -> String {
    format!("{kind} '{name}' terminated\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_spec_terminate() {
        assert_eq!(
            terminate_patch().to_string(),
            r#"{"spec":{"terminate":true}}"#
        );
    }

    #[test]
    fn reports_as_argo_does() {
        assert_eq!(
            terminated("experiment", "demo-exp"),
            "experiment 'demo-exp' terminated\n"
        );
        assert_eq!(
            terminated("analysisrun", "demo-run"),
            "analysisrun 'demo-run' terminated\n"
        );
    }
}
