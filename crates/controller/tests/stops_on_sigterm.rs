//! The `sluice-controller` process stops within 5 s of SIGTERM in every state it can be in:
//! its CRDs not served, the API server unreachable, its watches in back-off, a write hanging in
//! flight. Started before its CRDs are served, it says what it waits for and picks them up
//! when they appear.
//!
//! The real binary runs against the local control plane, through a proxy whose rules put it
//! in each state. Needs the local control plane (`scripts/cluster-up.sh`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use sluice_api::Rollout;
use sluice_testenv::fault_proxy::{Action, FaultProxy, Faults, Requests, Rule};
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for, wait_for_object};
use tokio::process::{Child, Command};

/// What the issue, and a user's `kill`, may expect.
const STOP_WITHIN: Duration = Duration::from_secs(5);
const TIMEOUT: Duration = Duration::from_secs(60);

struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    /// Starts the binary for one namespace, with leader election (so that stopping also
    /// releases a lease), logging to a file in `dir`.
    fn start(dir: &Path, kubeconfig: &Path, namespace: &str) -> Controller {
        let log = dir.join("controller.log");
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice-controller"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespaced", "--namespace", namespace])
            .args(["--leader-election-namespace", namespace])
            .args(["--leader-election-lease-name", "sigterm-test"])
            .args(["--healthzPort", "0", "--metricsPort", "0"])
            .env("SLUICE_LOG", "info,kube=warn")
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

    async fn wait_for_log(&self, what: &str) {
        let found = wait_for(&format!("the log line {what:?}"), TIMEOUT, || async {
            anyhow::ensure!(self.log().contains(what), "not logged yet");
            Ok(())
        })
        .await;
        assert!(found.is_ok(), "{found:?}\nlog:\n{}", self.log());
    }

    /// Sends SIGTERM and returns how long the process took to exit; it must exit 0.
    async fn terminate(mut self) -> Duration {
        let pid = self.child.id().expect("still running");
        let sent = Instant::now();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let exited = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
        let took = sent.elapsed();
        let log = self.log();
        let status = exited
            .unwrap_or_else(|_| panic!("still running 30 s after SIGTERM\nlog:\n{log}"))
            .expect("wait");
        assert!(
            took <= STOP_WITHIN,
            "took {took:?} to stop (at most {STOP_WITHIN:?})\nlog:\n{log}"
        );
        assert!(status.success(), "exit status {status}\nlog:\n{log}");
        took
    }
}

/// A kubeconfig for the proxy (plain HTTP, the proxy adds the credentials).
fn proxy_kubeconfig(dir: &Path, proxy: &FaultProxy) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: \
             http://{}\nusers:\n- name: proxy\n  user: {{}}\ncontexts:\n- name: proxy\n  \
             context:\n    cluster: proxy\n    user: proxy\ncurrent-context: proxy\n",
            proxy.addr()
        ),
    )
    .expect("kubeconfig");
    path
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn argo_kinds_not_served() -> Rule {
    Rule {
        path_prefix: "/apis/argoproj.io".into(),
        requests: Requests::All,
        action: Action::Status(404),
    }
}

const ROLLOUT: &str = r#"
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: example.invalid/web:1
  strategy:
    canary: {}
"#;

#[tokio::test]
async fn waits_for_its_crds_then_picks_them_up_and_stops_on_sigterm() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "sigterm-crds").await.unwrap();
    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .unwrap();
    proxy.set_rules(vec![argo_kinds_not_served()]);
    let dir = scratch_dir("sigterm-crds");
    let controller = Controller::start(&dir, &proxy_kubeconfig(&dir, &proxy), ns.name());
    controller
        .wait_for_log("waiting for the CRDs to be served")
        .await;
    assert!(controller.log().contains("rollouts.argoproj.io"));

    // The CRDs "appear": the controller starts and reconciles a Rollout.
    ns.apply_yaml(ROLLOUT).await.unwrap();
    proxy.set_rules(vec![]);
    controller
        .wait_for_log("the watched kinds are served now")
        .await;
    wait_for_object(
        &ns.api::<Rollout>(),
        "web",
        TIMEOUT,
        "the Rollout to be reconciled",
        |ro| {
            ro.status
                .as_ref()
                .is_some_and(|s| s.observed_generation.is_some())
        },
    )
    .await
    .unwrap();
    controller.terminate().await;

    // Started and stopped while still waiting.
    proxy.set_rules(vec![argo_kinds_not_served()]);
    let controller = Controller::start(&dir, &proxy_kubeconfig(&dir, &proxy), ns.name());
    controller
        .wait_for_log("waiting for the CRDs to be served")
        .await;
    controller.terminate().await;
}

#[tokio::test]
async fn stops_on_sigterm_while_the_api_server_is_unreachable() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let dir = scratch_dir("sigterm-unreachable");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: none\n  cluster:\n    server: \
             http://127.0.0.1:{port}\nusers:\n- name: none\n  user: {{}}\ncontexts:\n- name: \
             none\n  context:\n    cluster: none\n    user: none\ncurrent-context: none\n"
        ),
    )
    .unwrap();
    let controller = Controller::start(&dir, &kubeconfig, "default");
    controller
        .wait_for_log("waiting for the API server to answer")
        .await;
    controller.terminate().await;

    // And when the API server never answers at all (requests hang).
    let env = TestEnv::shared().await.unwrap();
    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .unwrap();
    proxy.set_rules(vec![Rule {
        path_prefix: "/".into(),
        requests: Requests::All,
        action: Action::Hang,
    }]);
    let controller = Controller::start(&dir, &proxy_kubeconfig(&dir, &proxy), "default");
    tokio::time::sleep(Duration::from_secs(2)).await;
    controller.terminate().await;
}

#[tokio::test]
async fn stops_on_sigterm_while_its_watches_back_off() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "sigterm-watch").await.unwrap();
    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .unwrap();
    let dir = scratch_dir("sigterm-watch");
    let controller = Controller::start(&dir, &proxy_kubeconfig(&dir, &proxy), ns.name());
    controller.wait_for_log("caches synced").await;
    // Every watch and list of the controller's kinds fails from now on.
    proxy.set_rules(vec![
        Rule {
            path_prefix: "/apis/argoproj.io".into(),
            requests: Requests::All,
            action: Action::Status(500),
        },
        Rule {
            path_prefix: "/apis/apps".into(),
            requests: Requests::All,
            action: Action::Status(500),
        },
    ]);
    let before = proxy.requests();
    wait_for("the watches to retry", TIMEOUT, || async {
        anyhow::ensure!(
            proxy.requests() >= before + 6,
            "{} requests",
            proxy.requests()
        );
        Ok(())
    })
    .await
    .unwrap();
    controller.terminate().await;
}

#[tokio::test]
async fn stops_on_sigterm_with_a_write_hanging_in_flight() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "sigterm-write").await.unwrap();
    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .unwrap();
    // Writes to the namespace's Rollouts and ReplicaSets never answer; the Lease still works.
    let prefix = |group: &str, resource: &str| Rule {
        path_prefix: format!("/apis/{group}/namespaces/{}/{resource}", ns.name()),
        requests: Requests::Writes,
        action: Action::Hang,
    };
    proxy.set_rules(vec![
        prefix("argoproj.io/v1alpha1", "rollouts"),
        prefix("apps/v1", "replicasets"),
    ]);
    let dir = scratch_dir("sigterm-write");
    let controller = Controller::start(&dir, &proxy_kubeconfig(&dir, &proxy), ns.name());
    controller.wait_for_log("became leader").await;
    ns.apply_yaml(ROLLOUT).await.unwrap();
    // The controller decides to create the first ReplicaSet; that write hangs.
    wait_for("a write to hang in flight", TIMEOUT, || async {
        anyhow::ensure!(
            proxy.injected().contains_key("rule-hang"),
            "no write held yet"
        );
        Ok(())
    })
    .await
    .unwrap();
    let took = controller.terminate().await;
    eprintln!("stopped {took:?} after SIGTERM with a write in flight");
}
