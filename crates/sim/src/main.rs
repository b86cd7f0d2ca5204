//! `sluice-sim`: runs many seeds of the simulation, for long soak runs outside CI.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use sluice_sim::{Stats, real_apply, run, scenarios};

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
    /// Print the trace of every seed, not only of failures.
    #[arg(long)]
    verbose: bool,
    /// Stop at the first failing seed.
    #[arg(long)]
    fail_fast: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let chosen: Vec<_> = match &cli.scenario {
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
    let started = Instant::now();
    let (mut runs, mut failed) = (0u64, 0u64);
    let mut total = Stats::default();
    for scenario in &chosen {
        for seed in cli.start..cli.start.saturating_add(cli.seeds) {
            let outcome = run(scenario, seed, real_apply);
            runs += 1;
            total.add(&outcome.stats);
            if cli.verbose {
                for (t, line) in &outcome.trace {
                    println!("{t:>8} {line}");
                }
            }
            if !outcome.passed() {
                failed += 1;
                print!("{}", outcome.report());
                if cli.fail_fast {
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{runs} schedules, {failed} failed, {:.1} s, {:.1} seeds/s",
        secs,
        runs as f64 / secs.max(1e-9)
    );
    println!(
        "{} events, {} reconciles, {} controller writes, {} conflicts, {} crashes, {} partitions, \
         {} leader changes, {} watch breaks, {:.1} simulated hours",
        total.events,
        total.reconciles,
        total.controller_writes,
        total.conflicts,
        total.crashes,
        total.partitions,
        total.leader_changes,
        total.watch_breaks,
        total.sim_ms as f64 / 3_600_000.0
    );
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
