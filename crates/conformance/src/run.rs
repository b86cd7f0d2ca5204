//! Running generated cases: how many, from which seed, and what a difference looks like.
//!
//! Each comparison runs `cases()` cases from a seed that moves with the commit (the count of
//! commits, as the simulation's seed window does), so every CI run tries cases no run before it
//! tried while a failure stays reproducible: the seed is printed, and `SLUICE_CONFORMANCE_SEED`
//! replays it. On a difference proptest shrinks the case to a minimal one, which the failure
//! shows.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::process::Command;
use std::sync::OnceLock;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// Cases per comparison: `SLUICE_CONFORMANCE_CASES`, or 5,000 (`make test`).
pub fn cases() -> u32 {
    std::env::var("SLUICE_CONFORMANCE_CASES")
        .ok()
        .and_then(|v| v.trim().replace('_', "").parse().ok())
        .unwrap_or(5_000)
}

/// The seed of a comparison: `SLUICE_CONFORMANCE_SEED`, or the commit count mixed with the
/// comparison's name.
pub fn seed(name: &str) -> (u64, String) {
    if let Some(seed) = std::env::var("SLUICE_CONFORMANCE_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return (seed, "SLUICE_CONFORMANCE_SEED".into());
    }
    let (window, from) = window();
    // FNV-1a of the name, so that comparisons do not share a stream.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ window, from)
}

fn window() -> (u64, String) {
    static WINDOW: OnceLock<(u64, String)> = OnceLock::new();
    WINDOW
        .get_or_init(|| {
            let count = Command::new("git")
                .args(["rev-list", "--count", "HEAD"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .and_then(|s| s.trim().parse().ok());
            match count {
                Some(n) => (n, format!("commit number {n}")),
                None => (0, "no git checkout".into()),
            }
        })
        .clone()
}

/// What one compared case came to, counted by kind for the report line.
#[derive(Debug, Default)]
pub struct Tally(BTreeMap<String, u64>);

impl Tally {
    pub fn add(&mut self, kind: impl Into<String>) {
        *self.0.entry(kind.into()).or_default() += 1;
    }

    pub fn get(&self, kind: &str) -> u64 {
        self.0.get(kind).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    pub fn render(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs `compare` on `cases()` cases of the strategy `strategy` makes. `compare` answers `Ok(kind)` for a case that
/// agrees (the kind is counted) and `Err(why)` for a difference; the first difference is shrunk
/// and the test fails with the minimal case. Prints one line: the comparison, its seed and the
/// tally.
pub fn compare<M, S, F>(name: &str, strategy: M, compare: F) -> Tally
where
    M: FnOnce() -> S + Send,
    S: Strategy,
    S::Value: Debug,
    F: Fn(&S::Value) -> Result<String, String> + Send,
{
    // The generators nest deeply (a Rollout is a tree of strategies): a debug build needs a
    // larger stack than a test thread's to generate and shrink them.
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name(name.to_string())
            .stack_size(256 << 20)
            .spawn_scoped(scope, || compare_here(name, strategy(), compare))
            .expect("a thread for the comparison")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn compare_here<S, F>(name: &str, strategy: S, compare: F) -> Tally
where
    S: Strategy,
    S::Value: Debug,
    F: Fn(&S::Value) -> Result<String, String>,
{
    let (seed, from) = seed(name);
    let cases = cases();
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4_000,
        max_global_rejects: cases.saturating_mul(4),
        ..Config::default()
    };
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    // Cases after the first difference are the shrinking's, not counted.
    let tally = RefCell::new(Tally::default());
    let shrinking = Cell::new(false);
    // Exploring (SLUICE_CONFORMANCE_EXPLORE=1): every difference is counted by its first
    // line, none fails, so that one run shows every kind of difference there is.
    let explore = std::env::var_os("SLUICE_CONFORMANCE_EXPLORE").is_some();
    let result = runner.run(&strategy, |case| {
        match compare(&case) {
            Err(why) if explore => {
                let first = why.lines().next().unwrap_or_default().to_string();
                let mut tally = tally.borrow_mut();
                if tally.get(&format!("DIFFERENT: {first}")) == 0 {
                    eprintln!("{name}: {why}\n  case: {case:?}\n");
                }
                tally.add(format!("DIFFERENT: {first}"));
            }
            Ok(kind) if !shrinking.get() => tally.borrow_mut().add(kind),
            Ok(_) => {}
            Err(why) => {
                shrinking.set(true);
                return Err(TestCaseError::fail(why));
            }
        }
        Ok(())
    });
    let tally = tally.into_inner();
    println!(
        "conformance {name}: {} cases from seed {seed} ({from}): {}",
        tally.total(),
        tally.render()
    );
    match result {
        Ok(()) => tally,
        Err(TestError::Fail(why, case)) => panic!(
            "{name}: Sluice and Argo differ (seed {seed}; replay with SLUICE_CONFORMANCE_SEED={seed}).\n\
             {why}\nminimal case: {case:#?}"
        ),
        Err(TestError::Abort(why)) => panic!("{name}: aborted: {why}"),
    }
}
