//! Argo Rollouts' sample RPC plugins and the plugin bridge, for the plugin tests: built and
//! cached by `scripts/build-plugins.sh` (`make test` runs it first; a test run without it builds
//! here, once per process), or found in the directory named by `SLUICE_PLUGINS_DIR`.

use std::path::PathBuf;

use anyhow::bail;
use tokio::sync::OnceCell;

/// Names a directory holding `bin/sluice-plugin-bridge` and the sample plugins.
pub const PLUGINS_DIR_ENV: &str = "SLUICE_PLUGINS_DIR";

static DIR: OnceCell<PathBuf> = OnceCell::const_new();

/// The `bin/` directory with `sluice-plugin-bridge`, `metrics-plugin-sample`,
/// `step-plugin-sample`, `step-plugin-e2e` and `trafficrouter-plugin-sample`.
pub async fn plugin_binaries() -> anyhow::Result<PathBuf> {
    DIR.get_or_try_init(find_or_build)
        .await
        .map(|d| d.join("bin"))
}

async fn find_or_build() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(PLUGINS_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let dir = super::build_script::run("build-plugins.sh").await?;
    if !dir.join("bin/sluice-plugin-bridge").is_file() {
        bail!(
            "scripts/build-plugins.sh printed {}, which has no bridge",
            dir.display()
        );
    }
    Ok(dir)
}
