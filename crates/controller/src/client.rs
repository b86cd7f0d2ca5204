//! Kubernetes clients with the controller's request middleware.
//!
//! The controller's client stacks, outermost first: the write fence, the `--qps`/`--burst` rate
//! limiter, request metrics. The lease client only counts requests: it must never wait behind
//! a burst of controller traffic (a late renewal costs the lease) nor be fenced (it is how
//! leadership is won).

use std::sync::Arc;

use kube::Client;
use kube::client::ClientBuilder;
use kube::config::Kubeconfig;

use crate::args::Args;
use crate::leader::fence::{FenceLayer, InFlight, WriteGate};
use crate::ratelimit::RateLimitLayer;
use crate::serve::metrics::{Metrics, RequestMetricsLayer};

/// Client configuration as Argo Rollouts makes it with client-go: `--kubeconfig` (or the usual
/// inference: $KUBECONFIG, ~/.kube/config, in-cluster), the entries `--context`, `--cluster` and
/// `--user` pick, then the overrides (`--server`, `--token`, `--namespace`, ...).
pub async fn config(args: &Args) -> anyhow::Result<kube::Config> {
    let flags = &args.client;
    let options = flags.kubeconfig_options();
    let mut config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("reading kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if flags.names_kubeconfig_entries() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    flags.apply(&mut config, args.namespace.as_deref())?;
    Ok(config)
}

/// The client the reconciler reads and writes with.
pub fn controller_client(
    config: kube::Config,
    metrics: Arc<Metrics>,
    qps: f32,
    burst: u32,
    gate: WriteGate,
    in_flight: InFlight,
) -> anyhow::Result<Client> {
    // Outermost last: the limiter's wait comes before the fence's check of the lease, and the
    // request metrics time the request itself, not its wait.
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&RequestMetricsLayer::new(metrics))
        .with_layer(&FenceLayer::new(gate, in_flight))
        .with_layer(&RateLimitLayer::new(qps, burst))
        .build())
}

/// The client the leader election uses.
pub fn lease_client(config: kube::Config, metrics: Arc<Metrics>) -> anyhow::Result<Client> {
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&RequestMetricsLayer::new(metrics))
        .build())
}
