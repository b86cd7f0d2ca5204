//! Plays generated live scenarios (`sluice_e2e::live`) side by side under Argo Rollouts 1.9.1's
//! own controller and under Sluice on the local control plane, and reports how many agree,
//! differ as documented (docs/differences-from-argo.md) or differ. `make conformance` runs 200.
//!
//!     sluice-live-conformance --start 100 --scenarios 200 --jobs 4
//!     sluice-live-conformance --start 137 --scenarios 1        # replay one seed
//!     sluice-live-conformance --seeds 103,137,162               # replay several
//!     RUST_LOG=sluice_controller=debug sluice-live-conformance --start 137 --scenarios 1

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use sluice_e2e::harness::{ArgoController, TestEnv, TestNamespace};
use sluice_e2e::live::{Outcome, Scenario, play};
use tokio::sync::Semaphore;

/// Live differential scenarios: Sluice against Argo Rollouts' own controller.
#[derive(Parser)]
struct Args {
    /// The first seed.
    #[arg(long, default_value_t = 100)]
    start: u64,
    /// How many scenarios (seeds start, start+1, ...).
    #[arg(long, default_value_t = 200)]
    scenarios: u64,
    /// Play these seeds instead of a range (comma-separated), e.g. the ones a run reported.
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Scenarios played at once (each runs one Argo controller and one Sluice controller).
    #[arg(long, default_value_t = 4)]
    jobs: usize,
    /// Print the scenarios (the Rollout's manifest and the actions) and play nothing.
    #[arg(long)]
    print: bool,
}

async fn one(env: Arc<TestEnv>, seed: u64) -> anyhow::Result<Outcome> {
    let scenario = Scenario::generate(seed);
    let sluice = TestNamespace::create(&env, &format!("live-{seed}-sluice")).await?;
    let argo = TestNamespace::create(&env, &format!("live-{seed}-argo")).await?;
    let controller = sluice_e2e::start_controller(&env, &sluice);
    let argo_controller = ArgoController::start(&env, argo.name(), &[]).await?;
    let outcome = play(&scenario, &sluice, &argo).await;
    drop(controller);
    argo_controller.stop().await?;
    Ok(outcome)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // RUST_LOG=sluice_controller=debug shows what Sluice did in a scenario that differs.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let seeds: Vec<u64> = if args.seeds.is_empty() {
        (args.start..args.start + args.scenarios).collect()
    } else {
        args.seeds.clone()
    };
    if args.print {
        for &seed in &seeds {
            let scenario = Scenario::generate(seed);
            println!(
                "# seed {seed}\n{}\n# actions: {:?}",
                scenario.manifests(),
                scenario.actions
            );
        }
        return Ok(());
    }
    let env = Arc::new(TestEnv::with_crds().await?);
    let page = std::fs::read_to_string(env.repo_root().join("docs/differences-from-argo.md"))?;
    let gate = Arc::new(Semaphore::new(args.jobs.max(1)));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for &seed in &seeds {
        let (env, gate) = (env.clone(), gate.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            (seed, one(env, seed).await)
        });
    }
    let (mut same, mut documented, mut points) = (0, BTreeMap::<&str, u64>::new(), 0);
    let mut differing = 0;
    let mut failed = Vec::new();
    // Reported as each scenario ends, whichever seed it is.
    let mut ended = 0;
    while let Some(task) = tasks.join_next().await {
        let (seed, outcome) = task?;
        ended += 1;
        match outcome {
            Err(e) => {
                differing += 1;
                failed.push(format!("seed {seed}: could not run: {e:#}"));
            }
            Ok(outcome) => {
                points += outcome.settle_points;
                for key in &outcome.documented {
                    if !page.contains(&format!("`{key}`")) {
                        failed.push(format!(
                            "seed {seed}: {key:?} is not on the differences page"
                        ));
                    }
                    *documented.entry(key).or_default() += 1;
                }
                if !outcome.differences.is_empty() {
                    differing += 1;
                    failed.extend(outcome.differences);
                } else if outcome.documented.is_empty() {
                    same += 1;
                }
            }
        }
        eprintln!(
            "[live] {ended}/{} scenarios played (seed {seed} ended), {} s",
            seeds.len(),
            started.elapsed().as_secs()
        );
    }
    let first = seeds.iter().min().copied().unwrap_or_default();
    let last = seeds.iter().max().copied().unwrap_or_default();
    println!(
        "live scenarios {first}..={last}: {} played, {points} settle points; {same} the same \
         throughout, documented differences {documented:?}, {differing} scenarios with {} \
         differences",
        seeds.len(),
        failed.len()
    );
    for f in &failed {
        println!("{f}");
    }
    anyhow::ensure!(failed.is_empty(), "{} differences", failed.len());
    Ok(())
}
