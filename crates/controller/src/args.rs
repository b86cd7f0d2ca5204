//! Command-line flags. Names follow Argo Rollouts' controller where it has the same setting,
//! so existing Deployment manifests keep working.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

/// Sluice: progressive delivery for Kubernetes, compatible with Argo Rollouts.
///
/// Watches argoproj.io/v1alpha1 Rollouts and drives them through their canary steps by
/// creating and scaling ReplicaSets, exactly as Argo Rollouts would, so that either controller
/// can take over the other's Rollouts without restarting a pod.
#[derive(Debug, Clone, Parser)]
#[command(name = "sluice-controller", version, about, long_about = None)]
pub struct Args {
    /// Path to a kubeconfig. Default: in-cluster config, then $KUBECONFIG, then ~/.kube/config.
    #[arg(long, env = "KUBECONFIG_PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Namespace to watch when --namespaced is set (default: the kubeconfig's namespace).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,

    /// Watch only one namespace instead of the whole cluster.
    #[arg(long)]
    pub namespaced: bool,

    /// Only manage objects labelled argo-rollouts.argoproj.io/controller-instance-id=<id>.
    /// Without it, objects carrying that label are ignored.
    #[arg(long = "instance-id", default_value = "")]
    pub instance_id: String,

    /// Seconds between full re-syncs of every Rollout (also the longest a Rollout waits for a
    /// reconcile when nothing changes).
    #[arg(long = "rollout-resync", default_value_t = 900)]
    pub rollout_resync: u64,

    /// Rollouts reconciled concurrently.
    #[arg(long = "rollout-threads", default_value_t = 10)]
    pub rollout_threads: u16,

    /// Log level: debug, info, warn or error.
    #[arg(long, default_value = "info", value_parser = ["debug", "info", "warn", "error"])]
    pub loglevel: String,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub logformat: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Args {
    pub fn resync(&self) -> Duration {
        Duration::from_secs(self.rollout_resync.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn flags_parse_with_argo_names_and_defaults() {
        Args::command().debug_assert();
        let a = Args::parse_from(["sluice-controller"]);
        assert_eq!(a.rollout_resync, 900);
        assert_eq!(a.rollout_threads, 10);
        assert_eq!(a.instance_id, "");
        let a = Args::parse_from([
            "sluice-controller",
            "--namespaced",
            "--namespace",
            "team-a",
            "--instance-id",
            "e2e",
            "--logformat",
            "json",
            "--loglevel",
            "debug",
        ]);
        assert!(a.namespaced);
        assert_eq!(a.namespace.as_deref(), Some("team-a"));
        assert_eq!(a.logformat, LogFormat::Json);
    }
}
