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
    let args = Args::parse();
    init_logging(&args);
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        "starting sluice-controller"
    );
    run(args).await
}
