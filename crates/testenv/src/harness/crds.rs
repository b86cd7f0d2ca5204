//! Installing the project's CustomResourceDefinitions.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{Condition, conditions::is_crd_established};

use super::apply::{apply_document, parse_documents};
use super::{TestEnv, wait_for_object};

/// Marks a CRD the tests installed with a digest of the document applied and the generation
/// the apply left. Every test process installs the CRDs it needs; an unchanged one is not
/// applied again, because each apply of these large objects costs the API server a decode, a
/// validation against the previous version and a managed-fields merge (over a thousand
/// applies in a `make test`, about a tenth of the API server's time).
const APPLIED: &str = "test.sluice.dev/applied";

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
        let digest = digest(&definition);
        let name = definition["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !name.is_empty() && installed_unchanged(&crds, &name, &digest).await {
            continue;
        }
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
        // Marked once established, with the generation the apply left: a later apply of
        // other content (Argo's CRDs, by the tests that install them) raises the generation,
        // and the next install applies again.
        let mark = format!("{digest}/{}", applied.metadata.generation.unwrap_or(0));
        let patch = serde_json::json!({"metadata": {"annotations": {APPLIED: mark}}});
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("marking {name} as installed"))?;
    }
    Ok(())
}

/// Whether the CRD `name` was installed from this very document and established, and its
/// spec has not changed since (its mark names `digest` and its current generation). Only its
/// metadata is read.
async fn installed_unchanged(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    digest: &str,
) -> bool {
    let Ok(Some(crd)) = crds.get_metadata_opt(name).await else {
        return false;
    };
    let mark = format!("{digest}/{}", crd.metadata.generation.unwrap_or(0));
    crd.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(APPLIED))
        .is_some_and(|m| *m == mark)
}

/// A digest of a document (FNV-1a over its JSON text): it tells documents apart, it is not
/// a security check.
fn digest(doc: &serde_json::Value) -> String {
    let text = doc.to_string();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_tells_documents_apart_and_repeats() {
        let a = serde_json::json!({"kind": "CustomResourceDefinition", "spec": {"v": 1}});
        let b = serde_json::json!({"kind": "CustomResourceDefinition", "spec": {"v": 2}});
        assert_eq!(digest(&a), digest(&a.clone()));
        assert_ne!(digest(&a), digest(&b));
        assert_eq!(digest(&a).len(), 16);
    }
}
