//! The project's cached build scripts (`scripts/build-*.sh`), run from tests that need what they
//! build: each prints the path of its result on stdout and its progress on stderr.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

/// Runs `scripts/<name>` from the repository's root and returns the path it printed. Progress
/// goes straight to the terminal: a first build takes minutes.
pub(super) async fn run(name: &'static str) -> anyhow::Result<PathBuf> {
    run_with(name, &[]).await
}

/// [`run`] with environment variables set for the script (e.g. `ARGO_VERSION`).
pub(super) async fn run_with(name: &'static str, env: &[(&str, &str)]) -> anyhow::Result<PathBuf> {
    let root = super::repo_root();
    let script = root.join("scripts").join(name);
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .arg(&script)
            .envs(env)
            .current_dir(&root)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {}", script.display()))
    })
    .await
    .with_context(|| format!("waiting for scripts/{name}"))??;
    if !output.status.success() {
        bail!(
            "scripts/{name} failed ({}); run it by hand to see why",
            output.status
        );
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}
