//! A controller that runs Argo's plugins for a test: the plugin bridge and the plugin
//! binaries built for the tests, plugins installed in a folder of the test's own, the
//! `argo-rollouts-config` ConfigMap read from the test's namespace.

use std::path::Path;

use sluice_testenv::harness::{TestEnv, TestNamespace};

/// The controller flags of [`crate::controller_args`], with the bridge of `bin` and a plugin
/// folder of the namespace's own.
pub fn plugin_args(ns: &TestNamespace, bin: &Path) -> sluice_controller::Args {
    let mut args = crate::controller_args(ns.name());
    args.plugin_bridge = Some(bin.join("sluice-plugin-bridge"));
    args.plugin_dir = std::env::temp_dir().join(format!("sluice-plugin-bin-{}", ns.name()));
    args
}

/// Starts a controller with `args`, reading `argo-rollouts-config` from the test's namespace.
pub async fn start_with_plugins(
    env: &TestEnv,
    ns: &TestNamespace,
    args: &sluice_controller::Args,
) -> sluice_controller::ControllerHandle {
    sluice_controller::install_crypto_provider();
    let options = sluice_controller::Options {
        config_namespace: Some(ns.name().to_string()),
        ..Default::default()
    };
    sluice_controller::start(env.config().clone(), args, options)
        .await
        .unwrap()
}

/// The pid of the running process whose executable is `path` (a plugin the controller
/// started).
pub fn pid_of(path: &Path) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let argv0 = cmdline.split(|b| *b == 0).next()?;
        (argv0 == path.as_os_str().as_encoded_bytes()).then_some(pid)
    })
}
