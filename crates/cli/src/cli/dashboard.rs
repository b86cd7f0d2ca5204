//! Flags of `dashboard`: where the web dashboard listens and whether it may write.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

pub const DASHBOARD_LONG_ABOUT: &str = "\
Serve a web dashboard of the Rollouts, and Argo's dashboard API, on this machine.

The page lists the Rollouts of a namespace and shows one Rollout with its revisions,
ReplicaSets, pods, steps and AnalysisRuns, updated live. Its buttons promote, abort,
retry, restart, roll back and set images; every change is made with your own
kubeconfig identity, so the cluster's RBAC decides what you may do.

It listens on 127.0.0.1 only by default. Listening on any other address needs
--read-only (every change refused with 403) or --allow-writes (anyone who reaches
the port acts with your identity).

Shared by a team (in the cluster, see docs/dashboard.md), it asks each person to log
in with --login: a Kubernetes bearer token pasted on the login page, an OpenID
Connect provider, or both. Every request is then made as that person
(impersonation by the dashboard's own identity, which needs the right to
impersonate and nothing more to act), so the cluster's RBAC decides what each one
sees and may do; sessions last --session-ttl; each action is recorded as an Event
on the Rollout naming the person.";

pub const DASHBOARD_EXAMPLES: &str = "\
Examples:
  # The Rollouts of the current namespace, at http://127.0.0.1:3100/
  kubectl sluice dashboard

  # Every namespace, on another port
  kubectl sluice dashboard -A --port 8080

  # Shown to the team: reachable from other machines, but no buttons and no writes
  kubectl sluice dashboard --address 0.0.0.0 --read-only

  # Shared, with logins: each person acts as themselves
  kubectl sluice dashboard -A --address 0.0.0.0 --login token,oidc \\
    --public-url https://rollouts.example.com \\
    --oidc-issuer https://dex.example.com --oidc-client-id sluice-dashboard \\
    --oidc-client-secret-file /etc/sluice/oidc-secret --session-key-file /etc/sluice/session-key";

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Serve the Rollouts of every namespace instead of one
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Port to listen on (0 picks a free one; the address is printed)
    #[arg(short = 'p', long, default_value_t = 3100)]
    pub port: u16,
    /// Address to listen on; other than a loopback address it needs --read-only or
    /// --allow-writes
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub address: IpAddr,
    /// Refuse every change (PUT answers 403) and show no action buttons
    #[arg(long, conflicts_with = "allow_writes")]
    pub read_only: bool,
    /// Allow changes when listening on a non-loopback address: anyone who can reach the port
    /// then acts with your kubeconfig identity
    #[arg(long)]
    pub allow_writes: bool,
    /// Ask each person to log in, and act as them: `token` (a Kubernetes bearer token pasted
    /// on the login page), `oidc` (an OpenID Connect provider), or `token,oidc`
    #[arg(long, value_enum, value_delimiter = ',', value_name = "WAYS")]
    pub login: Vec<LoginWay>,
    /// The dashboard's address as browsers reach it; the OpenID Connect provider sends them
    /// back to URL/login/callback, and an https URL marks the cookies Secure
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// How long a login lasts (e.g. 8h, 30m)
    #[arg(long, default_value = "8h", value_name = "DURATION")]
    pub session_ttl: jiff::SignedDuration,
    /// A file of at least 32 random bytes that signs sessions; replicas sharing it share
    /// sessions. Without it a key is made at start, and a restart ends every session
    #[arg(long, value_name = "FILE")]
    pub session_key_file: Option<PathBuf>,
    /// The OpenID Connect provider's issuer URL (its discovery document is read from
    /// ISSUER/.well-known/openid-configuration at the first login)
    #[arg(long, value_name = "URL")]
    pub oidc_issuer: Option<String>,
    /// The dashboard's client ID at the provider
    #[arg(long, default_value = "sluice-dashboard", value_name = "ID")]
    pub oidc_client_id: String,
    /// A file holding the client's secret (or the SLUICE_OIDC_CLIENT_SECRET variable)
    #[arg(long, value_name = "FILE")]
    pub oidc_client_secret_file: Option<PathBuf>,
    /// Scopes asked of the provider
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "openid,email,profile,groups"
    )]
    pub oidc_scopes: Vec<String>,
    /// The ID token claim that names the user (as kube-apiserver's --oidc-username-claim)
    #[arg(long, default_value = "email", value_name = "CLAIM")]
    pub oidc_username_claim: String,
    /// Put before every user name (as kube-apiserver's --oidc-username-prefix)
    #[arg(long, default_value = "", value_name = "PREFIX")]
    pub oidc_username_prefix: String,
    /// The ID token claim that lists the user's groups (as kube-apiserver's --oidc-groups-claim)
    #[arg(long, default_value = "groups", value_name = "CLAIM")]
    pub oidc_groups_claim: String,
    /// Put before every group name (as kube-apiserver's --oidc-groups-prefix)
    #[arg(long, default_value = "", value_name = "PREFIX")]
    pub oidc_groups_prefix: String,
    /// A PEM file of certificate authorities to trust for the provider, besides the system's
    #[arg(long, value_name = "FILE")]
    pub oidc_ca_file: Option<PathBuf>,
}

/// A way to log in to the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoginWay {
    /// A Kubernetes bearer token, pasted on the login page
    Token,
    /// An OpenID Connect provider
    Oidc,
}
