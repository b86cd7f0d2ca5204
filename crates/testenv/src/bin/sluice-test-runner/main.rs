//! `sluice-test-runner`: builds the workspace's tests and runs their binaries several at a time
//! (`make test`'s last step), where `cargo test` runs them one after another.
//!
//! Most of the suite's time is end-to-end tests waiting on the local control plane, which two
//! cores can overlap; the few binaries that must not share it are named, with the reason, in
//! `schedule.rs`. Each binary's output goes to a log file of its own, shown on the terminal
//! when it fails; a line per finished binary, and every minute what is still running, say
//! where the run is.

mod cargo;
mod report;
mod schedule;
mod suites;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;

use cargo::TestBinary;
use report::{Counts, duration};
use schedule::Rule;

/// Builds the workspace's tests (`cargo test --no-run`) and runs the test binaries several at
/// a time (each module of a suite, `suites.rs`, as a binary of its own), those that must not
/// share the control plane alone or in turns (see `--rules`).
/// Each binary's output is written to `<target>/test-logs/<name>.log` and shown when it fails.
/// The exit status is non-zero if any binary failed.
#[derive(Parser)]
#[command(name = "sluice-test-runner")]
struct Args {
    /// Test binaries run at once [default: twice the machine's cores plus one: most of a
    /// binary's time is spent waiting on the control plane]
    #[arg(long, short = 'j', env = "TEST_JOBS")]
    jobs: Option<usize>,
    /// Run only the test binaries whose name contains one of these (`canary`, `sluice_engine`)
    filters: Vec<String>,
    /// An argument for `cargo test --no-run` (repeatable: `--cargo-arg=-p --cargo-arg=sluice-e2e`)
    #[arg(long = "cargo-arg", allow_hyphen_values = true)]
    cargo_args: Vec<String>,
    /// Print the binaries in the order they would start, with their rules, and run nothing
    #[arg(long)]
    list: bool,
    /// Print the binaries that do not simply share the machine, the modules run in parts, and why
    #[arg(long)]
    rules: bool,
    /// Arguments for every test binary (after `--`: `-- --nocapture`)
    #[arg(last = true)]
    test_args: Vec<String>,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sluice-test-runner: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// A binary running, with where its output goes.
struct Running {
    binary: TestBinary,
    rule: Rule,
    child: Child,
    log: PathBuf,
    started: Instant,
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.rules {
        for (name, rule, why) in schedule::exceptions() {
            let group = rule
                .group
                .map(|g| format!(", in turns with {g}"))
                .unwrap_or_default();
            println!("{name}: {:?}{group}: {why}", rule.sharing);
        }
        for (module, count, why) in suites::PARTS {
            println!("{module}: in {count} parts: {why}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let jobs = args.jobs.unwrap_or_else(|| 2 * cores() + 1).max(1);
    let cargo::Built { tests, programs } = cargo::build(&args.cargo_args)?;
    let compiled_in = Path::new(env!("CARGO_MANIFEST_DIR"));
    if let Some(why) = cargo::built_for_another_checkout(compiled_in, &tests) {
        bail!("{why}");
    }
    let mut binaries = Vec::new();
    for binary in tests {
        binaries.extend(suites::split(binary)?);
    }
    let programs = program_env(&programs);
    if !args.filters.is_empty() {
        binaries.retain(|b| args.filters.iter().any(|f| b.name.contains(f.as_str())));
    }
    let Some(first) = binaries.first() else {
        bail!("no test binary matches {:?}", args.filters);
    };
    // `<target>/debug/deps/<binary>`: the logs go beside the build.
    let logs = first
        .executable
        .ancestors()
        .nth(3)
        .context("the test binaries' target directory")?
        .join("test-logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let durations_file = logs.join("durations.tsv");
    let mut took = read_durations(&durations_file);
    let names: Vec<String> = binaries.iter().map(|b| b.name.clone()).collect();
    let mut pending: Vec<TestBinary> = schedule::order(&names, &took)
        .into_iter()
        .map(|i| binaries[i].clone())
        .collect();
    if args.list {
        for b in &pending {
            let rule = schedule::rule(&b.target);
            let last = took.get(&b.name).map(|s| duration(*s)).unwrap_or_default();
            println!("{:<56} {:<6} {last}", b.name, format!("{:?}", rule.sharing));
        }
        return Ok(ExitCode::SUCCESS);
    }

    let total = pending.len();
    println!(
        "sluice-test-runner: {total} test binaries (the suites' modules counted one by one), {jobs} at a time; each one's output in {}",
        logs.display()
    );
    let start = Instant::now();
    let mut running: Vec<Running> = Vec::new();
    let (mut done, mut sum, mut failed) = (0usize, Counts::default(), Vec::<String>::new());
    let mut last_word = Instant::now();
    loop {
        loop {
            let rules: Vec<Rule> = pending.iter().map(|b| schedule::rule(&b.target)).collect();
            let busy: Vec<Rule> = running.iter().map(|r| r.rule).collect();
            let Some(i) = schedule::next(&rules, &busy, jobs) else {
                break;
            };
            let binary = pending.remove(i);
            running.push(start_binary(binary, &logs, &args.test_args, &programs)?);
        }
        if running.is_empty() {
            if !pending.is_empty() {
                bail!("{} test binaries could not be scheduled", pending.len());
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut i = 0;
        while i < running.len() {
            let Some(status) = running[i].child.try_wait()? else {
                i += 1;
                continue;
            };
            let r = running.remove(i);
            done += 1;
            last_word = Instant::now();
            let secs = r.started.elapsed().as_secs_f64();
            took.insert(r.binary.name.clone(), secs);
            let log = std::fs::read_to_string(&r.log).unwrap_or_default();
            let counts = report::counts(&log);
            sum += counts;
            let ok = status.success();
            println!(
                "[{done:>3}/{total}] {} {:<52} {:>8}  {} passed{}",
                if ok { "ok    " } else { "FAILED" },
                r.binary.name,
                duration(secs),
                counts.passed,
                if counts.failed > 0 {
                    format!(", {} failed", counts.failed)
                } else {
                    String::new()
                }
            );
            if !ok {
                println!("---- {} ({status}), {}:", r.binary.name, r.log.display());
                println!("{}", report::failure_excerpt(&log, 80, 400));
                println!("---- end of {}", r.binary.name);
                failed.push(r.binary.name);
            }
        }
        if last_word.elapsed() >= Duration::from_secs(60) {
            last_word = Instant::now();
            let now: Vec<String> = running
                .iter()
                .map(|r| {
                    format!(
                        "{} ({})",
                        r.binary.name,
                        duration(r.started.elapsed().as_secs_f64().round())
                    )
                })
                .collect();
            println!(
                "          {done}/{total} done after {}; running: {}",
                duration(start.elapsed().as_secs_f64().round()),
                now.join(", ")
            );
        }
    }
    write_durations(&durations_file, &took);

    let wall = duration(start.elapsed().as_secs_f64().round());
    let tests = format!(
        "{} tests passed, {} failed, {} ignored",
        sum.passed, sum.failed, sum.ignored
    );
    if failed.is_empty() {
        println!("sluice-test-runner: all {total} test binaries passed in {wall}: {tests}");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "sluice-test-runner: {} of {total} test binaries failed in {wall} ({tests}): {}",
            failed.len(),
            failed.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}

/// The variables naming the programs that end-to-end tests would otherwise build themselves
/// (`sluice_e2e::process`) with `cargo build -p <package>`: a build of one package resolves its
/// dependencies' features apart from the workspace's, and recompiled a good part of them
/// (two and a half minutes on two cores, in the phase where a test runs alone).
const PROGRAM_VARS: &[(&str, &str)] = &[
    ("sluice-controller", "SLUICE_CONTROLLER_BIN"),
    ("kubectl-sluice", "SLUICE_CLI_BIN"),
];

fn program_env(programs: &[(String, PathBuf)]) -> Vec<(&'static str, PathBuf)> {
    PROGRAM_VARS
        .iter()
        .filter_map(|(name, var)| {
            let (_, path) = programs.iter().find(|(n, _)| n == name)?;
            Some((*var, path.clone()))
        })
        .collect()
}

/// Starts one test binary as cargo would: in its package's directory, with
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` set, its output into its log file.
/// `programs` are the variables naming the programs the build made.
fn start_binary(
    binary: TestBinary,
    logs: &Path,
    test_args: &[String],
    programs: &[(&str, PathBuf)],
) -> anyhow::Result<Running> {
    let file_name: String = binary
        .name
        .chars()
        .filter(|c| *c != ')')
        .map(|c| if c == ' ' || c == '(' { '.' } else { c })
        .collect::<String>()
        .replace("..", ".");
    let log = logs.join(format!("{file_name}.log"));
    let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone()?;
    let exact: &[&str] = if binary.tests.is_empty() {
        &[]
    } else {
        &["--exact"]
    };
    let child = Command::new(&binary.executable)
        .args(exact)
        .args(&binary.tests)
        .args(test_args)
        .current_dir(&binary.dir)
        .env("CARGO_MANIFEST_DIR", &binary.dir)
        .env("CARGO_PKG_NAME", &binary.package)
        .envs(allocator_conf(
            &binary.package,
            cores(),
            std::env::var_os(ALLOCATOR_CONF).is_some(),
        ))
        .envs(programs.iter().map(|(var, path)| (var, path)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .with_context(|| format!("starting {}", binary.executable.display()))?;
    Ok(Running {
        rule: schedule::rule(&binary.target),
        binary,
        child,
        log,
        started: Instant::now(),
    })
}

/// The machine's cores (2 when it cannot be told): the default number of binaries at a time
/// is set from them, and so are the simulator's arenas.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// jemalloc's run-time options, read from the environment before `main`.
const ALLOCATOR_CONF: &str = "_RJEM_MALLOC_CONF";

/// jemalloc's options for a test binary, unless the caller set their own. The workspace
/// compiles one arena into jemalloc (`.cargo/config.toml`: the controller's memory), but the
/// simulator's tests run their seeds on every core and allocate at every step, and their
/// threads queue on that one arena's lock. Two arenas per core: the `ci::` module took 121
/// and 134 CPU-seconds with one arena, 104 with four, in runs one after the other on 2 cores
/// (glibc's allocator: 130).
fn allocator_conf(
    package: &str,
    cores: usize,
    set_by_caller: bool,
) -> Option<(&'static str, String)> {
    (package == "sluice-sim" && !set_by_caller)
        .then(|| (ALLOCATOR_CONF, format!("narenas:{}", 2 * cores.max(1))))
}

/// Durations of a full run five at a time on 2 cores (2026-12-02), for a machine that has not run the
/// tests yet: without them a fresh machine would start the binaries in name order, and a
/// long one could start last.
const KNOWN_DURATIONS: &str = include_str!("durations.tsv");

/// The last run's duration of each binary, in seconds (`name<TAB>seconds` lines), over the
/// known ones; only the order depends on them.
fn read_durations(path: &Path) -> BTreeMap<String, f64> {
    let mut durations = parse_durations(KNOWN_DURATIONS);
    durations.extend(parse_durations(
        &std::fs::read_to_string(path).unwrap_or_default(),
    ));
    durations
}

fn parse_durations(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|l| {
            let (name, secs) = l.split_once('\t')?;
            Some((name.to_string(), secs.parse().ok()?))
        })
        .collect()
}

fn write_durations(path: &Path, took: &BTreeMap<String, f64>) {
    let text: String = took
        .iter()
        .map(|(name, secs)| format!("{name}\t{secs:.1}\n"))
        .collect();
    if let Err(e) = std::fs::write(path, text) {
        eprintln!("sluice-test-runner: writing {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulators_tests_get_an_arena_per_thread_unless_the_caller_chose() {
        assert_eq!(
            allocator_conf("sluice-sim", 2, false),
            Some((ALLOCATOR_CONF, "narenas:4".to_string()))
        );
        assert_eq!(allocator_conf("sluice-sim", 2, true), None);
        assert_eq!(allocator_conf("sluice-e2e", 2, false), None);
    }
}
