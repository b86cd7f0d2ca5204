//! `retry rollout`: start an aborted update again. `retry experiment`: run a failed Experiment
//! again, from the start.

use anyhow::Context as _;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use sluice_api::experiment::Experiment;

use super::{emit, explain, merge_patch_status, rollouts};
use crate::kube_target::Target;

pub async fn run(target: &Target, name: &str) -> anyhow::Result<()> {
    merge_patch_status(&rollouts(target), name, &retry_patch()).await?;
    emit(&format!("rollout '{name}' retried\n"))
}

/// Status merge patch that lifts an abort.
pub fn retry_patch() -> Value {
    json!({"status": {"abort": false}})
}

/// Retries the Experiment `name`. Experiments have no status subresource: the patch goes to the
/// object itself.
pub async fn experiment(target: &Target, name: &str) -> anyhow::Result<()> {
    let api: Api<Experiment> = Api::namespaced(target.client.clone(), &target.namespace);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(retry_experiment_patch()),
    )
    .await
    .map_err(explain)
    .with_context(|| format!("retrying experiment {name:?}"))?;
    emit(&format!("experiment '{name}' retried\n"))
}

/// Merge patch that drops an Experiment's whole status: the controller starts it over.
pub fn retry_experiment_patch() -> Value {
    json!({"status": null})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clears_status_abort() {
        assert_eq!(retry_patch().to_string(), r#"{"status":{"abort":false}}"#);
    }

    #[test]
    fn an_experiment_loses_its_whole_status() {
        assert_eq!(retry_experiment_patch().to_string(), r#"{"status":null}"#);
    }
}
