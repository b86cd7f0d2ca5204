//! Test binaries that hold many tests of one kind, a module each (the end-to-end tests'
//! `e2e`, the CLI's `cli`). One binary links the controller once, where a binary per test
//! linked it again for each (69 links of about 200 MB for e2e: a build of that package after
//! a change to its library took 196 s, as one binary 48 s). The runner still runs each module
//! as a process of its own, named after the module, so that a test keeps its own log, its
//! scheduling rule (`schedule.rs`) and its recorded duration.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

use crate::cargo::TestBinary;

/// The test targets run module by module.
pub const SUITES: &[&str] = &["e2e", "cli", "sim"];

/// Splits `binary` into one run per top-level module if it is a suite, listing its tests
/// (`--list --format terse`); any other binary is returned as it is.
pub fn split(binary: TestBinary) -> anyhow::Result<Vec<TestBinary>> {
    if !SUITES.contains(&binary.target.as_str()) {
        return Ok(vec![binary]);
    }
    let out = Command::new(&binary.executable)
        .args(["--list", "--format", "terse"])
        .current_dir(&binary.dir)
        .env("CARGO_MANIFEST_DIR", &binary.dir)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("listing the tests of {}", binary.executable.display()))?;
    if !out.status.success() {
        bail!(
            "listing the tests of {} failed ({}): {}",
            binary.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(modules(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .map(|(module, tests)| TestBinary {
            target: module.clone(),
            name: module,
            tests,
            ..binary.clone()
        })
        .collect())
}

/// The tests of a `--list --format terse` listing (`canary::promotes: test` lines), by
/// top-level module; a test outside any module is its own group.
pub fn modules(listing: &str) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in listing.lines() {
        let Some(test) = line.strip_suffix(": test") else {
            continue;
        };
        let module = test.split_once("::").map_or(test, |(m, _)| m);
        groups
            .entry(module.to_string())
            .or_default()
            .push(test.to_string());
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_are_grouped_by_their_top_level_module() {
        let listing = "canary::a: test\ncanary::nested::b: test\nanalysis::c: test\n\
                       loose: test\nbench_me: bench\n";
        let groups = modules(listing);
        assert_eq!(
            groups,
            BTreeMap::from([
                ("analysis".to_string(), vec!["analysis::c".to_string()]),
                (
                    "canary".to_string(),
                    vec!["canary::a".to_string(), "canary::nested::b".to_string()]
                ),
                ("loose".to_string(), vec!["loose".to_string()]),
            ])
        );
    }

    #[test]
    fn an_empty_listing_has_no_group() {
        assert!(modules("").is_empty());
        assert!(modules("0 tests, 0 benchmarks\n").is_empty());
    }
}
