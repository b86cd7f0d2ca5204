//! The flags of Argo Rollouts' `rollouts-controller` (1.9 and 1.10 have the same set) that have
//! no flag of Sluice's own: accepted with Argo's names, types and defaults, so that a Deployment
//! or a Helm values file written for Argo starts Sluice unchanged. Each says in `--help` what
//! Sluice does with it; one that names a feature Sluice does not have is logged at start, once,
//! as a warning naming the flag ([`ArgoFlags::warnings`]).

/// Flags Sluice takes from Argo Rollouts.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Other Argo Rollouts flags")]
pub struct ArgoFlags {
    /// Set the klog logging level. Sluice's Kubernetes client logs through the same logger:
    /// 0-1 warnings only, 2-3 info, 4-5 debug, 6 and more every request (trace).
    #[arg(
        long,
        default_value_t = 0,
        value_name = "LEVEL",
        allow_negative_numbers = true
    )]
    pub kloglevel: i32,

    /// Run only these controllers; as in Argo, the only one that may be named is `analysis`
    /// (only AnalysisRuns are reconciled). Default: all.
    #[arg(long, value_delimiter = ',', value_parser = ["analysis"], value_name = "LIST")]
    pub controllers: Vec<String>,

    /// Set the number of worker threads for the Experiment controller [Argo's default: 10].
    /// Not used: Sluice reconciles Experiments as they come; a warning is logged when given.
    #[arg(long = "experiment-threads", value_name = "N")]
    pub experiment_threads: Option<i64>,

    /// Set the number of worker threads for the Service controller [Argo's default: 10].
    /// Not used: Sluice manages a Rollout's Services within its reconcile (no Service
    /// controller); a warning is logged when given.
    #[arg(long = "service-threads", value_name = "N")]
    pub service_threads: Option<i64>,

    /// Set the number of worker threads for the Ingress controller [Argo's default: 10].
    /// Not used: Sluice edits Ingresses within a Rollout's reconcile; a warning is logged when
    /// given.
    #[arg(long = "ingress-threads", value_name = "N")]
    pub ingress_threads: Option<i64>,

    /// Set the number of worker threads for the Ephemeral Metadata reconciler [Argo's default:
    /// 10]. Not used: Sluice relabels pods within a Rollout's reconcile; a warning is logged when
    /// given.
    #[arg(long = "ephemeral-metadata-threads", value_name = "N")]
    pub ephemeral_metadata_threads: Option<i64>,

    /// Set the number of retries to update pod Ephemeral Metadata [Argo's default: 3]. Not
    /// used: a pod whose relabelling failed is retried at the next reconcile; a warning is logged
    /// when given.
    #[arg(long = "ephemeral-metadata-update-pod-retries", value_name = "N")]
    pub ephemeral_metadata_update_pod_retries: Option<i64>,

    /// Set the default AWS TargetGroupBinding apiVersion that controller uses when verifying
    /// target group weights [default: elbv2.k8s.aws/v1beta1].
    #[arg(
        long = "aws-target-group-binding-api-version",
        value_name = "GROUP/VERSION"
    )]
    pub aws_target_group_binding_api_version: Option<String>,

    /// Set the default AWS LoadBalancer tag key for resource ID that controller uses when
    /// verifying target group weights [default: ingress.k8s.aws/resource].
    #[arg(long = "alb-tag-key-resource-id", value_name = "KEY")]
    pub alb_tag_key_resource_id: Option<String>,

    /// Set the default Traefik apiVersion that controller uses [Argo's default:
    /// traefik.io/v1alpha1]. Only its version counts, as in Argo (the group is
    /// --traefik-api-group); Sluice edits TraefikService v1alpha1: another version is logged
    /// as a warning.
    #[arg(long = "traefik-api-version", value_name = "GROUP/VERSION")]
    pub traefik_api_version: Option<String>,

    /// Set the Ingress apiVersion that the controller should use [Argo's default: discovered].
    /// Sluice uses networking.k8s.io/v1 (served since Kubernetes 1.19); another value is logged
    /// as a warning.
    #[arg(long = "ingress-api-version", value_name = "GROUP/VERSION")]
    pub ingress_api_version: Option<String>,

    /// Defines all the ingress class annotations that the alb ingress controller operates on
    /// [Argo's default: alb]. Not used: Sluice has no Ingress controller cleaning up after
    /// deleted Rollouts; a warning is logged when given.
    #[arg(long = "alb-ingress-classes", value_name = "CLASS", action = clap::ArgAction::Append)]
    pub alb_ingress_classes: Vec<String>,

    /// Defines all the ingress class annotations that the nginx ingress controller operates on
    /// [Argo's default: nginx]. Not used, as the flag above; a warning is logged when given.
    #[arg(long = "nginx-ingress-classes", value_name = "CLASS", action = clap::ArgAction::Append)]
    pub nginx_ingress_classes: Vec<String>,

    /// Allows rollouts controller to pull notification config from the namespace that the
    /// rollout resource is in. A Rollout's notifications then go out under its namespace's
    /// `argo-rollouts-notification-configmap` and Secret as well as the controller's.
    #[arg(
        long = "self-service-notification-enabled",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub self_service_notification_enabled: bool,

    /// Enable pprof profiling on controller by providing a server address. Sluice has no
    /// pprof endpoint: a warning is logged when an address is given.
    #[arg(
        long = "enable-pprof-address",
        default_value = "",
        value_name = "ADDRESS"
    )]
    pub enable_pprof_address: String,
}

impl ArgoFlags {
    /// Whether only the AnalysisRun controller runs (`--controllers=analysis`).
    pub fn analysis_only(&self) -> bool {
        self.controllers.iter().any(|c| c == "analysis")
    }

    /// The tracing directives for the Kubernetes client's crates at `--kloglevel`.
    pub fn client_log_level(&self) -> &'static str {
        match self.kloglevel {
            i32::MIN..=1 => "warn",
            2..=3 => "info",
            4..=5 => "debug",
            _ => "trace",
        }
    }

    /// One warning per flag that names something Sluice does not do.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut not_used = |flag: &str, why: &str| {
            out.push(format!(
                "--{flag} is accepted for compatibility but has no effect: {why}"
            ));
        };
        let threads = [
            (
                "experiment-threads",
                self.experiment_threads,
                "Experiments are reconciled without a fixed worker count",
            ),
            (
                "service-threads",
                self.service_threads,
                "Sluice has no separate Service controller (a Rollout's Services are managed in its reconcile)",
            ),
            (
                "ingress-threads",
                self.ingress_threads,
                "Sluice has no separate Ingress controller (Ingresses are edited in a Rollout's reconcile)",
            ),
            (
                "ephemeral-metadata-threads",
                self.ephemeral_metadata_threads,
                "pods are relabelled in a Rollout's reconcile",
            ),
            (
                "ephemeral-metadata-update-pod-retries",
                self.ephemeral_metadata_update_pod_retries,
                "a failed pod relabelling is retried at the next reconcile",
            ),
        ];
        for (flag, value, why) in threads {
            if value.is_some() {
                not_used(flag, why);
            }
        }
        if !self.alb_ingress_classes.is_empty() {
            not_used(
                "alb-ingress-classes",
                "Sluice has no Ingress controller cleaning up after deleted Rollouts",
            );
        }
        if !self.nginx_ingress_classes.is_empty() {
            not_used(
                "nginx-ingress-classes",
                "Sluice has no Ingress controller cleaning up after deleted Rollouts",
            );
        }
        if !self.enable_pprof_address.is_empty() {
            not_used("enable-pprof-address", "Sluice has no pprof endpoint");
        }
        if let Some(version) = &self.traefik_api_version {
            let v = version.rsplit('/').next().unwrap_or_default();
            if v != "v1alpha1" {
                out.push(format!(
                    "--traefik-api-version={version}: Sluice edits TraefikService v1alpha1, not {v}"
                ));
            }
        }
        if let Some(version) = &self.ingress_api_version
            && !version.is_empty()
            && version != "networking.k8s.io/v1"
        {
            out.push(format!(
                "--ingress-api-version={version}: Sluice uses networking.k8s.io/v1 Ingresses"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::Args;

    /// Every flag of Argo Rollouts 1.9 / 1.10's controller, as `--help` lists it there, with a
    /// value of its type.
    pub const EVERY_ARGO_FLAG: &[&str] = &[
        "--rollout-resync=900",
        "--namespaced=false",
        "--loglevel=info",
        "--logformat=text",
        "--kloglevel=0",
        "--metricsPort=8090",
        "--metricsport=8090",
        "--healthzPort=8080",
        "--instance-id=",
        "--qps=40",
        "--burst=80",
        "--rollout-threads=10",
        "--experiment-threads=10",
        "--analysis-threads=30",
        "--service-threads=10",
        "--ingress-threads=10",
        "--ephemeral-metadata-threads=10",
        "--ephemeral-metadata-update-pod-retries=3",
        "--aws-target-group-binding-api-version=elbv2.k8s.aws/v1beta1",
        "--alb-tag-key-resource-id=ingress.k8s.aws/resource",
        "--istio-api-version=v1alpha3",
        "--ambassador-api-version=getambassador.io/v2",
        "--traffic-split-api-version=v1alpha1",
        "--traefik-api-group=traefik.io",
        "--traefik-api-version=traefik.io/v1alpha1",
        "--ingress-api-version=networking.k8s.io/v1",
        "--appmesh-crd-version=v1beta2",
        "--alb-ingress-classes=alb",
        "--nginx-ingress-classes=nginx",
        "--alb-verify-weight=false",
        "--aws-verify-target-group=false",
        "--leader-elect=true",
        "--leader-election-lease-duration=15s",
        "--leader-election-renew-deadline=10s",
        "--leader-election-retry-period=2s",
        "--self-service-notification-enabled=false",
        "--controllers=analysis",
        "--enable-pprof-address=",
        // client-go's
        "--kubeconfig=/tmp/kubeconfig",
        "--context=ctx",
        "--cluster=c",
        "--user=u",
        "--namespace=ns",
        "--server=https://127.0.0.1:6443",
        "--token=t",
        "--as=jane",
        "--as-uid=1",
        "--as-group=ops",
        "--username=admin",
        "--password=pw",
        "--client-certificate=/tmp/cert",
        "--client-key=/tmp/key",
        "--certificate-authority=/tmp/ca",
        "--insecure-skip-tls-verify=false",
        "--tls-server-name=api",
        "--proxy-url=http://proxy:3128",
        "--disable-compression=false",
        "--request-timeout=0",
    ];

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("sluice-controller").chain(flags.iter().copied()))
    }

    #[test]
    fn every_argo_flag_is_accepted_at_once() {
        let a = parse(EVERY_ARGO_FLAG).unwrap();
        assert!(a.argo.analysis_only());
        let versions = a.router_versions();
        assert_eq!(versions.alb_tag_key_resource_id, "ingress.k8s.aws/resource");
        assert!(!versions.aws_verify_target_group);
        let custom = parse(&["--alb-tag-key-resource-id=k", "--aws-verify-target-group"]).unwrap();
        let versions = custom.router_versions();
        assert_eq!(versions.alb_tag_key_resource_id, "k");
        assert!(versions.aws_verify_target_group);
        assert_eq!(a.client.context.as_deref(), Some("ctx"));
        assert_eq!(a.argo.alb_ingress_classes, ["alb"]);
        assert_eq!(a.argo.experiment_threads, Some(10));
        // Each with a space instead of '=' too.
        let spaced: Vec<String> = EVERY_ARGO_FLAG
            .iter()
            .filter(|f| !f.ends_with('=') && !f.contains("=false") && !f.contains("=true"))
            .flat_map(|f| {
                let (k, v) = f.split_once('=').unwrap();
                [k.to_string(), v.to_string()]
            })
            .collect();
        let spaced: Vec<&str> = spaced.iter().map(String::as_str).collect();
        parse(&spaced).unwrap();
    }

    #[test]
    fn the_chart_default_args_parse() {
        // argo-helm's argo-rollouts chart renders these by default.
        let a = parse(&[
            "--healthzPort=8080",
            "--metricsport=8090",
            "--loglevel=info",
            "--logformat=text",
            "--kloglevel=0",
            "--leader-elect",
        ])
        .unwrap();
        assert!(a.argo.warnings().is_empty(), "{:?}", a.argo.warnings());
        assert_eq!(a.argo.client_log_level(), "warn");
    }

    #[test]
    fn flags_argo_also_refuses_are_refused() {
        for bad in [
            &["--no-such-flag"][..],
            &["--controllers=rollouts"],
            &["--kloglevel=loud"],
            &["--experiment-threads=many"],
            &["--loglevel=chatty"],
            &["--rollout-resync=soon"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn unsupported_features_warn_once_each_naming_the_flag() {
        let a = parse(EVERY_ARGO_FLAG).unwrap();
        let warnings = a.argo.warnings();
        for flag in [
            "--experiment-threads",
            "--service-threads",
            "--ingress-threads",
            "--ephemeral-metadata-threads",
            "--ephemeral-metadata-update-pod-retries",
            "--alb-ingress-classes",
            "--nginx-ingress-classes",
        ] {
            assert_eq!(
                warnings
                    .iter()
                    .filter(|w| w.starts_with(&format!("{flag} ")))
                    .count(),
                1,
                "{flag}: {warnings:#?}"
            );
        }
        // Values Sluice does use raise no warning.
        assert!(
            !warnings
                .iter()
                .any(|w| w.contains("traefik") || w.contains("ingress-api-version")),
            "{warnings:#?}"
        );
        let a = parse(&[
            "--traefik-api-version=traefik.io/v1beta1",
            "--ingress-api-version=extensions/v1beta1",
            "--self-service-notification-enabled",
            "--enable-pprof-address=:6060",
        ])
        .unwrap();
        // Self-service notifications are supported: no warning for them.
        assert!(a.argo.self_service_notification_enabled);
        assert_eq!(a.argo.warnings().len(), 3, "{:#?}", a.argo.warnings());
    }

    #[test]
    fn kloglevel_sets_the_client_log_level() {
        let level = |n: &str| parse(&["--kloglevel", n]).unwrap().argo.client_log_level();
        assert_eq!(level("0"), "warn");
        assert_eq!(level("2"), "info");
        assert_eq!(level("4"), "debug");
        assert_eq!(level("9"), "trace");
    }
}
