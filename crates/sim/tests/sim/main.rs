//! The simulation's test binaries in one (as the end-to-end tests are:
//! `crates/e2e/tests/e2e/main.rs` says why), a module each; `sluice-test-runner` runs each module
//! as a process of its own, `cargo test -p sluice-sim --test sim determinism::` one of them.
//!
//! The two write-path tests stay binaries of their own (`tests/*_write_path.rs`): each watches
//! the simulation through a tracing subscriber of its own, and beside the other tests in one
//! process the Experiment one missed the spans it looks for in two runs of three.

mod ci;
mod determinism;
mod known_bugs;
mod mutation;
mod replay;
