//! The `sluice-controller` runtime: flags, clients, leader election and write fencing, watches
//! and caches, the apply layer that executes the engine's plans, events, health and metrics.
//!
//! The modules, each using only those listed after it (no module reaches back up):
//!
//! - `runtime`: the process that ties them together; `served`: waiting for the CRDs at start;
//! - `loops`: the Rollout, AnalysisRun and Experiment loops (and notifications beside the
//!   Rollout loop), with the observe and apply steps and the drivers the simulator runs too;
//! - `cluster`: the cluster access the loops read and write through, and when a failed write
//!   is looked at again;
//! - `cache`: watch caches with indexes (a Rollout's own objects without a scan);
//! - `client`, `ratelimit`: the HTTP client stacks;
//! - `leader`: the client-go compatible Lease election and the write fence;
//! - `serve`: the health and metrics endpoints;
//! - `args`, `duration`: flags; `config`: the `argo-rollouts-config` ConfigMap.

pub mod args;
pub mod cache;
pub mod client;
pub mod cluster;
pub mod config;
pub mod duration;
pub mod leader;
pub mod loops;
pub mod plugins;
pub mod ratelimit;
pub mod runtime;
pub mod serve;
pub mod served;

use kube::Client;
use tracing::{info, warn};
use tracing_subscriber::EnvFilter;

pub use args::Args;
pub use runtime::{ControllerHandle, Options, start};

/// Installs the TLS crypto provider once. Both `ring` and `aws-lc-rs` can end up linked in
/// through dependencies; rustls refuses to guess, so the choice is made explicitly.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub fn init_logging(args: &Args) {
    let filter = EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{lvl},kube={client},hyper={client},tower={client}",
            lvl = args.loglevel,
            client = args.argo.client_log_level()
        ))
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match args.logformat {
        args::LogFormat::Json => builder.json().try_init(),
        args::LogFormat::Text => builder.try_init(),
    };
}

/// A plain client as the flags configure it (see [`client::config`]).
pub async fn client(args: &Args) -> anyhow::Result<Client> {
    Ok(Client::try_from(client::config(args).await?)?)
}

/// The longest the process lives after SIGINT/SIGTERM, whatever it is waiting for.
pub const STOP_BACKSTOP: std::time::Duration = std::time::Duration::from_millis(4500);

/// Runs the controller until SIGINT/SIGTERM, then steps down: writes stop, the lease is
/// released for a standby, and the process ends. A second signal exits at once.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let config = client::config(&args).await?;
    let handle = start(config, &args, Options::default()).await?;
    let stop = handle.stop_token();
    tokio::spawn(async move {
        runtime::shutdown_signal().await;
        info!("shutting down: stopping writes and releasing the leader lease");
        stop.cancel();
        runtime::shutdown_signal().await;
        warn!("second signal: exiting without waiting");
        std::process::exit(130);
    });
    let stopped = handle.stop_token();
    let join = handle.join();
    tokio::pin!(join);
    let result = tokio::select! {
        result = &mut join => result,
        // A backstop: the orderly shutdown is bounded piece by piece well inside this.
        () = async {
            stopped.cancelled().await;
            tokio::time::sleep(STOP_BACKSTOP).await;
        } => {
            warn!(after = ?STOP_BACKSTOP, "the orderly shutdown did not finish; exiting");
            std::process::exit(1);
        }
    };
    info!("controller stopped");
    result
}
