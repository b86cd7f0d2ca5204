//! client-go's connection flags (`clientcmd.RecommendedConfigOverrideFlags("")`), which Argo
//! Rollouts' controller registers beside `--kubeconfig`: they pick a context, cluster or user of
//! the kubeconfig and override its fields, as they do for kubectl. `--namespace` is
//! [`super::Args::namespace`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use kube::config::{AuthInfo, KubeConfigOptions};
use secrecy::SecretString;

use crate::duration::parse_go_duration;

/// A flag value that never appears in `Debug` output (tokens, passwords).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"*****\"")
    }
}

/// A path that may be empty (empty: not set, as in client-go).
fn path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

fn secret(s: &str) -> Result<Secret, String> {
    Ok(Secret(s.to_string()))
}

/// client-go's `--request-timeout`: a bare integer is seconds, anything else a Go duration;
/// 0 means no timeout.
pub fn parse_request_timeout(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<i64>() {
        return u64::try_from(secs)
            .map(Duration::from_secs)
            .map_err(|_| "timeouts must be positive".to_string());
    }
    parse_go_duration(s).map_err(|e| format!("invalid timeout value {s:?}: {e}"))
}

/// How to reach the API server, on top of the kubeconfig.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Kubernetes client (client-go's flags, as Argo Rollouts has them)")]
pub struct ClientFlags {
    /// The name of the kubeconfig context to use.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// The name of the kubeconfig cluster to use.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,

    /// The name of the kubeconfig user to use.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,

    /// The address and port of the Kubernetes API server.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,

    /// Bearer token for authentication to the API server.
    #[arg(long, value_name = "TOKEN", value_parser = secret)]
    pub token: Option<Secret>,

    /// Username to impersonate for the operation.
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,

    /// UID to impersonate for the operation.
    #[arg(long = "as-uid", value_name = "UID")]
    pub as_uid: Option<String>,

    /// Group to impersonate for the operation, this flag can be repeated to specify multiple
    /// groups.
    #[arg(long = "as-group", value_name = "GROUP", action = clap::ArgAction::Append)]
    pub as_group: Vec<String>,

    /// Username for basic authentication to the API server.
    #[arg(long, value_name = "USER")]
    pub username: Option<String>,

    /// Password for basic authentication to the API server.
    #[arg(long, value_name = "PASSWORD", value_parser = secret)]
    pub password: Option<Secret>,

    /// Path to a client certificate file for TLS.
    #[arg(long = "client-certificate", value_name = "PATH", value_parser = path)]
    pub client_certificate: Option<PathBuf>,

    /// Path to a client key file for TLS.
    #[arg(long = "client-key", value_name = "PATH", value_parser = path)]
    pub client_key: Option<PathBuf>,

    /// Path to a cert file for the certificate authority.
    #[arg(long = "certificate-authority", value_name = "PATH", value_parser = path)]
    pub certificate_authority: Option<PathBuf>,

    /// If true, the server's certificate will not be checked for validity. This will make your
    /// HTTPS connections insecure.
    #[arg(
        long = "insecure-skip-tls-verify",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub insecure_skip_tls_verify: bool,

    /// If provided, this name will be used to validate server certificate. If this is not
    /// provided, hostname used to contact the server is used.
    #[arg(long = "tls-server-name", value_name = "NAME")]
    pub tls_server_name: Option<String>,

    /// If provided, this URL will be used to connect via proxy.
    #[arg(long = "proxy-url", value_name = "URL")]
    pub proxy_url: Option<String>,

    /// If true, opt-out of response compression for all requests to the server.
    #[arg(
        long = "disable-compression",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub disable_compression: bool,

    /// The length of time to wait before giving up on a single server request. Non-zero values
    /// should contain a corresponding time unit (e.g. 1s, 2m, 3h). A value of zero means don't
    /// timeout requests.
    #[arg(long = "request-timeout", default_value = "0", value_parser = parse_request_timeout, value_name = "DURATION")]
    pub request_timeout: Duration,
}

/// client-go merges only non-empty overrides: an empty value is no override.
fn set(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

fn set_path(v: &Option<PathBuf>) -> Option<&PathBuf> {
    v.as_ref().filter(|p| !p.as_os_str().is_empty())
}

fn set_secret(v: &Option<Secret>) -> Option<&str> {
    v.as_ref().map(|s| s.0.as_str()).filter(|s| !s.is_empty())
}

impl ClientFlags {
    /// The kubeconfig entries `--context`, `--cluster` and `--user` select.
    pub fn kubeconfig_options(&self) -> KubeConfigOptions {
        KubeConfigOptions {
            context: set(&self.context).map(str::to_string),
            cluster: set(&self.cluster).map(str::to_string),
            user: set(&self.user).map(str::to_string),
        }
    }

    /// Whether a kubeconfig entry is named, so that the kubeconfig must be read (no in-cluster
    /// fallback).
    pub fn names_kubeconfig_entries(&self) -> bool {
        let o = self.kubeconfig_options();
        o.context.is_some() || o.cluster.is_some() || o.user.is_some()
    }

    /// Applies the overrides to a configuration made from the kubeconfig or in-cluster, as
    /// client-go merges its overrides over the kubeconfig's cluster and user.
    pub fn apply(&self, config: &mut kube::Config, namespace: Option<&str>) -> anyhow::Result<()> {
        if let Some(ns) = namespace.filter(|ns| !ns.is_empty()) {
            config.default_namespace = ns.to_string();
        }
        if let Some(server) = set(&self.server) {
            config.cluster_url = server
                .parse()
                .with_context(|| format!("--server {server:?} is not a URL"))?;
        }
        if let Some(path) = set_path(&self.certificate_authority) {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading --certificate-authority {}", path.display()))?;
            let certs: Vec<Vec<u8>> = pem::parse_many(&pem)
                .with_context(|| format!("parsing {}", path.display()))?
                .into_iter()
                .filter(|p| p.tag() == "CERTIFICATE")
                .map(pem::Pem::into_contents)
                .collect();
            anyhow::ensure!(
                !certs.is_empty(),
                "--certificate-authority {} holds no certificate",
                path.display()
            );
            config.root_cert = Some(certs);
            config.root_cert_file = Some(path.clone());
        }
        if self.insecure_skip_tls_verify {
            config.accept_invalid_certs = true;
        }
        if let Some(name) = set(&self.tls_server_name) {
            config.tls_server_name = Some(name.to_string());
        }
        if let Some(url) = set(&self.proxy_url) {
            config.proxy_url = Some(
                url.parse()
                    .with_context(|| format!("--proxy-url {url:?} is not a URL"))?,
            );
        }
        if self.disable_compression {
            config.disable_compression = true;
        }
        if !self.request_timeout.is_zero() {
            config.read_timeout = Some(self.request_timeout);
            config.write_timeout = Some(self.request_timeout);
        }
        self.apply_auth(&mut config.auth_info);
        Ok(())
    }

    fn apply_auth(&self, auth: &mut AuthInfo) {
        // An explicit credential replaces whatever the kubeconfig would authenticate with.
        let replace_credentials = |auth: &mut AuthInfo| {
            auth.token = None;
            auth.token_file = None;
            auth.username = None;
            auth.password = None;
            auth.exec = None;
            auth.auth_provider = None;
        };
        let token = set_secret(&self.token);
        if let Some(token) = token {
            replace_credentials(auth);
            auth.token = Some(SecretString::from(token.to_string()));
        }
        let (username, password) = (set(&self.username), set_secret(&self.password));
        if username.is_some() || password.is_some() {
            if token.is_none() {
                replace_credentials(auth);
            }
            auth.username = username.map(str::to_string);
            auth.password = password.map(|p| SecretString::from(p.to_string()));
        }
        if let Some(path) = set_path(&self.client_certificate) {
            auth.client_certificate = Some(path.display().to_string());
            auth.client_certificate_data = None;
        }
        if let Some(path) = set_path(&self.client_key) {
            auth.client_key = Some(path.display().to_string());
            auth.client_key_data = None;
        }
        if let Some(user) = set(&self.as_user) {
            auth.impersonate = Some(user.to_string());
        }
        if let Some(uid) = set(&self.as_uid) {
            auth.impersonate_uid = Some(uid.to_string());
        }
        let groups: Vec<String> = self
            .as_group
            .iter()
            .filter(|g| !g.is_empty())
            .cloned()
            .collect();
        if !groups.is_empty() {
            auth.impersonate_groups = Some(groups);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;
    use secrecy::ExposeSecret as _;

    use crate::Args;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster: {server: "https://one.example:6443", insecure-skip-tls-verify: true}
- name: c2
  cluster: {server: "https://two.example:6443", insecure-skip-tls-verify: true}
contexts:
- name: one
  context: {cluster: c1, user: u1, namespace: ns-one}
- name: two
  context: {cluster: c2, user: u2, namespace: ns-two}
users:
- name: u1
  user: {token: token-one}
- name: u2
  user: {token: token-two}
"#;

    async fn config_for(flags: &[&str]) -> kube::Config {
        let dir = std::env::temp_dir().join(format!("sluice-kc-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let mut argv = vec!["sluice-controller", "--kubeconfig", path.to_str().unwrap()];
        argv.extend_from_slice(flags);
        let args = Args::parse_from(argv);
        let config = crate::client::config(&args).await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        config
    }

    fn token(config: &kube::Config) -> String {
        config
            .auth_info
            .token
            .as_ref()
            .map(|t| t.expose_secret().to_string())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn the_kubeconfig_current_context_is_the_default() {
        let c = config_for(&[]).await;
        assert_eq!(c.cluster_url.to_string(), "https://one.example:6443/");
        assert_eq!(c.default_namespace, "ns-one");
        assert_eq!(token(&c), "token-one");
    }

    #[tokio::test]
    async fn context_cluster_and_user_select_kubeconfig_entries() {
        let c = config_for(&["--context", "two"]).await;
        assert_eq!(c.cluster_url.to_string(), "https://two.example:6443/");
        assert_eq!(c.default_namespace, "ns-two");
        assert_eq!(token(&c), "token-two");

        let c = config_for(&["--cluster=c2", "--user", "u1"]).await;
        assert_eq!(c.cluster_url.to_string(), "https://two.example:6443/");
        assert_eq!(token(&c), "token-one");
    }

    #[tokio::test]
    async fn server_token_namespace_and_tls_flags_override_the_kubeconfig() {
        let c = config_for(&[
            "--server",
            "https://other.example:443",
            "--token=secret-token",
            "--namespace",
            "team-a",
            "--tls-server-name",
            "api.internal",
            "--disable-compression",
            "--request-timeout",
            "30",
            "--as",
            "jane",
            "--as-group",
            "ops",
            "--as-group",
            "dev",
            "--as-uid",
            "1234",
        ])
        .await;
        assert_eq!(c.cluster_url.to_string(), "https://other.example:443/");
        assert_eq!(token(&c), "secret-token");
        assert_eq!(c.default_namespace, "team-a");
        assert_eq!(c.tls_server_name.as_deref(), Some("api.internal"));
        assert!(c.disable_compression);
        assert_eq!(c.read_timeout, Some(Duration::from_secs(30)));
        assert_eq!(c.auth_info.impersonate.as_deref(), Some("jane"));
        assert_eq!(c.auth_info.impersonate_uid.as_deref(), Some("1234"));
        assert_eq!(
            c.auth_info.impersonate_groups,
            Some(vec!["ops".to_string(), "dev".to_string()])
        );

        let c = config_for(&["--username", "admin", "--password", "pw"]).await;
        assert!(c.auth_info.token.is_none(), "basic auth replaces the token");
        assert_eq!(c.auth_info.username.as_deref(), Some("admin"));
    }

    #[tokio::test]
    async fn empty_overrides_change_nothing_as_in_client_go() {
        let c = config_for(&[
            "--context=",
            "--server=",
            "--token=",
            "--as=",
            "--as-group=",
            "--username=",
            "--certificate-authority=",
        ])
        .await;
        assert_eq!(c.cluster_url.to_string(), "https://one.example:6443/");
        assert_eq!(token(&c), "token-one");
        assert_eq!(c.auth_info.impersonate, None);
        assert_eq!(c.auth_info.impersonate_groups, None);
    }

    #[tokio::test]
    async fn an_unknown_context_is_an_error() {
        let dir = std::env::temp_dir().join(format!("sluice-kc-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config");
        std::fs::write(&path, KUBECONFIG).unwrap();
        let args = Args::parse_from([
            "sluice-controller",
            "--kubeconfig",
            path.to_str().unwrap(),
            "--context",
            "nope",
        ]);
        assert!(crate::client::config(&args).await.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn request_timeout_takes_seconds_or_durations() {
        assert_eq!(parse_request_timeout("0"), Ok(Duration::ZERO));
        assert_eq!(parse_request_timeout("15"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_request_timeout("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_request_timeout("-1").is_err());
        assert!(parse_request_timeout("soon").is_err());
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let args = Args::parse_from(["sluice-controller", "--token", "t0p", "--password=pw9"]);
        let debug = format!("{args:?}");
        assert!(!debug.contains("t0p") && !debug.contains("pw9"), "{debug}");
    }
}
