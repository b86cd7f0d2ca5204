//! Deterministic simulation of Sluice: the real engine (`sluice_engine::reconcile`) and the
//! real write path (`sluice_controller::loops::apply::apply_plan` through `ClusterAccess`) run
//! against an in-memory API server, with watches that lag, reorder, break and repeat, a
//! ReplicaSet controller and kubelet, crashing and partitioned controller replicas with
//! leases, the real AnalysisRun driver measuring with scripted provider readings, and the real
//! Experiment engine running the Experiments of canary steps, all scheduled from one seed. Invariants are checked at every step and at the end.

pub mod analysis_runs;
pub mod api_model;
pub mod controller;
pub mod daemon_sets;
pub mod experiments;
pub mod faults;
pub mod gc;
pub mod invariants;
pub mod known_bugs;
pub mod kubelet;
pub mod lease;
pub mod net;
pub mod notifications;
pub mod rng;
pub mod scenarios;
pub mod scheduler;
pub mod side_loop;
pub mod stateful_sets;
pub mod step_plugins;
pub mod watch;

pub use controller::{ApplyFn, real_apply};
pub use scheduler::{Outcome, Stats, run};
