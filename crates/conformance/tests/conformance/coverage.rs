//! How much of Sluice's Rollout validation the generated Rollouts reach: every place in
//! `crates/api/src/validation/` that reports a problem is a check, and the generator must make
//! each one fire. Prints the checks that never fired.

use std::collections::BTreeSet;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;
use sluice_api::Rollout;
use sluice_api::validation::{check_rollout, coverage};
use sluice_conformance::generate::rollout::rollout;
use sluice_conformance::oracle::repo_root;

/// Every check must fire: one the generated Rollouts never reach is a rule never compared with
/// Argo (the generator lost reach, or a new check needs a case).
const FLOOR: f64 = 1.0;

/// The lines of the validation sources that call one of `methods` of `Problems`.
fn checks_calling(methods: &[&str]) -> BTreeSet<(String, u32)> {
    let dir = repo_root().join("crates/api/src/validation");
    let mut checks = BTreeSet::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.push(repo_root().join("crates/api/src/validation.rs"));
    files.sort();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name == "tests.rs" || name == "test_support.rs" || name == "coverage.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            let calls = methods.iter().any(|m| {
                code.starts_with(&format!(".{m}")) || code.contains(&format!("problems.{m}"))
            });
            if calls && !code.starts_with("//") && !code.starts_with("fn ") {
                let file = if name == "validation.rs" {
                    "crates/api/src/validation.rs".to_string()
                } else {
                    format!("crates/api/src/validation/{name}")
                };
                checks.insert((file, i as u32 + 1));
            }
        }
    }
    checks
}

#[test]
fn generated_rollouts_reach_the_validation_checks() {
    coverage::record_checks();
    let cases = sluice_conformance::run::cases() * 5;
    // Generating nests deeply: a large stack, as for the comparisons.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let mut runner = TestRunner::new_with_rng(
                Config::default(),
                TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
            );
            let strategy = rollout();
            for i in 0..cases {
                let mut value: Value = strategy.new_tree(&mut runner).unwrap().current();
                // One in ten drives a StatefulSet and one in ten a DaemonSet, whose own checks
                // come first.
                let driven = match i % 10 {
                    0 => Some("rollouts.sluice.dev/statefulset"),
                    5 => Some("rollouts.sluice.dev/daemonset"),
                    _ => None,
                };
                if let Some(annotation) = driven {
                    let name = if i % 20 < 10 { "" } else { "db" };
                    value["metadata"]["annotations"] = serde_json::json!({ annotation: name });
                }
                // One in seven asks for config rollouts, some with a value Sluice warns of, some
                // beside a driven workload.
                let config = match i % 7 {
                    0 => Some("true"),
                    3 => Some("sometimes"),
                    _ => None,
                };
                if let Some(config) = config {
                    if !value["metadata"]["annotations"].is_object() {
                        value["metadata"]["annotations"] = serde_json::json!({});
                    }
                    value["metadata"]["annotations"]["rollouts.sluice.dev/config-rollout"] =
                        config.into();
                }
                if let Ok(rollout) = serde_json::from_value::<Rollout>(value) {
                    let _ = check_rollout(&rollout);
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
    // `add` reports only the AnalysisTemplate and AnalysisRun checks (in their own wording),
    // which Rollouts do not reach; the rest are a Rollout's.
    let all = checks_calling(&[
        "argo(",
        "argo_unplaced(",
        "sluice(",
        "required(",
        "duplicate(",
        "negative(",
    ]);
    let fired: BTreeSet<(String, u32)> = coverage::checks_fired()
        .into_iter()
        .map(|(file, line)| (file.replace('\\', "/"), line))
        .collect();
    let plain_only = checks_calling(&["add("]);
    let fired: BTreeSet<(String, u32)> = fired.difference(&plain_only).cloned().collect();
    let unknown: Vec<_> = fired.difference(&all).collect();
    assert!(
        unknown.is_empty(),
        "checks fired at lines the source scan does not list (the scan is out of date): {unknown:?}"
    );
    let missed: Vec<_> = all.difference(&fired).collect();
    let share = fired.len() as f64 / all.len() as f64;
    println!(
        "validation checks reached by generated Rollouts: {} of {} ({:.0}%)",
        fired.len(),
        all.len(),
        share * 100.0
    );
    for (file, line) in &missed {
        println!("  never fired: {file}:{line}");
    }
    assert!(
        share >= FLOOR,
        "the generated Rollouts reach {:.0}% of the validation checks, less than {:.0}%",
        share * 100.0,
        FLOOR * 100.0
    );
}
