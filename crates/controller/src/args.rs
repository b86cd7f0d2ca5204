//! Command-line flags. Names and defaults follow Argo Rollouts' controller where it has the same
//! setting, so existing Deployment manifests keep working.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser};

use crate::duration::parse_go_duration;

mod argo_flags;
mod client_flags;

pub use argo_flags::ArgoFlags;
pub use client_flags::{ClientFlags, Secret};

/// Lease that Argo Rollouts' controller campaigns for without an instance id (1.9 and 1.10), and
/// with any instance id (1.9). Sluice follows Argo's names, so a Sluice and an Argo Rollouts
/// controller never both write: while one holds the lease the other only watches. Installing
/// Sluice beside a running Argo Rollouts and then scaling Argo Rollouts to zero is therefore a
/// safe migration path (and scaling Sluice to zero the way back).
pub const DEFAULT_LEASE_NAME: &str = "argo-rollouts-controller-lock";

/// Namespace of the lease when neither `POD_NAMESPACE` nor a service-account namespace is known.
pub const DEFAULT_LEASE_NAMESPACE: &str = "argo-rollouts";

const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Sluice: progressive delivery for Kubernetes, compatible with Argo Rollouts.
///
/// Watches argoproj.io/v1alpha1 Rollouts and drives them through their canary steps by
/// creating and scaling ReplicaSets, exactly as Argo Rollouts would, so that either controller
/// can take over the other's Rollouts without restarting a pod.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "sluice-controller",
    version,
    about,
    long_about = None,
    // As with Go's pflag, a flag given twice takes its last value.
    args_override_self = true
)]
pub struct Args {
    /// Path to a kubeconfig. Default: in-cluster config, then $KUBECONFIG, then ~/.kube/config.
    #[arg(long, env = "KUBECONFIG_PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// If present, the namespace scope for this CLI request: the namespace watched with
    /// --namespaced (default: the kubeconfig context's namespace, in a pod its own).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,

    /// Watch only one namespace instead of the whole cluster (runs without cluster RBAC).
    #[arg(
        long,
        action = ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub namespaced: bool,

    /// Only manage objects labelled argo-rollouts.argoproj.io/controller-instance-id=<id>.
    /// Without it, objects carrying that label are ignored.
    #[arg(long = "instance-id", default_value = "")]
    pub instance_id: String,

    /// Seconds between full re-syncs of every Rollout (also the longest a Rollout waits for a
    /// reconcile when nothing changes).
    #[arg(long = "rollout-resync", default_value_t = 900)]
    pub rollout_resync: u64,

    /// How long a status change that only reports an update's progress (replica counts, the
    /// phase message) may wait for the next status write; a new revision, a step, a phase, a
    /// pause or an abort is always written at once. A canary without traffic routing, Services
    /// or analysis also holds its stable promotion this way, to write it with the completion
    /// that follows once the old pods are gone. Fewer writes of the Rollout, each the API
    /// server's dearest request; counts are at most this late. 0s writes every change, as Argo
    /// Rollouts does. Rollouts with a progress deadline under ten times this are never held back.
    #[arg(long = "status-write-interval", default_value = "5s", value_parser = parse_go_duration, value_name = "DURATION")]
    pub status_write_interval: Duration,

    /// Rollouts reconciled concurrently.
    #[arg(long = "rollout-threads", default_value_t = 10)]
    pub rollout_threads: u16,

    /// AnalysisRuns reconciled (measured) concurrently.
    #[arg(long = "analysis-threads", default_value_t = 30)]
    pub analysis_threads: u16,

    /// Set the logging level. One of: debug|info|warn|error (also Argo's trace, warning, fatal
    /// and panic; the last two log errors only).
    #[arg(long, default_value = "info", value_parser = parse_log_level, value_name = "LEVEL")]
    pub loglevel: String,

    /// Set the logging format. One of: text|json (anything else is text, as in Argo).
    #[arg(long, default_value = "", value_parser = parse_log_format, value_name = "FORMAT")]
    pub logformat: LogFormat,

    /// Elect a leader among the controller's replicas through a coordination.k8s.io Lease: only
    /// the leader writes, the others keep their caches warm and take over when it goes. With
    /// --leader-elect=false this instance always writes (run exactly one).
    #[arg(
        long = "leader-elect",
        action = ArgAction::Set,
        num_args = 0..=1,
        default_value_t = true,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub leader_elect: bool,

    /// How long a lease stays valid after its last renewal; a standby takes over when the
    /// leader has not renewed for this long (by its own clock). Go duration syntax: 15s, 1m30s.
    #[arg(long = "leader-election-lease-duration", default_value = "15s", value_parser = parse_go_duration, value_name = "DURATION")]
    pub leader_election_lease_duration: Duration,

    /// How long the leader keeps writing while its renewals fail. Past it, every write stops at
    /// once and the controller campaigns again. Must be shorter than the lease duration.
    #[arg(long = "leader-election-renew-deadline", default_value = "10s", value_parser = parse_go_duration, value_name = "DURATION")]
    pub leader_election_renew_deadline: Duration,

    /// Time between attempts to acquire or renew the lease.
    #[arg(long = "leader-election-retry-period", default_value = "2s", value_parser = parse_go_duration, value_name = "DURATION")]
    pub leader_election_retry_period: Duration,

    /// Name of the Lease. Default: Argo Rollouts' lock, argo-rollouts-controller-lock, or with
    /// --instance-id X argo-rollouts-controller-lock-X (Argo 1.10's name); with an instance id,
    /// argo-rollouts-controller-lock (Argo 1.9's name whatever the instance id) is then held
    /// as a guard as well, shared with other Sluice instances, so that neither Argo line leads
    /// beside Sluice during a migration while Sluice instances still lead side by side. Set,
    /// only the Lease named is used.
    #[arg(long = "leader-election-lease-name", value_name = "NAME")]
    pub leader_election_lease_name: Option<String>,

    /// Namespace of the Lease. Default: $POD_NAMESPACE, then the service account's namespace,
    /// then argo-rollouts.
    #[arg(long = "leader-election-namespace", value_name = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// Identity written into the Lease while leading. Default: <hostname>_<random UUID>.
    #[arg(long = "leader-election-identity", value_name = "ID")]
    pub leader_election_identity: Option<String>,

    /// Port of the health endpoints (GET /healthz: alive; GET /readyz: caches synced). 0 binds
    /// a free port; the bound port is logged.
    #[arg(long = "healthzPort", default_value_t = 8080, value_name = "PORT")]
    pub healthz_port: u16,

    /// Port of the Prometheus endpoint (GET /metrics). 0 binds a free port; the bound port is
    /// logged.
    #[arg(
        long = "metricsPort",
        visible_alias = "metricsport",
        default_value_t = 8090,
        value_name = "PORT"
    )]
    pub metrics_port: u16,

    /// Write the bound ports to this file as JSON ({"healthz":N,"metrics":N}) once listening;
    /// useful with port 0.
    #[arg(long = "ports-file", value_name = "PATH")]
    pub ports_file: Option<PathBuf>,

    /// The plugin bridge that runs Argo's RPC plugins (docs/plugins.md). Default:
    /// `sluice-plugin-bridge` beside the controller's executable, else on PATH.
    #[arg(
        long = "plugin-bridge",
        env = "SLUICE_PLUGIN_BRIDGE",
        value_name = "PATH"
    )]
    pub plugin_bridge: Option<PathBuf>,

    /// Where the plugins of `argo-rollouts-config` are installed, as `<dir>/<namespace>/<name>`
    /// (Argo's `plugin-bin` under the working directory).
    #[arg(long = "plugin-dir", default_value = "plugin-bin", value_name = "PATH")]
    pub plugin_dir: PathBuf,

    /// How long a plugin may take to start or to answer one call; past it the plugin is ended
    /// and started again at a later call, with back-off (Argo waits forever).
    #[arg(long = "plugin-call-timeout", default_value = "30s", value_parser = parse_go_duration, value_name = "DURATION")]
    pub plugin_call_timeout: Duration,

    /// Sustained rate of requests to the Kubernetes API, per second (client-side token bucket).
    /// As in Argo, each kind of API has a bucket of its own: argoproj.io's resources,
    /// Kubernetes' own (events included), and other custom resources (traffic routers').
    /// 0 disables the limit.
    #[arg(long, default_value_t = 40.0)]
    pub qps: f32,

    /// Requests that may exceed --qps in a burst.
    #[arg(long, default_value_t = 80)]
    pub burst: u32,

    /// API version of Istio's VirtualService and DestinationRule (networking.istio.io).
    #[arg(
        long = "istio-api-version",
        default_value = "v1alpha3",
        value_name = "VERSION"
    )]
    pub istio_api_version: String,

    /// API version of the SMI TrafficSplit (split.smi-spec.io): v1alpha1, v1alpha2, v1alpha3
    /// or v1alpha4.
    #[arg(
        long = "traffic-split-api-version",
        default_value = "v1alpha1",
        value_parser = ["v1alpha1", "v1alpha2", "v1alpha3", "v1alpha4"],
        value_name = "VERSION"
    )]
    pub traffic_split_api_version: String,

    /// API group of Traefik's TraefikService: traefik.io (Traefik 3) or traefik.containo.us
    /// (Traefik 2). The version is v1alpha1 in both.
    #[arg(
        long = "traefik-api-group",
        default_value = "traefik.io",
        value_parser = ["traefik.io", "traefik.containo.us"],
        value_name = "GROUP"
    )]
    pub traefik_api_group: String,

    /// API version of Ambassador's Mapping, as GROUP/VERSION: getambassador.io/v2 (Mapping)
    /// or x.getambassador.io/VERSION (Emissary's AmbassadorMapping).
    #[arg(
        long = "ambassador-api-version",
        default_value = "getambassador.io/v2",
        value_name = "GROUP/VERSION"
    )]
    pub ambassador_api_version: String,

    /// API version of AWS App Mesh's VirtualService, VirtualRouter and VirtualNode
    /// (appmesh.k8s.aws).
    #[arg(
        long = "appmesh-crd-version",
        default_value = "v1beta2",
        value_name = "VERSION"
    )]
    pub appmesh_crd_version: String,

    /// Verify with AWS (ELBv2) that an ALB canary's load balancer routes the weight a step set
    /// before the step completes (`weights.verified`, `status.alb`, `status.albs`), as Argo
    /// does. AWS is reached through the SDK's default chain: `AWS_REGION`, credentials from
    /// the environment, web identity (IRSA), profiles or instance metadata, and
    /// `AWS_ENDPOINT_URL` when set.
    #[arg(
        long = "aws-verify-target-group",
        visible_alias = "alb-verify-weight",
        action = ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub aws_verify_target_group: bool,

    /// Config rollouts: for a Rollout annotated `rollouts.sluice.dev/config-rollout: "true"`,
    /// a change of a ConfigMap or Secret its pod template references is a new revision whose
    /// pods read an immutable copy of the new content (docs/config-rollouts.md). Off by
    /// default: it needs RBAC to read, watch, create and patch ConfigMaps and Secrets (the
    /// chart's `controller.configRollouts`). Off, such a Rollout rolls out as under Argo.
    #[arg(
        long = "config-rollouts",
        action = ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub config_rollouts: bool,

    #[command(flatten)]
    pub client: ClientFlags,

    #[command(flatten)]
    pub argo: ArgoFlags,
}

/// Argo's levels are logrus's, in any case; `warning`, `fatal` and `panic` have no level of
/// their own here.
fn parse_log_level(s: &str) -> Result<String, String> {
    let level = match s.to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "info" => "info",
        "warn" | "warning" => "warn",
        "error" | "fatal" | "panic" => "error",
        _ => return Err(format!("not a valid logrus Level: {s:?}")),
    };
    Ok(level.to_string())
}

/// `json` in any case is JSON; anything else, the empty default included, is text.
fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    Ok(if s.eq_ignore_ascii_case("json") {
        LogFormat::Json
    } else {
        LogFormat::Text
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl Default for Args {
    /// Every flag at its default, as if none was given.
    fn default() -> Self {
        Args::parse_from(["sluice-controller"])
    }
}

impl Args {
    /// The API versions of the router kinds, from the flags.
    pub fn router_versions(&self) -> sluice_routers::kinds::ApiVersions {
        sluice_routers::kinds::ApiVersions {
            istio: self.istio_api_version.clone(),
            smi: self.traffic_split_api_version.clone(),
            traefik_group: self.traefik_api_group.clone(),
            ambassador: self
                .ambassador_api_version
                .rsplit_once('/')
                .map_or("v2", |(_, v)| v)
                .to_string(),
            ambassador_x: self
                .ambassador_api_version
                .starts_with("x.getambassador.io/"),
            appmesh: self.appmesh_crd_version.clone(),
            // From `argo-rollouts-config`, once it is read.
            plugin_binaries: Default::default(),
            aws_verify_target_group: self.aws_verify_target_group,
            alb_tag_key_resource_id: self
                .argo
                .alb_tag_key_resource_id
                .clone()
                .filter(|k| !k.is_empty())
                .unwrap_or_else(|| "ingress.k8s.aws/resource".into()),
            target_group_binding_api_version: self
                .argo
                .aws_target_group_binding_api_version
                .clone()
                .filter(|v| v.contains('/'))
                .unwrap_or_else(|| "elbv2.k8s.aws/v1beta1".into()),
        }
    }

    /// The engine's settings from the flags.
    pub fn engine_settings(&self) -> sluice_engine::Settings {
        sluice_engine::Settings {
            status_write_interval: self.status_write_interval,
        }
    }

    pub fn resync(&self) -> Duration {
        Duration::from_secs(self.rollout_resync.max(1))
    }

    /// The leader Lease's name: the flag, or the name Argo Rollouts 1.10 campaigns for with
    /// the same instance id (Argo's lock name, suffixed `-<instance id>` when there is one).
    pub fn lease_name(&self) -> String {
        match (&self.leader_election_lease_name, self.instance_id.as_str()) {
            (Some(name), _) => name.clone(),
            (None, "") => DEFAULT_LEASE_NAME.to_string(),
            (None, id) => format!("{DEFAULT_LEASE_NAME}-{id}"),
        }
    }

    /// The guard Lease's name, with an instance id and no --leader-election-lease-name: the
    /// name Argo Rollouts 1.9 campaigns for whatever its instance id, so that a 1.9 controller
    /// of this instance (it cannot be told apart from one of another) never leads beside us.
    pub fn guard_lease_name(&self) -> Option<String> {
        (self.leader_election_lease_name.is_none() && !self.instance_id.is_empty())
            .then(|| DEFAULT_LEASE_NAME.to_string())
    }

    /// The Lease's namespace: the flag, $POD_NAMESPACE, the service account's namespace file,
    /// then `argo-rollouts`.
    pub fn lease_namespace(&self) -> String {
        let from_file = || std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE).ok();
        self.leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .or_else(from_file)
            .map(|ns| ns.trim().to_string())
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| DEFAULT_LEASE_NAMESPACE.to_string())
    }

    /// The identity in the Lease: the flag, or `<hostname>_<uuid>` as client-go makes it.
    pub fn lease_identity(&self) -> String {
        self.leader_election_identity
            .clone()
            .unwrap_or_else(|| format!("{}_{}", hostname(), uuid::Uuid::new_v4()))
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "sluice-controller".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn flags_parse_with_argo_names_and_defaults() {
        Args::command().debug_assert();
        let a = Args::parse_from(["sluice-controller"]);
        assert_eq!(a.rollout_resync, 900);
        assert_eq!(a.rollout_threads, 10);
        assert_eq!(a.analysis_threads, 30);
        assert_eq!(a.instance_id, "");
        assert!(a.leader_elect);
        assert_eq!(a.leader_election_lease_duration, Duration::from_secs(15));
        assert_eq!(a.leader_election_renew_deadline, Duration::from_secs(10));
        assert_eq!(a.leader_election_retry_period, Duration::from_secs(2));
        assert_eq!(a.healthz_port, 8080);
        assert_eq!(a.metrics_port, 8090);
        assert_eq!(a.qps, 40.0);
        assert_eq!(a.burst, 80);
        assert_eq!(a.lease_name(), "argo-rollouts-controller-lock");
        assert_eq!(a.guard_lease_name(), None);
        let a = Args::parse_from([
            "sluice-controller",
            "--namespaced",
            "--namespace",
            "team-a",
            "--instance-id",
            "e2e",
            "--logformat",
            "json",
            "--loglevel",
            "debug",
        ]);
        assert!(a.namespaced);
        assert_eq!(a.namespace.as_deref(), Some("team-a"));
        assert_eq!(a.logformat, LogFormat::Json);
        assert_eq!(a.instance_id, "e2e");
        assert_eq!(a.lease_name(), "argo-rollouts-controller-lock-e2e");
        assert_eq!(
            a.guard_lease_name().as_deref(),
            Some("argo-rollouts-controller-lock")
        );
    }

    #[test]
    fn leader_election_flags_take_go_durations_and_bool_values() {
        let a = Args::parse_from([
            "sluice-controller",
            "--leader-elect=false",
            "--leader-election-lease-duration",
            "1m30s",
            "--leader-election-renew-deadline=500ms",
            "--leader-election-retry-period",
            "0.2s",
            "--leader-election-lease-name",
            "mine",
            "--leader-election-namespace",
            "ops",
            "--leader-election-identity",
            "me",
        ]);
        assert!(!a.leader_elect);
        assert_eq!(a.leader_election_lease_duration, Duration::from_secs(90));
        assert_eq!(a.leader_election_renew_deadline, Duration::from_millis(500));
        assert_eq!(a.leader_election_retry_period, Duration::from_millis(200));
        assert_eq!(a.lease_name(), "mine");
        assert_eq!(a.guard_lease_name(), None);
        assert_eq!(a.lease_namespace(), "ops");
        assert_eq!(a.lease_identity(), "me");
        assert!(Args::parse_from(["sluice-controller", "--leader-elect"]).leader_elect);
        assert!(
            Args::try_parse_from(["sluice-controller", "--leader-election-retry-period", "2"])
                .is_err(),
            "a duration needs a unit, as in Go"
        );
    }

    #[test]
    fn both_spellings_of_the_metrics_port_are_accepted() {
        let a = Args::parse_from(["sluice-controller", "--metricsport", "9000"]);
        assert_eq!(a.metrics_port, 9000);
        let a = Args::parse_from([
            "sluice-controller",
            "--metricsPort",
            "0",
            "--healthzPort",
            "0",
            "--ports-file",
            "/tmp/p.json",
        ]);
        assert_eq!((a.metrics_port, a.healthz_port), (0, 0));
        assert_eq!(a.ports_file, Some(PathBuf::from("/tmp/p.json")));
    }

    #[test]
    fn default_identity_is_hostname_underscore_uuid() {
        let id = Args::default().lease_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(
            id,
            Args::default().lease_identity(),
            "unique per process start"
        );
    }

    #[test]
    fn help_documents_every_flag() {
        let mut cmd = Args::command();
        for arg in cmd.get_arguments() {
            if arg.get_id() == "help" || arg.get_id() == "version" {
                continue;
            }
            assert!(
                arg.get_help().is_some_and(|h| !h.to_string().is_empty()),
                "--{} has no help",
                arg.get_id()
            );
        }
        let help = cmd.render_long_help().to_string();
        for flag in [
            "--leader-elect",
            "--healthzPort",
            "--metricsPort",
            "--qps",
            "--burst",
        ] {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
    }
}
