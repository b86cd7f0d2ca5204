//! The workspace's test binaries, as cargo builds them (`cargo test --no-run`, its JSON
//! messages on stdout, its progress on the terminal).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// One test binary and how cargo would run it.
#[derive(Clone, Debug)]
pub struct TestBinary {
    /// The test target's name: a file of `tests/`, or the crate's name for its unit tests.
    pub target: String,
    /// What is shown and recorded: the target, with `(lib)` or `(bin)` for unit tests.
    pub name: String,
    pub package: String,
    /// The package's directory: cargo runs tests there, with `CARGO_MANIFEST_DIR` naming it.
    pub dir: PathBuf,
    pub executable: PathBuf,
    /// The exact names of the tests to run, for a module of a suite (`suites.rs`); empty for
    /// all of the binary's.
    pub tests: Vec<String>,
}

/// The tests cargo built, and the workspace's programs it built along for them.
pub struct Built {
    pub tests: Vec<TestBinary>,
    /// `(binary name, executable)` of each program (a `bin` target, not its unit tests) the
    /// same build produced: an integration test's package has its binaries built.
    pub programs: Vec<(String, PathBuf)>,
}

/// Builds the tests with `cargo test --no-run` and the given arguments, and lists the binaries.
pub fn build(cargo_args: &[String]) -> anyhow::Result<Built> {
    // Under `cargo run`, this process has the variables cargo sets for a package's binary,
    // which the build must not inherit (`sluice_testenv::cargo`). `make test` runs this
    // binary directly.
    let mut command = sluice_testenv::cargo::command();
    let output = command
        .args([
            "test",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .args(cargo_args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo")?;
    if !output.status.success() {
        bail!("building the tests failed ({})", output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut tests: Vec<TestBinary> = stdout.lines().filter_map(binary).collect();
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    tests.dedup_by(|a, b| a.executable == b.executable);
    let programs = stdout.lines().filter_map(program).collect();
    Ok(Built { tests, programs })
}

/// Why the tests cannot run when they were compiled from another checkout: cargo names a
/// workspace's artifacts by paths relative to the workspace, so a second checkout sharing a
/// `CARGO_TARGET_DIR` finds the first one's builds fresh and keeps them, and with them the
/// first checkout's paths compiled into the test support (its scripts, its manifests).
/// `compiled_in` is this runner's own package directory as compiled; `tests` are what cargo
/// reports for the checkout it was asked to build.
pub fn built_for_another_checkout(compiled_in: &Path, tests: &[TestBinary]) -> Option<String> {
    let here = tests.iter().find(|t| t.package == "sluice-testenv")?;
    (here.dir != compiled_in).then(|| {
        format!(
            "the builds in this target directory were compiled in another checkout ({}), not in this one ({}): cargo reuses them and they would run that checkout's scripts; give each checkout a target directory of its own (CARGO_TARGET_DIR)",
            compiled_in.display(),
            here.dir.display()
        )
    })
}

/// The program one of cargo's messages announces, if it is one: a `bin` target built as
/// itself, with its name and executable.
fn program(line: &str) -> Option<(String, PathBuf)> {
    let msg: Value = serde_json::from_str(line).ok()?;
    let is_bin = msg["target"]["kind"].as_array()?.iter().any(|k| k == "bin");
    if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != false || !is_bin {
        return None;
    }
    let name = msg["target"]["name"].as_str()?.to_string();
    Some((name, PathBuf::from(msg["executable"].as_str()?)))
}

/// The test binary one of cargo's messages announces, if it is one.
fn binary(line: &str) -> Option<TestBinary> {
    let msg: Value = serde_json::from_str(line).ok()?;
    if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(msg["executable"].as_str()?);
    let target = msg["target"]["name"].as_str()?.to_string();
    let kind = msg["target"]["kind"][0].as_str().unwrap_or("test");
    let name = match kind {
        "test" => target.clone(),
        other => format!("{target} ({other})"),
    };
    let dir = PathBuf::from(msg["manifest_path"].as_str()?)
        .parent()?
        .to_path_buf();
    Some(TestBinary {
        target,
        name,
        package: package_name(msg["package_id"].as_str()?),
        dir,
        executable,
        tests: Vec::new(),
    })
}

/// The package name in a package id: `path+file:///w/crates/e2e#sluice-e2e@0.1.0`, or the older
/// `sluice-e2e 0.1.0 (path+file:///w/crates/e2e)`.
fn package_name(id: &str) -> String {
    match id.split_once('#') {
        Some((path, rest)) => {
            let name = rest.split('@').next().unwrap_or(rest);
            // `…/crates/e2e#0.1.0`: the name is the directory's.
            if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                path.rsplit('/').next().unwrap_or(path).to_string()
            } else {
                name.to_string()
            }
        }
        None => id.split(' ').next().unwrap_or(id).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_of_another_checkout_are_refused() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/testenv#sluice-testenv@0.1.0","manifest_path":"/w/crates/testenv/Cargo.toml","target":{"kind":["bin"],"name":"sluice-test-runner"},"profile":{"test":true},"executable":"/t/debug/deps/sluice_test_runner-1"}"#;
        let tests = vec![binary(line).unwrap()];
        let here = Path::new("/w/crates/testenv");
        assert_eq!(built_for_another_checkout(here, &tests), None);
        let elsewhere = Path::new("/old/crates/testenv");
        let why = built_for_another_checkout(elsewhere, &tests).expect("refused");
        assert!(why.contains("/old/crates/testenv") && why.contains("CARGO_TARGET_DIR"));
        // Without the runner's own package among the tests there is nothing to compare.
        assert_eq!(built_for_another_checkout(elsewhere, &[]), None);
    }

    #[test]
    fn reads_test_binaries_from_cargos_messages() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/e2e#sluice-e2e@0.1.0","manifest_path":"/w/crates/e2e/Cargo.toml","target":{"kind":["test"],"name":"canary"},"profile":{"test":true},"executable":"/t/debug/deps/canary-1"}"#;
        let b = binary(line).unwrap();
        assert_eq!(
            (b.name.as_str(), b.package.as_str(), b.dir.to_str()),
            ("canary", "sluice-e2e", Some("/w/crates/e2e"))
        );
        let unit = line
            .replace(
                r#"["test"],"name":"canary""#,
                r#"["lib"],"name":"sluice_e2e""#,
            )
            .replace("canary-1", "sluice_e2e-2");
        assert_eq!(binary(&unit).unwrap().name, "sluice_e2e (lib)");
        // The library itself, built for the tests, has no test profile.
        let lib = line.replace(r#""test":true"#, r#""test":false"#);
        assert!(binary(&lib).is_none());
        assert!(program(&lib).is_none(), "a library is no program");
        assert!(binary(r#"{"reason":"build-finished","success":true}"#).is_none());
    }

    #[test]
    fn reads_programs_built_for_the_tests() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/controller#sluice-controller@0.1.0","manifest_path":"/w/crates/controller/Cargo.toml","target":{"kind":["bin"],"name":"sluice-controller"},"profile":{"test":false},"executable":"/t/debug/sluice-controller"}"#;
        assert_eq!(
            program(line),
            Some((
                "sluice-controller".to_string(),
                PathBuf::from("/t/debug/sluice-controller")
            ))
        );
        // Its unit tests are a test binary, not the program.
        let unit = line.replace(r#""test":false"#, r#""test":true"#);
        assert!(program(&unit).is_none());
        assert!(binary(&unit).is_some());
    }

    #[test]
    fn package_names_in_both_id_formats() {
        assert_eq!(
            package_name("path+file:///w/crates/e2e#sluice-e2e@0.1.0"),
            "sluice-e2e"
        );
        assert_eq!(package_name("path+file:///w/crates/house#0.1.0"), "house");
        assert_eq!(
            package_name("sluice-e2e 0.1.0 (path+file:///w/crates/e2e)"),
            "sluice-e2e"
        );
    }
}
