//! Sluice as a drop-in for Argo Rollouts' controller: the `sluice-controller` binary started with
//! exactly the arguments its Helm chart renders (with the chart's defaults and with a team's
//! values file), with those of `manifests/namespace-install.yaml` and `manifests/install.yaml`,
//! and with every flag of Argo's controller at once; each starts, and each namespaced one
//! reconciles a Rollout to Healthy. The chart is linted, rendered and installed with the real
//! `helm` (built once by `scripts/build-helm.sh`), and the controller's /metrics serves every
//! series Argo's Grafana dashboard reads and every Argo series with a meaning in Sluice.
//!
//! The cluster-wide argument sets (chart defaults, `install.yaml`) would reconcile every
//! namespace of the shared test cluster: they are started as a standby (the lease held by the
//! test), which shows that they start, serve and campaign; the namespaced sets show the same
//! binary and flags reconcile. Needs the local control plane (`scripts/cluster-up.sh`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use sluice_api::Rollout;
use sluice_testenv::harness::{TestEnv, TestNamespace, repo_root, wait_for};
use sluice_testenv::manifests::parse_documents;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::{Child, Command};

mod metric_names;
mod notification_values;

use metric_names::{
    argo_reference_names, dashboard_metric_names, not_served_on_purpose, served_names,
};

const TIMEOUT: Duration = Duration::from_secs(90);

/// Tests that use the default ports 8080 and 8090 (the arguments they run with do not name
/// others) take turns.
static DEFAULT_PORTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The `helm` binary, built once from its Go module (a few minutes the first time; the build
/// shows its progress on stderr).
fn helm() -> PathBuf {
    static HELM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    HELM.get_or_init(|| {
        let out = std::process::Command::new(repo_root().join("scripts/build-helm.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/build-helm.sh");
        assert!(out.status.success(), "building helm failed");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
    .clone()
}

fn run_helm(args: &[&str]) -> String {
    let out = std::process::Command::new(helm())
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("running helm");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "`helm {}` failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The controller container's args of the Deployment in `rendered`.
fn deployment_args(rendered: &str) -> Vec<String> {
    let docs = parse_documents(rendered).unwrap();
    // The controller's, not the dashboard's.
    let deployment = docs
        .iter()
        .find(|d| {
            d["kind"] == "Deployment"
                && d["spec"]["template"]["spec"]["containers"][0]["name"] == "argo-rollouts"
        })
        .expect("a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "argo-rollouts");
    container["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The test kubeconfig with the test namespace as its context's: what a pod's in-cluster
/// config gives the controller (its own namespace).
fn kubeconfig_for(env: &TestEnv, ns: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(env.kubeconfig_path()).unwrap();
    let mut kc: Value = parse_documents(&text).unwrap().remove(0);
    for ctx in kc["contexts"].as_array_mut().unwrap() {
        ctx["context"]["namespace"] = json!(ns);
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_string(&kc).unwrap()).unwrap();
    path
}

struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    /// Starts the binary with exactly `args`, in the environment a pod of the Deployment has:
    /// its namespace in `POD_NAMESPACE`, the cluster from the kubeconfig.
    fn start(args: &[String], ns: &str, kubeconfig: &Path, dir: &Path) -> Controller {
        let log = dir.join(format!("controller-{}.log", free_port()));
        let out = std::fs::File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_sluice-controller"))
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAMESPACE", ns)
            .env_remove("SLUICE_LOG")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .expect("starting sluice-controller");
        Controller { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// GET `path` on localhost:`port`; the status line and body.
async fn http_get(port: u16, path: &str) -> anyhow::Result<(String, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok((
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    ))
}

async fn wait_ready(controller: &Controller, healthz_port: u16) {
    let ready = wait_for("the controller to be ready", TIMEOUT, || async {
        let (status, _) = http_get(healthz_port, "/readyz").await?;
        anyhow::ensure!(status.contains(" 200"), "{status}");
        Ok(())
    })
    .await;
    assert!(ready.is_ok(), "{ready:?}\nlog:\n{}", controller.log());
}

fn rollout(name: &str) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.0"}]}
            },
            "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {"duration": 1}}]}}
        }
    })
    .to_string()
}

/// Creates a Rollout and waits until the controller has taken it to Healthy.
async fn reconciles_a_rollout(ns: &TestNamespace, name: &str, controller: &Controller) {
    ns.apply_yaml(&rollout(name)).await.unwrap();
    let api: Api<Rollout> = ns.api();
    let healthy = wait_for(
        &format!("rollout {name} to be Healthy"),
        TIMEOUT,
        || async {
            let ro = api.get(name).await?;
            let phase = ro
                .status
                .as_ref()
                .and_then(|s| s.phase.as_ref())
                .map(|p| p.to_string());
            anyhow::ensure!(phase.as_deref() == Some("Healthy"), "{phase:?}");
            Ok(())
        },
    )
    .await;
    assert!(healthy.is_ok(), "{healthy:?}\nlog:\n{}", controller.log());
}

#[test]
fn chart_lints_and_renders_with_its_defaults_and_a_team_values_file() {
    run_helm(&["lint", "charts/sluice"]);
    run_helm(&[
        "lint",
        "charts/sluice",
        "-f",
        "charts/sluice/ci/team-values.yaml",
    ]);
    for values in [None, Some("charts/sluice/ci/team-values.yaml")] {
        let mut args = vec![
            "template",
            "argo-rollouts",
            "charts/sluice",
            "-n",
            "argo-rollouts",
        ];
        if let Some(v) = values {
            args.extend(["-f", v]);
        }
        let rendered = run_helm(&args);
        let docs = parse_documents(&rendered).unwrap();
        let names: Vec<(String, String)> = docs
            .iter()
            .map(|d| {
                (
                    d["kind"].as_str().unwrap().to_string(),
                    d["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        for (kind, name) in [
            ("Deployment", "argo-rollouts"),
            ("ServiceAccount", "argo-rollouts"),
            ("ClusterRole", "argo-rollouts"),
            ("ClusterRoleBinding", "argo-rollouts"),
            ("ClusterRole", "argo-rollouts-aggregate-to-admin"),
            ("ClusterRole", "argo-rollouts-aggregate-to-edit"),
            ("ClusterRole", "argo-rollouts-aggregate-to-view"),
            ("ConfigMap", "argo-rollouts-config"),
            ("CustomResourceDefinition", "rollouts.argoproj.io"),
        ] {
            assert!(
                names.iter().any(|(k, n)| k == kind && n == name),
                "{values:?}: no {kind} {name} in {names:?}"
            );
        }
        if values.is_none() {
            notification_values::check_defaults(&docs);
        }
        let args = deployment_args(&rendered);
        let parsed = <sluice_controller::Args as clap::Parser>::try_parse_from(
            std::iter::once("sluice-controller".to_string()).chain(args.iter().cloned()),
        )
        .unwrap_or_else(|e| panic!("{values:?}: {args:?}: {e}"));
        assert!(
            parsed.argo.warnings().is_empty(),
            "{:?}",
            parsed.argo.warnings()
        );
        if values.is_some() {
            notification_values::check_team_values(&docs);
            assert!(
                names
                    .iter()
                    .any(|(k, n)| k == "ServiceMonitor" && n == "argo-rollouts")
            );
            assert_eq!(parsed.rollout_threads, 20);
            assert_eq!(parsed.argo.kloglevel, 2);
            check_dashboard(&docs);
        } else {
            assert!(
                !names.iter().any(|(_, n)| n.ends_with("-dashboard")),
                "the dashboard is off by default: {names:?}"
            );
        }
    }
}

/// `dashboard.enabled` (argo-helm's key) deploys Sluice's dashboard, with logins, under the
/// same ClusterRole as manifests/dashboard.
fn check_dashboard(docs: &[serde_json::Value]) {
    let find = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == "argo-rollouts-dashboard")
            .unwrap_or_else(|| panic!("no {kind} argo-rollouts-dashboard"))
    };
    let container = &find("Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"][0], "/usr/local/bin/kubectl-sluice");
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(args.contains(&"--login=token"), "{args:?}");
    find("Service");
    let shipped =
        std::fs::read_to_string(repo_root().join("manifests/dashboard/cluster-role.yaml")).unwrap();
    let shipped = &parse_documents(&shipped).unwrap()[0];
    assert_eq!(find("ClusterRole")["rules"], shipped["rules"]);
}

#[tokio::test]
async fn chart_installs_into_the_control_plane() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "helm-install").await.unwrap();
    let kubeconfig = env.kubeconfig_path().to_str().unwrap().to_string();
    let release = format!("sluice-{}", &ns.name()[ns.name().len().saturating_sub(8)..]);
    // The CRDs are the test cluster's already; cluster-scoped roles get the release's prefix.
    let out = run_helm(&[
        "install",
        &release,
        "charts/sluice",
        "--kubeconfig",
        &kubeconfig,
        "-n",
        ns.name(),
        "-f",
        "charts/sluice/ci/team-values.yaml",
        "--set",
        "installCRDs=false,clusterInstall=false,controller.metrics.serviceMonitor.enabled=false",
    ]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    let d = deployments
        .get(&format!("{release}-argo-rollouts"))
        .await
        .unwrap();
    let args = d.spec.unwrap().template.spec.unwrap().containers[0]
        .args
        .clone()
        .unwrap();
    assert!(args.contains(&"--namespaced".to_string()), "{args:?}");
    let status = run_helm(&[
        "status",
        &release,
        "--kubeconfig",
        &kubeconfig,
        "-n",
        ns.name(),
    ]);
    assert!(status.contains("STATUS: deployed"), "{status}");
    run_helm(&[
        "uninstall",
        &release,
        "--kubeconfig",
        &kubeconfig,
        "-n",
        ns.name(),
    ]);
}

#[tokio::test]
async fn controller_runs_with_the_charts_args_and_serves_argos_metrics() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "chart-args").await.unwrap();
    let dir = tempdir(ns.name());
    let (metrics, healthz) = (free_port(), free_port());
    let rendered = run_helm(&[
        "template",
        "argo-rollouts",
        "charts/sluice",
        "-n",
        ns.name(),
        "-f",
        "charts/sluice/ci/team-values.yaml",
        "--set",
        &format!(
            "clusterInstall=false,controller.containerPorts.metrics={metrics},controller.containerPorts.healthz={healthz}"
        ),
    ]);
    let args = deployment_args(&rendered);
    assert!(args.contains(&"--namespaced".to_string()), "{args:?}");
    let controller = Controller::start(
        &args,
        ns.name(),
        &kubeconfig_for(&env, ns.name(), &dir),
        &dir,
    );
    wait_ready(&controller, healthz).await;
    reconciles_a_rollout(&ns, "chart-args", &controller).await;

    // The dashboard's metrics, and Argo's, from this real controller.
    let (_, exposition) = http_get(metrics, "/metrics").await.unwrap();
    let served = served_names(&exposition);
    let missing: Vec<String> = dashboard_metric_names()
        .into_iter()
        .filter(|n| !served.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard reads {missing:?}, not served:\n{exposition}"
    );
    let mut table = String::from("argo v1.9.1 name | sluice\n");
    let mut unserved = Vec::new();
    let mut argo: Vec<String> = argo_reference_names("argo-v1.9.1-metric-names.txt");
    argo.extend(argo_reference_names(
        "argo-v1.9.1-metric-names-one-rollout.txt",
    ));
    argo.sort();
    argo.dedup();
    for name in &argo {
        let state = if served.contains(name) {
            "served".to_string()
        } else if let Some(why) = not_served_on_purpose(name) {
            format!("not served: {why}")
        } else {
            unserved.push(name.clone());
            "MISSING".to_string()
        };
        if !name.starts_with("go_") || name == "go_memstats_heap_alloc_bytes" {
            table.push_str(&format!("{name} | {state}\n"));
        }
    }
    println!("{table}");
    assert!(
        unserved.is_empty(),
        "Argo serves {unserved:?}, Sluice does not"
    );
    assert!(
        exposition.contains(r#"rollout_info{namespace=""#)
            && exposition.contains(r#"name="chart-args""#),
        "{exposition}"
    );
    assert!(exposition.contains(r#"workqueue_adds_total{name="Rollouts"}"#));
    controller.stop().await;
}

#[tokio::test]
async fn controller_runs_with_namespace_install_yamls_args() {
    let _ports = DEFAULT_PORTS.lock().await;
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "ns-install-args")
        .await
        .unwrap();
    let dir = tempdir(ns.name());
    let rendered =
        std::fs::read_to_string(repo_root().join("manifests/namespace-install.yaml")).unwrap();
    let args = deployment_args(&rendered);
    assert_eq!(args, ["--namespaced"]);
    let controller = Controller::start(
        &args,
        ns.name(),
        &kubeconfig_for(&env, ns.name(), &dir),
        &dir,
    );
    wait_ready(&controller, 8080).await;
    reconciles_a_rollout(&ns, "ns-install-args", &controller).await;
    controller.stop().await;
}

/// The cluster-wide argument sets start, serve and campaign for the lease in their namespace;
/// the test holds that lease, so they stand by and write nothing in the shared cluster.
#[tokio::test]
async fn cluster_wide_args_of_the_chart_and_install_yaml_start_as_a_standby() {
    let _ports = DEFAULT_PORTS.lock().await;
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "cluster-args").await.unwrap();
    let dir = tempdir(ns.name());
    let leases: Api<Lease> = ns.api();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "argo-rollouts-controller-lock"},
        "spec": {"holderIdentity": "the-test", "leaseDurationSeconds": 3600,
                 "acquireTime": now, "renewTime": now}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();

    let chart = deployment_args(&run_helm(&["template", "argo-rollouts", "charts/sluice"]));
    let install = deployment_args(
        &std::fs::read_to_string(repo_root().join("manifests/install.yaml")).unwrap(),
    );
    assert!(install.is_empty(), "{install:?}");
    for args in [chart, install] {
        let controller = Controller::start(
            &args,
            ns.name(),
            &kubeconfig_for(&env, ns.name(), &dir),
            &dir,
        );
        wait_ready(&controller, 8080).await;
        let (status, body) = http_get(8090, "/metrics").await.unwrap();
        assert!(
            status.contains(" 200") && body.contains("sluice_leader 0"),
            "{args:?}: {body}"
        );
        let holder = leases
            .get("argo-rollouts-controller-lock")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity;
        assert_eq!(holder.as_deref(), Some("the-test"));
        controller.stop().await;
    }
}

#[tokio::test]
async fn controller_runs_with_every_argo_flag_at_once() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "every-flag").await.unwrap();
    let dir = tempdir(ns.name());
    // A kubeconfig whose every entry leads nowhere: only the override flags reach the cluster.
    let real: Value = parse_documents(&std::fs::read_to_string(env.kubeconfig_path()).unwrap())
        .unwrap()
        .remove(0);
    let server = real["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_string();
    let token = real["users"][0]["user"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let decoy = dir.join("decoy-kubeconfig");
    std::fs::write(
        &decoy,
        json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "elsewhere",
            "clusters": [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "nobody", "user": {"token": "wrong"}}],
            "contexts": [
                {"name": "elsewhere", "context": {"cluster": "nowhere", "user": "nobody", "namespace": "default"}},
                {"name": "chosen", "context": {"cluster": "nowhere", "user": "nobody"}}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let (metrics, healthz) = (free_port(), free_port());
    let args: Vec<String> = [
        "--rollout-resync=900",
        "--namespaced=true",
        "--loglevel=info",
        "--logformat=json",
        "--kloglevel=0",
        &format!("--metricsPort={metrics}"),
        &format!("--metricsport={metrics}"),
        &format!("--healthzPort={healthz}"),
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
        "--enable-pprof-address=",
        // client-go's: the context and the overrides that make it reach the cluster.
        &format!("--kubeconfig={}", decoy.display()),
        "--context=chosen",
        "--cluster=nowhere",
        "--user=nobody",
        &format!("--namespace={}", ns.name()),
        &format!("--server={server}"),
        &format!("--token={token}"),
        "--as=",
        "--as-uid=",
        "--as-group=",
        "--username=",
        "--password=",
        "--client-certificate=",
        "--client-key=",
        "--certificate-authority=",
        "--insecure-skip-tls-verify=true",
        "--tls-server-name=",
        "--proxy-url=",
        "--disable-compression=true",
        "--request-timeout=5m",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let controller = Controller::start(&args, ns.name(), Path::new("/nonexistent"), &dir);
    wait_ready(&controller, healthz).await;
    reconciles_a_rollout(&ns, "every-flag", &controller).await;
    let log = controller.log();
    for flag in [
        "--experiment-threads",
        "--service-threads",
        "--alb-ingress-classes",
    ] {
        assert_eq!(
            log.matches(&format!("{flag} is accepted")).count(),
            1,
            "{flag}:\n{log}"
        );
    }
    controller.stop().await;
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-drop-in-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `--controllers=analysis`, as in Argo: AnalysisRuns are reconciled, Rollouts are not.
#[tokio::test]
async fn controllers_analysis_runs_only_the_analysis_run_controller() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "analysis-only").await.unwrap();
    let dir = tempdir(ns.name());
    let healthz = free_port();
    let args: Vec<String> = [
        "--namespaced",
        "--controllers=analysis",
        "--leader-elect=false",
        &format!("--healthzPort={healthz}"),
        "--metricsPort=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let controller = Controller::start(
        &args,
        ns.name(),
        &kubeconfig_for(&env, ns.name(), &dir),
        &dir,
    );
    wait_ready(&controller, healthz).await;
    ns.apply_yaml(&rollout("ignored")).await.unwrap();
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisRun",
            "metadata": {"name": "terminated"},
            "spec": {
                "terminate": true,
                "metrics": [{"name": "m", "provider": {"web": {"url": "http://127.0.0.1:1"}}}]
            }
        })
        .to_string(),
    )
    .await
    .unwrap();
    let runs: Api<sluice_api::analysis::AnalysisRun> = ns.api();
    let done = wait_for("the AnalysisRun to be reconciled", TIMEOUT, || async {
        let run = runs.get("terminated").await?;
        let phase = run
            .status
            .and_then(|s| s.phase)
            .map(|p| p.as_str().to_string());
        anyhow::ensure!(phase.is_some(), "no phase yet");
        Ok(phase)
    })
    .await;
    assert!(done.is_ok(), "{done:?}\nlog:\n{}", controller.log());
    let rollouts: Api<Rollout> = ns.api();
    let ro = rollouts.get("ignored").await.unwrap();
    assert!(
        ro.status.is_none(),
        "the Rollout was reconciled: {:?}",
        ro.status
    );
    controller.stop().await;
}
