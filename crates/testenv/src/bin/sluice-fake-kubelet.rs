//! Fake kubelet for the local test control plane: registers a node, binds pending pods to it and
//! reports their status according to `sluice_testenv::fake_kubelet::rules`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use sluice_testenv::fake_kubelet::rules::{Timings, parse_duration};
use sluice_testenv::fake_kubelet::{self, KubeletConfig};
use sluice_testenv::kubeconfig::client_from_file;

#[derive(Parser, Debug)]
#[command(about = "Fake kubelet: binds pods to a fake node and drives their status")]
struct Args {
    /// Kubeconfig of the cluster (its current context is used).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// Name of the node to register and bind pods to.
    #[arg(long, default_value = "fake-node-1")]
    node_name: String,
    /// A further node to register and serve (repeated for more): only the pods pinned to it,
    /// as the DaemonSet controller pins its pods, are bound there.
    #[arg(long)]
    extra_node: Vec<String>,
    /// Readiness delay of pods without the `sluice.dev/ready-delay` annotation.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    ready_delay: Duration,
    /// Run time of Job containers without a `sleep N` in their command.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    run_duration: Duration,
    /// Pods handled at once.
    #[arg(long, default_value_t = 32)]
    concurrency: u16,
    /// Serve the resource metrics API (metrics.k8s.io, for HorizontalPodAutoscalers) over TLS
    /// on this loopback port; pods use the CPU their namespace's `sluice-fake-load` ConfigMap
    /// declares.
    #[arg(long)]
    metrics_port: Option<u16>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The local API server's certificate is self-signed and accepted on purpose; kube warns
    // about that on every connection.
    let default_filter = "info,kube=warn,kube_client::client::tls=error";
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
    let args = Args::parse();
    let client = client_from_file(&args.kubeconfig).await?;
    let config = KubeletConfig {
        node_name: args.node_name,
        extra_nodes: args.extra_node,
        timings: Timings {
            ready_delay: args.ready_delay,
            run_duration: args.run_duration,
            ..Timings::default()
        },
        concurrency: args.concurrency.max(1),
        metrics_port: args.metrics_port,
        ..KubeletConfig::default()
    };
    fake_kubelet::run(client, config).await
}
