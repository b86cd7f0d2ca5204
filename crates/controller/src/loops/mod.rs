//! The controller's loops: Rollouts (`rollouts`, with `observe` gathering a Rollout's world
//! and `apply` executing the engine's plan, run by `driver` for the controller and the
//! simulator alike, and `events` publishing what a plan says happened) and AnalysisRuns
//! (`analysis_runs`, each run reconciled by `analysis_run_driver`, which the simulator runs
//! too), and Experiments (`experiments`). [`run_all`] runs the three side by side.

pub mod analysis_run_driver;
pub mod analysis_runs;
pub mod apply;
pub mod driver;
pub mod events;
pub mod experiment_driver;
pub mod experiments;
mod hooks;
pub mod notifications;
pub mod observe;
pub mod rollouts;

use futures::channel::mpsc;
use kube::Client;

use crate::args::Args;
pub use hooks::Hooks;

/// Runs the Rollout, AnalysisRun and Experiment loops side by side until `hooks` say stop.
///
/// The Experiments' ReplicaSets come from the Rollout loop's one ReplicaSet watch, as
/// triggers: a second watch would decode every ReplicaSet event of the cluster twice.
///
/// With `--controllers=analysis` only the AnalysisRun loop runs, as in Argo Rollouts.
pub async fn run_all(client: Client, args: &Args, hooks: Hooks) -> anyhow::Result<()> {
    if args.argo.analysis_only() {
        return analysis_runs::run_with(client, args, hooks).await;
    }
    let (to_experiments, experiment_triggers) = mpsc::unbounded();
    let (rollouts, runs, experiments) = tokio::join!(
        rollouts::run_with(client.clone(), args, hooks.clone(), to_experiments),
        analysis_runs::run_with(client.clone(), args, hooks.clone()),
        experiments::run_with(client, args, hooks, experiment_triggers),
    );
    rollouts.and(runs).and(experiments)
}
