//! Finding the repository and getting the local control plane running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

/// Where the running control plane keeps what clients need.
#[derive(Clone, Debug)]
pub struct ClusterPaths {
    pub repo_root: PathBuf,
    /// Admin kubeconfig (`.dev/kubeconfig`).
    pub kubeconfig: PathBuf,
    /// Kubeconfig of the non-admin user `sluice-e2e-controller` (`.dev/kubeconfig-controller`).
    pub controller_kubeconfig: PathBuf,
}

/// The repository root, found from this crate's location in it.
pub fn repo_root() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = crate_dir.join("../..");
    root.canonicalize().unwrap_or(root)
}

/// Runs `scripts/cluster-up.sh`, which returns at once when the control plane is already up and
/// healthy, and otherwise starts it and waits until it is ready. The script holds a file lock, so
/// test processes running side by side start it only once.
pub(super) async fn ensure_running() -> anyhow::Result<ClusterPaths> {
    let root = repo_root();
    let script = root.join("scripts/cluster-up.sh");
    let dir = root.clone();
    let status = tokio::task::spawn_blocking(move || {
        let mut command = Command::new("bash");
        command.arg(&script).current_dir(&dir).stdin(Stdio::null());
        // Progress goes straight to the terminal: the first start builds the control plane.
        command.stdout(Stdio::inherit()).stderr(Stdio::inherit());
        command
            .status()
            .with_context(|| format!("running {}", script.display()))
    })
    .await
    .context("waiting for scripts/cluster-up.sh")??;
    if !status.success() {
        bail!(
            "scripts/cluster-up.sh failed ({status}); logs are in {}",
            root.join(".dev/logs").display()
        );
    }
    Ok(ClusterPaths {
        kubeconfig: root.join(".dev/kubeconfig"),
        controller_kubeconfig: root.join(".dev/kubeconfig-controller"),
        repo_root: root,
    })
}
