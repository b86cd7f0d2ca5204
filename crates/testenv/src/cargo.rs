//! Cargo run from inside a test or a program cargo started.
//!
//! `cargo run` and `cargo test` give the program they start the variables of its package
//! (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...), and a cargo started from there inherits
//! them. ring's build script watches several of them, so that build sees them changed since
//! the last plain one, runs again, and rebuilds ring and everything above it (rustls, the kube
//! client, every workspace crate on them); the next plain build rebuilds them back. A nested
//! cargo is started without them: it then finds what the plain builds left up to date.

use std::process::Command;

/// What cargo sets for a program besides `CARGO` and the `CARGO_PKG_` variables (`OUT_DIR`
/// for a package with a build script).
const PACKAGE_VARS: &[&str] = &[
    "OUT_DIR",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
];

/// Whether cargo sets `key` for the program it starts (and a nested cargo must not inherit it).
pub fn set_for_a_package(key: &str) -> bool {
    key == "CARGO" || key.starts_with("CARGO_PKG_") || PACKAGE_VARS.contains(&key)
}

/// A `cargo` command (the one that started this process, if one did) without the variables
/// of the package this process was started for.
pub fn command() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    for (key, _) in std::env::vars_os() {
        if set_for_a_package(&key.to_string_lossy()) {
            command.env_remove(&key);
        }
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packages_variables_are_not_inherited_but_the_build_settings_are() {
        for key in ["CARGO", "CARGO_PKG_NAME", "CARGO_MANIFEST_DIR", "OUT_DIR"] {
            assert!(set_for_a_package(key), "{key}");
        }
        for key in [
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO_HOME",
            "PATH",
        ] {
            assert!(!set_for_a_package(key), "{key}");
        }
    }
}
