use clap::Parser;
use sluice_controller::{Args, init_logging, install_crypto_provider, run};

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
