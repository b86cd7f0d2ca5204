//! The simulation's test binaries in one (as the end-to-end tests are:
//! `crates/e2e/tests/e2e/main.rs` says why), a module each; `sluice-test-runner` runs each module
//! as a process of its own, `cargo test -p sluice-sim --test sim determinism::` one of them.
//!
//! The two write-path tests stay binaries of their own (`tests/*_write_path.rs`): each watches
//! the simulation through a tracing subscriber of its own, and beside the other tests in one
//! process the Experiment one missed the spans it looks for in two runs of three.

/// jemalloc, as the `sluice-sim` binary has (`src/main.rs`): the seeds are mostly copies of
/// JSON objects, and under glibc's allocator a third of this binary's time went to `malloc`
/// and `free` (a profile of the `ci::` module in `make test`, 2026-12-02). With the arenas
/// `sluice-test-runner` asks for (`_RJEM_MALLOC_CONF`), the module took 104 CPU-seconds
/// where it took 130 under glibc's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod ci;
mod determinism;
mod known_bugs;
mod mutation;
mod replay;
