//! `sluice-sim`: runs many seeds of the simulation, for long soak runs outside CI.
//!
//! The seeds of all scenarios are shared out among worker threads (one per core by default),
//! a few seeds at a time, so that a slow scenario does not hold up the end of the run. A
//! progress line every ten seconds says how far the run is and how long it will still take;
//! failures are printed as they are found, and listed again, in order, at the end.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;
use sluice_sim::scenarios::Scenario;
use sluice_sim::{Outcome, Stats, real_apply, run, scenarios};

/// jemalloc rather than the system allocator: a run is mostly copies of JSON objects, and
/// glibc's allocator spent half the time of one.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(about = "Deterministic simulation of the Sluice controller")]
struct Cli {
    /// How many seeds to run per scenario.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Only this scenario (default: all).
    #[arg(long)]
    scenario: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print the trace of every seed, not only of failures.
    #[arg(long)]
    verbose: bool,
    /// Stop at the first failing seed.
    #[arg(long)]
    fail_fast: bool,
}

/// Seeds handed to a worker at a time: small enough to share the tail of the run evenly.
const CHUNK: u64 = 8;
/// How often the progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// A run of one seed, as a worker reports it.
struct Done {
    scenario: usize,
    outcome: Outcome,
    took: Duration,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let chosen: Vec<Scenario> = match &cli.scenario {
        Some(name) => match scenarios::find(name) {
            Some(s) => vec![s],
            None => {
                let names: Vec<_> = scenarios::all().iter().map(|s| s.name).collect();
                eprintln!("unknown scenario {name}; known: {}", names.join(", "));
                return ExitCode::from(2);
            }
        },
        None => scenarios::all(),
    };
    let jobs = cli
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let end = cli.start.saturating_add(cli.seeds);
    // Work units, scenario after scenario within each band of seeds, so that every scenario
    // progresses from the start and a slow one is spread over the whole run.
    let mut units: Vec<(usize, u64, u64)> = Vec::new();
    let mut from = cli.start;
    while from < end {
        let to = from.saturating_add(CHUNK).min(end);
        units.extend((0..chosen.len()).map(|i| (i, from, to)));
        from = to;
    }
    let total = cli.seeds * chosen.len() as u64;
    println!(
        "{} scenario(s), seeds {}..{end} ({} schedules) on {jobs} thread(s)",
        chosen.len(),
        cli.start,
        total,
    );

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<Done>();
    let mut per_scenario = vec![(0u64, 0u64, Duration::ZERO); chosen.len()];
    let mut failures: Vec<(usize, Outcome)> = Vec::new();
    let (mut runs, mut total_stats) = (0u64, Stats::default());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let tx = tx.clone();
            let (units, chosen, next, stop) = (&units, &chosen, &next, &stop);
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Some(&(i, from, to)) = units.get(next.fetch_add(1, Ordering::Relaxed))
                    else {
                        return;
                    };
                    for seed in from..to {
                        let t = Instant::now();
                        let outcome = run(&chosen[i], seed, real_apply);
                        let done = Done {
                            scenario: i,
                            outcome,
                            took: t.elapsed(),
                        };
                        if tx.send(done).is_err() {
                            return;
                        }
                    }
                }
            });
        }
        drop(tx);
        let mut last_progress = Instant::now();
        loop {
            match rx.recv_timeout(PROGRESS_EVERY) {
                Ok(done) => {
                    runs += 1;
                    total_stats.add(&done.outcome.stats);
                    let entry = &mut per_scenario[done.scenario];
                    entry.0 += 1;
                    entry.2 += done.took;
                    if cli.verbose {
                        for (t, line) in &done.outcome.trace {
                            println!("{t:>8} {line}");
                        }
                    }
                    if !done.outcome.passed() {
                        entry.1 += 1;
                        print!("{}", done.outcome.report());
                        failures.push((done.scenario, done.outcome));
                        if cli.fail_fast {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if last_progress.elapsed() >= PROGRESS_EVERY {
                last_progress = Instant::now();
                println!(
                    "{}",
                    progress(runs, total, failures.len(), started.elapsed())
                );
            }
        }
    });

    let secs = started.elapsed().as_secs_f64();
    println!("per scenario (seeds, failed, time spent in it):");
    for (scenario, (n, failed, took)) in chosen.iter().zip(&per_scenario) {
        println!(
            "  {:<40} {n:>6} {failed:>4} {:>7.1} s",
            scenario.name,
            took.as_secs_f64()
        );
    }
    println!(
        "{runs} schedules (seeds {}..{end} of {} scenario(s)), {} failed, {} on {jobs} thread(s), {:.1} seeds/s",
        cli.start,
        chosen.len(),
        failures.len(),
        clock(started.elapsed()),
        runs as f64 / secs.max(1e-9)
    );
    println!(
        "{} events, {} reconciles, {} controller writes, {} conflicts, {} crashes, {} partitions, \
         {} leader changes, {} watch breaks, {:.1} simulated hours",
        total_stats.events,
        total_stats.reconciles,
        total_stats.controller_writes,
        total_stats.conflicts,
        total_stats.crashes,
        total_stats.partitions,
        total_stats.leader_changes,
        total_stats.watch_breaks,
        total_stats.sim_ms as f64 / 3_600_000.0
    );
    if total_stats.notifications_delivered > 0 {
        println!(
            "{} notifications delivered; {} repeated in the send-to-record window of a stopped \
             sender, {} lost with a publisher that stopped before recording them as pending \
             (both exempt, see docs/notifications.md)",
            total_stats.notifications_delivered,
            total_stats.notification_window_repeats,
            total_stats.notifications_lost_unwritten,
        );
    }
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    failures.sort_by_key(|(i, o)| (*i, o.seed));
    println!("failed:");
    for (_, outcome) in &failures {
        println!("  {}", outcome.replay_command());
    }
    ExitCode::FAILURE
}

/// `done/total schedules (p%), n failed, elapsed, about t to go`.
fn progress(done: u64, total: u64, failed: usize, elapsed: Duration) -> String {
    let left = if done == 0 {
        "estimating the time left".to_string()
    } else {
        let rest = elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64);
        format!(
            "about {} to go (whole run about {})",
            clock(rest),
            clock(elapsed + rest)
        )
    };
    format!(
        "progress: {done}/{total} schedules ({:.0}%), {failed} failed, {} elapsed, {left}",
        done as f64 * 100.0 / total.max(1) as f64,
        clock(elapsed)
    )
}

/// `1m05s`, or `42s` under a minute.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}
