use clap::Parser;
use sluice_controller::{Args, init_logging, install_crypto_provider, run};

/// jemalloc rather than the system allocator: a controller's caches churn as every watch event
/// replaces an object, and glibc's per-thread arenas keep the freed pieces, so the resident
/// size grows far past what is live (measured in docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    install_crypto_provider();
    // go_memstats_heap_alloc_bytes carries jemalloc's live heap bytes.
    sluice_controller::serve::metrics::process::set_heap_probe(|| {
        tikv_jemalloc_ctl::epoch::advance().ok()?;
        tikv_jemalloc_ctl::stats::allocated::read()
            .ok()
            .and_then(|b| u64::try_from(b).ok())
    });
    let args = Args::parse();
    init_logging(&args);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        "starting sluice-controller"
    );
    if sluice_controller::cache::planted::early_list_objects() {
        tracing::warn!(
            "{} is set: a list's objects are reconciled before the cache holds them, a bug \
             planted for a test; unset it",
            sluice_controller::cache::planted::VARIABLE
        );
    }
    run(args).await
}
