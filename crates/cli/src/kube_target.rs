//! The cluster and namespace a command talks to, from the global flags.

use anyhow::Context as _;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::cli::GlobalArgs;

/// A client and the namespace commands act in.
pub struct Target {
    pub client: Client,
    pub namespace: String,
}

impl Target {
    /// Connects as kubectl would: `--kubeconfig`, else `$KUBECONFIG` or `~/.kube/config`, else
    /// the in-cluster service account; `--context` picks the context, `-n` overrides its namespace.
    pub async fn connect(global: &GlobalArgs) -> anyhow::Result<Self> {
        let options = KubeConfigOptions {
            context: global.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match (&global.kubeconfig, &global.context) {
            (Some(path), _) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .with_context(|| format!("loading kubeconfig {}", path.display()))?
            }
            (None, Some(context)) => kube::Config::from_kubeconfig(&options)
                .await
                .with_context(|| format!("loading context {context:?} from the kubeconfig"))?,
            (None, None) => kube::Config::infer()
                .await
                .context("finding a cluster (no kubeconfig and not running in a cluster)")?,
        };
        let namespace = global
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).context("creating the Kubernetes client")?;
        Ok(Self { client, namespace })
    }
}
