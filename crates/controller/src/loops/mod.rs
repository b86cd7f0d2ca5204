//! The controller's loops, each a kube `Controller` run by the one [`harness`] (a new leader
//! reconciles everything, metrics and retries alike for all), with what the process gives
//! them in [`Hooks`] and what they watch in `scope`:
//!
//! - Rollouts (`rollouts`, its watches' triggers in `rollouts::triggers`): `observe` gathers a
//!   Rollout's world, the engine decides, `apply` executes the plan, all run by `driver` for
//!   the controller and the simulator alike; `events` publishes what a plan says happened, and
//!   `notifications` sends what those events make due, through `notification_driver`, which
//!   the simulator runs too;
//! - AnalysisRuns (`analysis_runs`), each reconciled by `analysis_run_driver`, which the
//!   simulator runs too;
//! - Experiments (`experiments`), each reconciled by `experiment_driver`, which the simulator
//!   runs too.
//!
//! [`run_all`] runs them side by side.

pub mod analysis_run_driver;
pub mod analysis_runs;
pub mod apply;
pub mod driver;
pub mod event_queue;
pub mod events;
pub mod experiment_driver;
pub mod experiments;
pub mod harness;
mod hooks;
pub mod notification_driver;
pub mod notifications;
pub mod observe;
pub mod own_writes;
pub mod rollouts;
pub mod scope;
pub mod step_plugins;

use futures::channel::mpsc;
use kube::Client;

use crate::args::Args;
pub use hooks::Hooks;

/// Runs the loops alone: they always write and stop on SIGINT/SIGTERM.
pub async fn run(client: Client, args: &Args) -> anyhow::Result<()> {
    run_all(client, args, Hooks::standalone()).await
}

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
