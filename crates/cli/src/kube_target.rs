//! The cluster and namespace a command talks to, from the global flags.

use std::time::Duration;

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
    /// the in-cluster service account; `--context`, `--cluster` and `--user` pick the parts of
    /// the kubeconfig, `--server` and `--token` override them (with `--server` no kubeconfig is
    /// needed), `-n` overrides the context's namespace.
    pub async fn connect(global: &GlobalArgs) -> anyhow::Result<Self> {
        let (config, namespace) = Self::config(global).await?;
        let client = Client::try_from(config).context("creating the Kubernetes client")?;
        Ok(Self { client, namespace })
    }

    /// The client's configuration and the namespace, for callers that make further clients
    /// from it (the dashboard's, one per logged-in user).
    pub async fn config(global: &GlobalArgs) -> anyhow::Result<(kube::Config, String)> {
        let config = match load(global).await {
            Ok(config) => config,
            // kubectl talks to an explicit --server even when there is no kubeconfig at all.
            Err(_) if global.kubeconfig.is_none() && global.server.is_some() => {
                kube::Config::new(server_uri(global.server.as_deref().unwrap_or_default())?)
            }
            Err(e) => return Err(e),
        };
        let config = overridden(config, global)?;
        let namespace = global
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        Ok((config, namespace))
    }
}

/// The kubeconfig's view of the cluster, with the parts the flags name.
async fn load(global: &GlobalArgs) -> anyhow::Result<kube::Config> {
    let options = KubeConfigOptions {
        context: global.context.clone(),
        cluster: global.cluster.clone(),
        user: global.user.clone(),
    };
    let picked = selection(global);
    let kubeconfig = match &global.kubeconfig {
        Some(path) => Kubeconfig::read_from(path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?,
        None if !picked.is_empty() => {
            Kubeconfig::read().context("reading the kubeconfig ($KUBECONFIG or ~/.kube/config)")?
        }
        None => {
            return kube::Config::infer()
                .await
                .context("finding a cluster (no kubeconfig and not running in a cluster)");
        }
    };
    check_names(&kubeconfig, global)?;
    let shown = global.kubeconfig.as_ref().map_or_else(
        || "the kubeconfig".to_owned(),
        |p| format!("kubeconfig {}", p.display()),
    );
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .with_context(|| format!("loading {picked}from {shown}"))
}

/// A context, cluster or user the flags name must be in the kubeconfig (kubectl's errors);
/// otherwise the current context's would be used without a word.
fn check_names(kubeconfig: &Kubeconfig, global: &GlobalArgs) -> anyhow::Result<()> {
    if let Some(name) = &global.context
        && !kubeconfig.contexts.iter().any(|c| &c.name == name)
    {
        anyhow::bail!("context was not found for specified context: {name}");
    }
    if let Some(name) = &global.cluster
        && !kubeconfig.clusters.iter().any(|c| &c.name == name)
    {
        anyhow::bail!("no server found for cluster {name:?}");
    }
    if let Some(name) = &global.user
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == name)
    {
        anyhow::bail!("auth info {name:?} does not exist");
    }
    Ok(())
}

/// The kubeconfig parts the flags name, for error messages: `context "dev", user "ci" `.
fn selection(global: &GlobalArgs) -> String {
    let parts: Vec<String> = [
        ("context", &global.context),
        ("cluster", &global.cluster),
        ("user", &global.user),
    ]
    .iter()
    .filter_map(|(what, name)| name.as_ref().map(|name| format!("{what} {name:?}")))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        parts.join(", ") + " "
    }
}

/// Applies `--server`, `--token` and `--request-timeout` over the kubeconfig's settings.
fn overridden(mut config: kube::Config, global: &GlobalArgs) -> anyhow::Result<kube::Config> {
    if let Some(server) = &global.server {
        config.cluster_url = server_uri(server)?;
    }
    if let Some(token) = &global.token {
        // A token given on the command line is the only credential used, as with kubectl.
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.clone().into()),
            ..kube::config::AuthInfo::default()
        };
    }
    let timeout = (global.request_timeout > Duration::ZERO).then_some(global.request_timeout);
    if timeout.is_some() {
        config.connect_timeout = timeout;
        config.read_timeout = timeout;
        config.write_timeout = timeout;
    }
    Ok(config)
}

/// `--server` as a URL; a bare `host:port` is taken as https, as kubectl does.
fn server_uri(server: &str) -> anyhow::Result<http::Uri> {
    let with_scheme = if server.contains("://") {
        server.to_owned()
    } else {
        format!("https://{server}")
    };
    with_scheme
        .parse()
        .with_context(|| format!("invalid --server {server:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_without_scheme_is_https() {
        assert_eq!(
            server_uri("127.0.0.1:6443").unwrap().to_string(),
            "https://127.0.0.1:6443/"
        );
        assert_eq!(
            server_uri("http://localhost:8080").unwrap().to_string(),
            "http://localhost:8080/"
        );
        assert!(server_uri("https://a b").is_err());
    }

    #[test]
    fn selection_names_the_flags_given() {
        let mut global = GlobalArgs::default();
        assert_eq!(selection(&global), "");
        global.context = Some("dev".into());
        global.user = Some("ci".into());
        assert_eq!(selection(&global), "context \"dev\", user \"ci\" ");
    }

    #[test]
    fn names_the_flags_give_must_exist() {
        let kubeconfig: Kubeconfig = serde_json::from_value(serde_json::json!({
            "clusters": [{"name": "prod", "cluster": {"server": "https://k"}}],
            "users": [{"name": "ci", "user": {}}],
            "contexts": [{"name": "dev", "context": {"cluster": "prod", "user": "ci"}}]
        }))
        .unwrap();
        let mut global = GlobalArgs {
            context: Some("dev".into()),
            cluster: Some("prod".into()),
            user: Some("ci".into()),
            ..GlobalArgs::default()
        };
        assert!(check_names(&kubeconfig, &global).is_ok());
        global.user = Some("ghost".into());
        assert_eq!(
            check_names(&kubeconfig, &global).unwrap_err().to_string(),
            "auth info \"ghost\" does not exist"
        );
        global.cluster = Some("test".into());
        assert_eq!(
            check_names(&kubeconfig, &global).unwrap_err().to_string(),
            "no server found for cluster \"test\""
        );
        global.context = Some("x".into());
        assert_eq!(
            check_names(&kubeconfig, &global).unwrap_err().to_string(),
            "context was not found for specified context: x"
        );
    }

    #[test]
    fn token_replaces_other_credentials_and_timeout_applies() {
        let mut config = kube::Config::new("https://k:6443".parse().unwrap());
        config.auth_info.username = Some("alice".into());
        let global = GlobalArgs {
            token: Some("t0k".into()),
            server: Some("k2:443".into()),
            request_timeout: Duration::from_secs(3),
            ..GlobalArgs::default()
        };
        let config = overridden(config, &global).unwrap();
        assert_eq!(config.auth_info.username, None);
        assert!(config.auth_info.token.is_some());
        assert_eq!(config.cluster_url.to_string(), "https://k2:443/");
        assert_eq!(config.read_timeout, Some(Duration::from_secs(3)));
    }
}
