//! Installing the project's CustomResourceDefinitions.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::wait::{Condition, conditions::is_crd_established};

use super::apply::{apply_document, parse_documents};
use super::{TestEnv, wait_for_object};

/// Applies the project's CustomResourceDefinitions in `manifests/crds/` and waits until each
/// is established.
pub(super) async fn install(env: &TestEnv) -> anyhow::Result<()> {
    install_dir(env, &env.repo_root().join("manifests/crds")).await
}

/// Where the Gateway API v1.6.1 CRDs are: `$SLUICE_GATEWAY_API_CRDS`, else
/// `shared/gateway-api/v1.6.1` beside the repository or beside any directory above it.
pub fn gateway_api_crds_dir() -> anyhow::Result<PathBuf> {
    const RELATIVE: &str = "shared/gateway-api/v1.6.1";
    if let Some(dir) = std::env::var_os("SLUICE_GATEWAY_API_CRDS") {
        return Ok(PathBuf::from(dir));
    }
    super::repo_root()
        .ancestors()
        .map(|a| a.join(RELATIVE))
        .find(|d| d.join("httproutes.yaml").is_file())
        .with_context(|| {
            format!(
                "Gateway API CRDs not found: expected {RELATIVE} beside the repository (or a \
                 directory above it), or SLUICE_GATEWAY_API_CRDS pointing at them"
            )
        })
}

/// Applies the CustomResourceDefinitions in `dir/*.yaml` (server-side, since they are large;
/// other documents there, such as a kustomization, are skipped) and waits until each is
/// established.
pub(super) async fn install_dir(env: &TestEnv, dir: &Path) -> anyhow::Result<()> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let mut definitions = Vec::new();
    for file in &files {
        let yaml =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let docs = parse_documents(&yaml).with_context(|| format!("parsing {}", file.display()))?;
        definitions.extend(
            docs.into_iter()
                .filter(|d| d["kind"] == "CustomResourceDefinition")
                .map(|d| (file.clone(), d)),
        );
    }
    if definitions.is_empty() {
        bail!(
            "no CustomResourceDefinitions found in {}/*.yaml; the project's CRDs must be \
             generated there before tests that use its kinds can run",
            dir.display()
        );
    }
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (file, definition) in definitions {
        let applied = apply_document(&client, "", definition)
            .await
            .with_context(|| format!("installing {}", file.display()))?;
        let name = applied.metadata.name.unwrap_or_default();
        wait_for_object(
            &crds,
            &name,
            Duration::from_secs(30),
            "the CRD to be established",
            |crd| is_crd_established().matches_object(Some(crd)),
        )
        .await?;
    }
    Ok(())
}
