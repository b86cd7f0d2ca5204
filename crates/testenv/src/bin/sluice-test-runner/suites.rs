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

/// Modules whose tests are independent of each other and so long together that the module
/// would be the run's longest pole: each runs as this many processes (`<module>.1`, ...),
/// its tests dealt out in turn, which the runner schedules like any other.
#[rustfmt::skip]
pub const PARTS: &[(&str, usize, &str)] = &[
    ("live_scenarios_match_argo", 4,
     "twelve scenarios of 20 to 70 s, two at a time in one process: six minutes alone"),
    ("crash_at_every_write", 2,
     "five crash walks of up to a minute and a half, two at a time in one process"),
];

/// Splits `binary` into one run per top-level module if it is a suite, listing its tests
/// (`--list --format terse`), and a module of [`PARTS`] into its parts; any other binary
/// is returned as it is.
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
        .flat_map(|(module, tests)| {
            let count = PARTS
                .iter()
                .find(|(name, ..)| *name == module)
                .map_or(1, |(_, count, _)| *count);
            parts(&module, tests, count)
                .into_iter()
                .map(|(name, tests)| TestBinary {
                    target: module.clone(),
                    name,
                    tests,
                    ..binary.clone()
                })
                .collect::<Vec<_>>()
        })
        .collect())
}

/// A module's tests dealt out in turn into at most `count` runs, named `<module>.<n>`; one
/// run keeps the module's name.
pub fn parts(module: &str, tests: Vec<String>, count: usize) -> Vec<(String, Vec<String>)> {
    let count = count.clamp(1, tests.len().max(1));
    if count == 1 {
        return vec![(module.to_string(), tests)];
    }
    let mut runs: Vec<(String, Vec<String>)> = (1..=count)
        .map(|n| (format!("{module}.{n}"), Vec::new()))
        .collect();
    for (i, test) in tests.into_iter().enumerate() {
        runs[i % count].1.push(test);
    }
    runs
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
    fn a_module_in_parts_deals_its_tests_out_in_turn() {
        let tests: Vec<String> = (1..=5).map(|n| format!("m::t{n}")).collect();
        assert_eq!(
            parts("m", tests.clone(), 2),
            vec![
                (
                    "m.1".to_string(),
                    vec!["m::t1".into(), "m::t3".into(), "m::t5".into()]
                ),
                ("m.2".to_string(), vec!["m::t2".into(), "m::t4".into()]),
            ]
        );
        assert_eq!(parts("m", tests.clone(), 1), vec![("m".to_string(), tests)]);
        let two = vec!["m::a".to_string(), "m::b".to_string()];
        assert_eq!(parts("m", two, 4).len(), 2, "never an empty part");
    }

    #[test]
    fn every_module_in_parts_says_why() {
        for (module, count, why) in PARTS {
            assert!(*count > 1 && !why.is_empty(), "{module}");
        }
    }

    #[test]
    fn an_empty_listing_has_no_group() {
        assert!(modules("").is_empty());
        assert!(modules("0 tests, 0 benchmarks\n").is_empty());
    }
}
