//! The controller process: clients, leader election, the reconciler, health and metrics
//! endpoints, and an orderly shutdown (stop writing, let in-flight writes land, release the
//! lease, stop serving).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::args::Args;
use crate::leader::election::{Election, KubeLeases, LeaseClient};
use crate::leader::fence::{InFlight, Leadership, WriteGate};
use crate::leader::lease::{ElectionConfig, LeaseRole};
use crate::loops::Hooks;
use crate::serve::health::{BoundPorts, Health, Listeners, write_ports_file};
use crate::serve::metrics::Metrics;
use crate::{client, served};

/// The controller's version, as reported by `--version` and `argo_rollouts_controller_info`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Ways to embed the controller beyond its flags.
#[derive(Clone, Default)]
pub struct Options {
    /// Reach the Lease through this instead of the API server (to inject lease faults).
    pub lease_client: Option<Arc<dyn LeaseClient>>,
    /// Reach the guard Lease (`Args::guard_lease_name`) through this.
    pub guard_lease_client: Option<Arc<dyn LeaseClient>>,
    /// Read `argo-rollouts-config` from this namespace instead of the controller's own.
    pub config_namespace: Option<String>,
}

/// A running controller. Dropping the handle starts the orderly shutdown without waiting for
/// it; [`ControllerHandle::shutdown`] waits.
pub struct ControllerHandle {
    identity: String,
    gate: WriteGate,
    ports: BoundPorts,
    metrics: Arc<Metrics>,
    config: Arc<std::sync::OnceLock<crate::config::RolloutsConfig>>,
    stop: CancellationToken,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Drop for ControllerHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl ControllerHandle {
    /// The identity this instance campaigns with.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Leadership as the write fence sees it.
    pub fn gate(&self) -> WriteGate {
        self.gate.clone()
    }

    pub fn is_leader(&self) -> bool {
        self.gate.is_open()
    }

    /// The ports the health and metrics endpoints are bound to.
    pub fn ports(&self) -> BoundPorts {
        self.ports
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// What was read from `argo-rollouts-config` at start (`None` until then).
    pub fn config(&self) -> Option<crate::config::RolloutsConfig> {
        self.config.get().cloned()
    }

    /// Whether the controller is still running (it does not stop on losing the lease).
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Cancelling it starts the orderly shutdown.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops writing, releases the lease and waits for the controller to end.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.stop.cancel();
        self.join().await
    }

    /// Waits for the controller to end.
    pub async fn join(mut self) -> anyhow::Result<()> {
        match self.task.take() {
            Some(task) => task.await.context("controller task")?,
            None => Ok(()),
        }
    }
}

/// Starts the controller: binds the endpoints (failing at once if a port is taken), starts
/// campaigning for the lease (or leads at once with `--leader-elect=false`) and starts the
/// reconciler.
pub async fn start(
    config: kube::Config,
    args: &Args,
    options: Options,
) -> anyhow::Result<ControllerHandle> {
    let identity = args.lease_identity();
    let election = args
        .leader_elect
        .then(|| {
            let c = ElectionConfig {
                role: LeaseRole::Leader,
                identity: identity.clone(),
                lease_name: args.lease_name(),
                lease_namespace: args.lease_namespace(),
                lease_duration: args.leader_election_lease_duration,
                renew_deadline: args.leader_election_renew_deadline,
                retry_period: args.leader_election_retry_period,
            };
            c.validate().map(|()| c).map_err(anyhow::Error::msg)
        })
        .transpose()?;

    let metrics = Metrics::new(VERSION);
    let health = Arc::new(Health::default());
    let stop = CancellationToken::new();
    let in_flight = InFlight::default();
    let (leadership, gate) = if election.is_some() {
        Leadership::new()
    } else {
        Leadership::always()
    };
    metrics.set_leader(gate.is_open());
    let client = client::controller_client(
        config.clone(),
        metrics.clone(),
        args.qps,
        args.burst,
        gate.clone(),
        in_flight.clone(),
    )?;

    let listeners = Listeners::bind(args.healthz_port, args.metrics_port).await?;
    let ports = listeners.ports;
    info!(
        healthz_port = ports.healthz,
        metrics_port = ports.metrics,
        "serving /healthz and /readyz, and /metrics"
    );
    if let Some(path) = &args.ports_file {
        write_ports_file(path, ports)?;
    }
    if args.aws_verify_target_group {
        info!("--aws-verify-target-group: ALB canary weights are verified with AWS");
    }
    for warning in args.argo.warnings() {
        warn!("{warning}");
    }
    if args.argo.analysis_only() {
        info!("--controllers=analysis: only AnalysisRuns are reconciled");
    }
    let servers_stop = CancellationToken::new();
    let servers = listeners.serve(health.clone(), metrics.clone(), servers_stop.clone());

    let stepping_down: JoinHandle<()> = match election {
        Some(config_) => {
            let leases: Arc<dyn LeaseClient> = match options.lease_client {
                Some(leases) => leases,
                None => Arc::new(KubeLeases::new(
                    client::lease_client(config.clone(), metrics.clone())?,
                    &config_.lease_namespace,
                    &config_.lease_name,
                )),
            };
            let guard = args.guard_lease_name().map(|name| ElectionConfig {
                role: LeaseRole::Guard,
                lease_name: name,
                ..config_.clone()
            });
            let mut election =
                Election::new(config_, leases, leadership, in_flight, metrics.clone());
            if let Some(guard) = guard {
                let leases: Arc<dyn LeaseClient> = match options.guard_lease_client {
                    Some(leases) => leases,
                    None => Arc::new(KubeLeases::new(
                        client::lease_client(config.clone(), metrics.clone())?,
                        &guard.lease_namespace,
                        &guard.lease_name,
                    )),
                };
                election = election.with_guard(guard, leases);
            }
            tokio::spawn(election.run(stop.clone()))
        }
        None => {
            info!("leader election disabled: this instance always writes");
            let stop = stop.clone();
            tokio::spawn(async move {
                stop.cancelled().await;
                leadership.set(None);
                in_flight.drained(Duration::from_secs(1)).await;
            })
        }
    };
    {
        let (stop, health) = (stop.clone(), health.clone());
        tokio::spawn(async move {
            stop.cancelled().await;
            health.set_stopping();
        });
    }

    let hooks = Hooks {
        gate: gate.clone(),
        metrics: Some(metrics.clone()),
        health: Some(health),
        stop: Some(stop.clone()),
        analysis_only: args.argo.analysis_only(),
        plugins: None,
        disabled_step_plugins: Arc::default(),
    };
    let config = Arc::new(std::sync::OnceLock::new());
    let config_namespace = options
        .config_namespace
        .clone()
        .unwrap_or_else(crate::config::controller_namespace);
    let task = {
        let args = args.clone();
        let stop = stop.clone();
        let config = config.clone();
        tokio::spawn(async move {
            let result = if served::wait_until_served(&client, &stop).await {
                // As Argo: read once, before the controllers start; what Argo refuses stops it.
                let loaded = tokio::select! {
                    loaded = crate::config::load(&client, &config_namespace) => Some(loaded),
                    () = stop.cancelled() => None,
                };
                match loaded {
                    Some(Ok(loaded)) => {
                        let mut hooks = hooks;
                        let host = crate::plugins::host(&client, &loaded, &args, &config_namespace);
                        hooks.plugins = Some(std::sync::Arc::new(host.await));
                        hooks.disabled_step_plugins =
                            std::sync::Arc::new(loaded.disabled_step_plugins());
                        let _ = config.set(loaded);
                        run_until_stopped(client, &args, hooks, &stop).await
                    }
                    Some(Err(e)) => Err(e),
                    None => Ok(()),
                }
            } else {
                Ok(())
            };
            // However the reconciler ended, step down before the process goes.
            stop.cancel();
            let _ = stepping_down.await;
            servers_stop.cancel();
            let _ = servers.await;
            result
        })
    };
    Ok(ControllerHandle {
        identity,
        gate,
        ports,
        metrics,
        config,
        stop,
        task: Some(task),
    })
}

/// Runs the loops until they end or the stop's grace runs out.
async fn run_until_stopped(
    client: kube::Client,
    args: &Args,
    hooks: Hooks,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    // Rollouts, AnalysisRuns and Experiments are reconciled side by side, behind the same gate.
    let reconcilers = crate::loops::run_all(client, args, hooks);
    tokio::select! {
        result = reconcilers => result,
        () = stop_grace(stop) => {
            warn!(grace = ?SHUTDOWN_GRACE, "reconciles still running after the stop; \
                abandoning them (every write carries its precondition)");
            Ok(())
        }
    }
}

/// How long in-flight reconciles may go on after a stop before they are abandoned. A write cut
/// short is no harm (each carries the resourceVersion it was decided on); a controller that does
/// not stop is: the whole shutdown, lease release included, stays within 5 s.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

async fn stop_grace(stop: &CancellationToken) {
    stop.cancelled().await;
    tokio::time::sleep(SHUTDOWN_GRACE).await;
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
