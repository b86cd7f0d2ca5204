//! What drives the dashboard's pages in a real browser: Debian's headless Chromium and the
//! UI's `playwright-core` (in `crates/cli/dashboard-ui/node_modules`, installed from its lock
//! file when missing, as a fresh clone has none).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// Where the UI's sources, lock file and browser scripts live.
pub fn ui_dir() -> PathBuf {
    crate::harness::repo_root().join("crates/cli/dashboard-ui")
}

/// Runs `npm ci` in `ui_dir` unless its modules are there already.
pub async fn ensure_node_modules(ui_dir: &Path) -> anyhow::Result<()> {
    // The browser driver and the login test's OpenID Connect provider.
    if ["playwright-core", "oidc-provider"]
        .iter()
        .all(|m| ui_dir.join("node_modules").join(m).is_dir())
    {
        return Ok(());
    }
    eprintln!(
        "installing the dashboard UI's node modules (npm ci in {})",
        ui_dir.display()
    );
    let status = tokio::process::Command::new("npm")
        .arg("ci")
        .current_dir(ui_dir)
        .status()
        .await
        .context("running npm ci (is npm installed?)")?;
    if !status.success() {
        bail!("npm ci in {} failed ({status})", ui_dir.display());
    }
    Ok(())
}
