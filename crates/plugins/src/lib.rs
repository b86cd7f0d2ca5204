//! Argo Rollouts' RPC plugins, run for the controller: installed from the `argo-rollouts-config`
//! ConfigMap as Argo installs them ([`install`]), each spoken to through its own bridge process
//! ([`bridge`]: go-plugin and Argo's RPC types on one side, JSON lines on the other; see
//! docs/plugins.md), with deadlines and restarts ([`host`]).
//!
//! Nothing here decides anything about a Rollout or an AnalysisRun: callers pass Argo's objects
//! as JSON and get the plugin's answer as JSON, or an error message to show.

pub mod bridge;
pub mod host;
pub mod install;

pub use host::{HostSettings, PluginError, PluginHost};
pub use install::{PluginSpec, install};

/// The three kinds of plugins Argo runs, by the ConfigMap key that lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PluginKind {
    TrafficRouter,
    MetricProvider,
    Step,
}

impl PluginKind {
    /// The handshake value go-plugin checks (`ARGO_ROLLOUTS_RPC_PLUGIN`), which the bridge takes
    /// as its first argument.
    pub fn cookie(self) -> &'static str {
        match self {
            PluginKind::TrafficRouter => "trafficrouter",
            PluginKind::MetricProvider => "metricprovider",
            PluginKind::Step => "step",
        }
    }

    /// Argo's name of the kind, as in "plugin X not configured in configmap".
    pub fn argo_name(self) -> &'static str {
        match self {
            PluginKind::TrafficRouter => "TrafficRouter",
            PluginKind::MetricProvider => "MetricProvider",
            PluginKind::Step => "Step",
        }
    }
}
