//! The controller's loops: Rollouts (`rollouts`, with `observe` gathering a Rollout's world
//! and `apply` executing the engine's plan, run by `driver` for the controller and the
//! simulator alike, and `events` publishing what a plan says happened) and AnalysisRuns
//! (`analysis_runs`, each run reconciled by `analysis_run_driver`, which the simulator runs
//! too), and Experiments (`experiments`).

pub mod analysis_run_driver;
pub mod analysis_runs;
pub mod apply;
pub mod driver;
pub mod events;
pub mod experiments;
pub mod observe;
pub mod rollouts;
