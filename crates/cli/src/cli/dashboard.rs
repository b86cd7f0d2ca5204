//! Flags of `dashboard`: where the web dashboard listens and whether it may write.

use std::net::IpAddr;

use clap::Args;

pub const DASHBOARD_LONG_ABOUT: &str = "\
Serve a web dashboard of the Rollouts, and Argo's dashboard API, on this machine.

The page lists the Rollouts of a namespace and shows one Rollout with its revisions,
ReplicaSets, pods, steps and AnalysisRuns, updated live. Its buttons promote, abort,
retry, restart, roll back and set images; every change is made with your own
kubeconfig identity, so the cluster's RBAC decides what you may do.

It listens on 127.0.0.1 only by default. Listening on any other address needs
--read-only (every change refused with 403) or --allow-writes (anyone who reaches
the port acts with your identity).";

pub const DASHBOARD_EXAMPLES: &str = "\
Examples:
  # The Rollouts of the current namespace, at http://127.0.0.1:3100/
  kubectl sluice dashboard

  # Every namespace, on another port
  kubectl sluice dashboard -A --port 8080

  # Shown to the team: reachable from other machines, but no buttons and no writes
  kubectl sluice dashboard --address 0.0.0.0 --read-only";

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Serve the Rollouts of every namespace instead of one
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Port to listen on (0 picks a free one; the address is printed)
    #[arg(short = 'p', long, default_value_t = 3100)]
    pub port: u16,
    /// Address to listen on; other than a loopback address it needs --read-only or
    /// --allow-writes
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub address: IpAddr,
    /// Refuse every change (PUT answers 403) and show no action buttons
    #[arg(long, conflicts_with = "allow_writes")]
    pub read_only: bool,
    /// Allow changes when listening on a non-loopback address: anyone who can reach the port
    /// then acts with your kubeconfig identity
    #[arg(long)]
    pub allow_writes: bool,
}
