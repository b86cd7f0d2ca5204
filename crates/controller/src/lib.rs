//! The `sluice-controller` runtime: flags, client, watches and caches, the apply layer that
//! executes the engine's plans, events.

pub mod apply;
pub mod args;
pub mod reconciler;
pub mod writer;

use std::path::Path;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing_subscriber::EnvFilter;

pub use args::Args;

/// Installs the TLS crypto provider once. Both `ring` and `aws-lc-rs` can end up linked in
/// through dependencies; rustls refuses to guess, so the choice is made explicitly.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

pub fn init_logging(args: &Args) {
    let filter = EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{lvl},kube=warn,hyper=warn,tower=warn",
            lvl = args.loglevel
        ))
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match args.logformat {
        args::LogFormat::Json => builder.json().try_init(),
        args::LogFormat::Text => builder.try_init(),
    };
}

/// A client from `--kubeconfig`, or the usual inference (in-cluster, $KUBECONFIG, ~/.kube).
pub async fn client(kubeconfig: Option<&Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("reading kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

/// Runs the controller until SIGINT/SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_deref()).await?;
    reconciler::run(client, &args).await
}
