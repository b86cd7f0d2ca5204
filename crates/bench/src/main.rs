//! `sluice-bench`: N Rollouts against N Deployments on the local control plane, measured from
//! the outside (CPU and memory from /proc, requests from the API server's and the
//! controller's /metrics, latencies from watches). `make bench-cluster` builds and runs it;
//! docs/benchmarks.md explains the figures.

mod cli;
mod controller;
mod dashboard;
mod measure;
mod pods;
mod procs;
mod progress;
mod prom;
mod report;
mod run;
mod soak;
mod soak_faults;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use sluice_testenv::harness::{TestEnv, repo_root};

use crate::controller::Kind;
use crate::procs::Processes;
use crate::report::{Machine, Report};
use crate::run::Setup;
use crate::workload::Scenario;

/// Measures Sluice at scale on the local control plane (started if it is not running):
/// N Rollouts created until all are Healthy, then every image changed until all are Healthy
/// again, per scenario; then N Deployments the same way with only kube-controller-manager,
/// for comparison. After each Rollout scenario, times the CLI's read commands against its
/// Rollouts. Writes DIR/cluster-N.json and DIR/cluster-N.md.
#[derive(Parser, Debug)]
#[command(name = "sluice-bench", version)]
struct Args {
    /// Rollouts (and Deployments) per run.
    #[arg(short = 'n', long, default_value_t = 1000)]
    objects: usize,
    /// Rollout scenarios to run, in order (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Scenario::Plain, Scenario::Steps, Scenario::BlueGreen])]
    scenarios: Vec<Scenario>,
    /// Controllers to run each Rollout scenario under, in order: `argo` is Argo Rollouts
    /// 1.9.1's own controller (built from its Go module, cached; watching its own namespace),
    /// at the same --qps and --burst.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Kind::Sluice])]
    controllers: Vec<Kind>,
    /// Skip the Deployment comparison.
    #[arg(long)]
    no_deployments: bool,
    /// Skip timing `kubectl sluice get rollout`, `status`, `explain` and `list rollouts`
    /// after each Rollout scenario.
    #[arg(long)]
    no_cli: bool,
    /// The kubectl-sluice binary to time (default: kubectl-sluice beside this binary).
    #[arg(long, value_name = "PATH")]
    kubectl_sluice: Option<PathBuf>,
    /// Instead of the runs: N Rollouts changing images again and again for this long
    /// (e.g. 60m), the controller's RSS sampled every minute, and its slope.
    #[arg(long, value_parser = sluice_api::parse_go_duration, value_name = "DURATION")]
    soak: Option<Duration>,
    /// With --soak: a rest after each round of image changes (e.g. 60s).
    #[arg(long, value_parser = sluice_api::parse_go_duration, value_name = "DURATION", default_value = "0s")]
    soak_rest: Duration,
    /// With --soak: rounds of image changes before the measured time starts (and before the
    /// dashboard opens), so that the namespace already holds its ReplicaSet history: the
    /// default revision history limit of 10 is reached after 10 rounds.
    #[arg(long, value_name = "ROUNDS", default_value_t = 0)]
    soak_warm_up: u32,
    /// With --soak: `kubectl sluice dashboard` serves the soak's namespace to three tabs of
    /// headless Chromium the whole time (node and chromium needed), and its RSS is sampled
    /// every minute too.
    #[arg(long)]
    dashboard: bool,
    /// With --soak: on a control plane of the soak's own, each measured round meets the next
    /// of these faults once its image changes are sent: kube-apiserver killed and restarted,
    /// etcd stopped for 20 s, every watch of the controller cut, 429 on every request for
    /// 30 s, none. The controller talks to the API server through a fault proxy.
    #[arg(long)]
    soak_faults: bool,
    /// The controller binary (default: sluice-controller beside this binary).
    #[arg(long, value_name = "PATH")]
    controller: Option<PathBuf>,
    /// A further argument for Sluice's controller, e.g. `--controller-arg=--rollout-threads=20`
    /// (repeat for more); the report records them.
    #[arg(
        long = "controller-arg",
        value_name = "ARG",
        allow_hyphen_values = true
    )]
    controller_args: Vec<String>,
    /// Client rate limit of the controller (kube-controller-manager runs at 200/400 too).
    #[arg(long, default_value_t = 200)]
    qps: u32,
    #[arg(long, default_value_t = 400)]
    burst: u32,
    /// How long a phase may take before the run fails (default: 10 minutes plus 0.25 s
    /// per object).
    #[arg(long, value_parser = sluice_api::parse_go_duration, value_name = "DURATION")]
    phase_timeout: Option<Duration>,
    /// Make each phase's changes as a user does, with one `kubectl apply -f` of all N objects
    /// (a List), instead of N requests 32 at a time: each object is then timed from the
    /// apply's start, and the report adds how long the apply took and how long after its end
    /// every object had settled.
    #[arg(long)]
    kubectl_apply: bool,
    /// The kubectl binary for --kubectl-apply.
    #[arg(long, value_name = "PATH", default_value = "kubectl")]
    kubectl: PathBuf,
    /// Where results and the controller's log go.
    #[arg(long, value_name = "DIR", default_value = "target/bench")]
    out: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let root = repo_root();
    let out = if args.out.is_absolute() {
        args.out.clone()
    } else {
        root.join(&args.out)
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    // The faults act on a control plane of their own; the shared one serves other work.
    let (faults, env, proxied) = if args.soak.is_some() && args.soak_faults {
        println!("starting a control plane of the soak's own");
        let (kit, env, proxied) = soak_faults::FaultKit::start(&out).await?;
        (Some(kit), env, Some(proxied))
    } else {
        println!("connecting to the local control plane (started if needed)");
        (None, TestEnv::with_crds().await?, None)
    };
    let client = env.client();
    let kubernetes = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .unwrap_or_else(|_| "unknown".into());
    let setup = Setup {
        env: env.clone(),
        client,
        processes: Processes::control_plane(
            &faults
                .as_ref()
                .map_or_else(|| root.join(".dev/pids"), |kit| kit.pid_dir()),
        ),
        kubeconfig: proxied.unwrap_or_else(|| env.kubeconfig_path().to_path_buf()),
        controller_binary: args
            .controller
            .clone()
            .unwrap_or_else(controller::default_binary),
        controller_args: args.controller_args.clone(),
        work_dir: out.clone(),
        objects: args.objects,
        qps: args.qps,
        burst: args.burst,
        phase_timeout: args
            .phase_timeout
            .unwrap_or(Duration::from_secs(600 + (args.objects as u64) / 4)),
        cli: (!args.no_cli).then(|| {
            args.kubectl_sluice
                .clone()
                .unwrap_or_else(cli::default_binary)
        }),
        kubectl_apply: args.kubectl_apply.then(|| args.kubectl.clone()),
    };
    let n = args.objects;

    if let Some(length) = args.soak {
        let options = soak::SoakOptions {
            length,
            rest: args.soak_rest,
            warm_up_rounds: args.soak_warm_up,
            dashboard: args.dashboard.then(|| {
                args.kubectl_sluice
                    .clone()
                    .unwrap_or_else(cli::default_binary)
            }),
            faults,
        };
        // On Ctrl-C the soak is dropped, and with it its controller and, under --soak-faults,
        // the control plane of its own (stopped and removed), before the process ends.
        let soak = tokio::select! {
            soak = soak::soak(&setup, options) => soak?,
            _ = tokio::signal::ctrl_c() => {
                anyhow::bail!("interrupted: the soak is stopped, its control plane too")
            }
        };
        let json = out.join(format!("soak-{n}.json"));
        std::fs::write(&json, serde_json::to_vec_pretty(&soak)?)?;
        let md = out.join(format!("soak-{n}.md"));
        std::fs::write(&md, soak.markdown())?;
        print!("\n{}", soak.markdown());
        println!("written: {} and {}", json.display(), md.display());
        return Ok(());
    }

    // The controller's memory with its caches synced and nothing to manage.
    let (idle, _) = setup.start_controller().await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss = idle.pid().and_then(procs::rss_mib);
    idle.stop().await?;

    let started = jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M UTC")
        .to_string();
    let mut report = Report {
        machine: Machine::describe(kubernetes),
        started,
        objects: n,
        qps: args.qps,
        burst: args.burst,
        controller_args: args.controller_args.clone(),
        controller_idle_rss_mib: idle_rss,
        phases: Vec::new(),
        cli: Vec::new(),
    };
    let json = out.join(format!("cluster-{n}.json"));
    let md = out.join(format!("cluster-{n}.md"));
    // Written after every run, so that a later failure keeps what was measured.
    let write = |report: &Report| -> anyhow::Result<()> {
        std::fs::write(&json, serde_json::to_vec_pretty(report)?)?;
        std::fs::write(&md, report.markdown())?;
        Ok(())
    };
    for scenario in &args.scenarios {
        for kind in &args.controllers {
            let (phases, cli) = setup.rollouts(*scenario, *kind).await?;
            report.phases.extend(phases);
            report.cli.extend(cli);
            write(&report)?;
        }
    }
    if !args.no_deployments {
        report.phases.extend(setup.deployments().await?);
        write(&report)?;
    }
    print!("\n{}", report.markdown());
    println!("\nwritten: {} and {}", json.display(), md.display());
    Ok(())
}
