//! Where Argo Rollouts' v1.9.1 manifests (examples, e2e fixtures, CRDs) are found, for the tests
//! that use them as data: `$SLUICE_ARGO_CORPUS`, else `shared/argo-corpus/v1.9.1` beside the
//! repository or beside any directory above it (checkouts are not always at the same depth).

use std::path::{Path, PathBuf};

const RELATIVE: &str = "shared/argo-corpus/v1.9.1";

/// The corpus root, if there is one.
pub fn argo_corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SLUICE_ARGO_CORPUS") {
        return Some(PathBuf::from(dir));
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join(RELATIVE))
        .find(|d| d.join("manifests/crds/rollout-crd.yaml").is_file())
}

/// The corpus root, or a message saying where it was looked for and how to point at it.
pub fn require_argo_corpus_dir() -> Result<PathBuf, String> {
    argo_corpus_dir().ok_or_else(|| {
        format!(
            "Argo corpus not found: expected {RELATIVE} beside the repository (or a directory \
             above it), or SLUICE_ARGO_CORPUS pointing at it"
        )
    })
}
