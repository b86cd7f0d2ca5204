//! The kubectl global flags on the real control plane: `--cluster` and `--user` pick parts of a
//! kubeconfig whose current context is unusable, `--server` and `--token` override them, an
//! unknown user is an error naming it, `--request-timeout` gives up on a server that never
//! answers, and the binary installed as `kubectl-argo-rollouts` answers to that name. Each
//! command's effect is read back from the Rollout. About three seconds; no controller runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kube::Api;
use kube::config::{Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext};
use sluice_api::Rollout;
use sluice_testenv::harness::{TestEnv, TestNamespace};

const ROLLOUT: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: demo
spec:
  replicas: 1
  selector:
    matchLabels: {app: demo}
  template:
    metadata:
      labels: {app: demo}
    spec:
      containers:
      - name: web
        image: nginx:1.0
  strategy:
    canary:
      steps:
      - pause: {}
"#;

fn run(binary: &Path, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .output()
        .expect("the plugin runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sluice() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kubectl-sluice"))
}

async fn paused(api: &Api<Rollout>) -> Option<bool> {
    api.get("demo").await.unwrap().spec.paused
}

/// A kubeconfig whose current context points at a closed port with a wrong token, and which
/// also holds the real cluster (`real`) and user (`admin`) under other names.
fn broken_kubeconfig(env: &TestEnv, dir: &Path) -> PathBuf {
    let real = Kubeconfig::read_from(env.kubeconfig_path()).unwrap();
    let mut cluster = real.clusters[0].clone();
    cluster.name = "real".into();
    let mut nowhere: NamedCluster = cluster.clone();
    nowhere.name = "nowhere".into();
    if let Some(c) = nowhere.cluster.as_mut() {
        c.server = Some("https://127.0.0.1:1".into());
    }
    let mut admin = real.auth_infos[0].clone();
    admin.name = "admin".into();
    let mut nobody: NamedAuthInfo = admin.clone();
    nobody.name = "nobody".into();
    if let Some(a) = nobody.auth_info.as_mut() {
        a.token = Some("not-a-token".to_owned().into());
    }
    let mut context: NamedContext = real.contexts[0].clone();
    context.name = "broken".into();
    if let Some(c) = context.context.as_mut() {
        c.cluster = "nowhere".into();
        c.user = Some("nobody".into());
    }
    let config = Kubeconfig {
        clusters: vec![nowhere, cluster],
        auth_infos: vec![nobody, admin],
        contexts: vec![context],
        current_context: Some("broken".into()),
        ..real
    };
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    path
}

#[tokio::test]
async fn kubectl_flags_and_argo_name_reach_the_cluster() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "cli-flags").await.unwrap();
    ns.apply_yaml(ROLLOUT).await.unwrap();
    let api: Api<Rollout> = ns.api();
    let dir = std::env::temp_dir().join(format!("sluice-{}", ns.name()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = broken_kubeconfig(&env, &dir);
    let kc = kubeconfig.to_str().unwrap();
    let n = ns.name();

    // --cluster and --user: the context's own cluster and user would fail.
    let out = run(
        &sluice(),
        &[
            "--kubeconfig",
            kc,
            "-n",
            n,
            "--cluster",
            "real",
            "--user",
            "admin",
            "pause",
            "demo",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(paused(&api).await, Some(true));

    // --server and --token over the broken context.
    let real = Kubeconfig::read_from(env.kubeconfig_path()).unwrap();
    let server = real.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .server
        .clone()
        .unwrap();
    let admin = serde_json::to_value(&real.auth_infos[0]).unwrap();
    let token = admin["user"]["token"].as_str().unwrap().to_owned();
    let out = run(
        &sluice(),
        &[
            "--kubeconfig",
            kc,
            "-n",
            n,
            "--server",
            &server,
            "--token",
            &token,
            "resume",
            "demo",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(paused(&api).await, Some(false));

    // A user the kubeconfig lacks is named in the error.
    let out = run(
        &sluice(),
        &[
            "--kubeconfig",
            kc,
            "-n",
            n,
            "--user",
            "ghost",
            "pause",
            "demo",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("auth info \"ghost\" does not exist"),
        "{out:?}"
    );
    assert_eq!(paused(&api).await, Some(false));

    // A server that accepts connections but never answers: the request gives up in time.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("https://{}", silent.local_addr().unwrap());
    let started = Instant::now();
    let out = run(
        &sluice(),
        &[
            "--server",
            &silent_url,
            "--token",
            "x",
            "--request-timeout",
            "1s",
            "-n",
            n,
            "pause",
            "demo",
        ],
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(text(&out.stderr).contains("rollout \"demo\""), "{out:?}");
    assert_eq!(paused(&api).await, Some(false));

    // Installed under Argo's plugin name, it answers to that name.
    let argo = dir.join("kubectl-argo-rollouts");
    let _ = std::fs::remove_file(&argo);
    std::os::unix::fs::symlink(sluice(), &argo).unwrap();
    let help = run(&argo, &["--help"]);
    assert!(help.status.success(), "{help:?}");
    let help = text(&help.stdout);
    assert!(help.contains("Usage: kubectl argo rollouts"), "{help}");
    assert!(
        help.contains("kubectl argo rollouts promote guestbook"),
        "{help}"
    );
    let out = run(
        &argo,
        &[
            "--kubeconfig",
            env.kubeconfig_path().to_str().unwrap(),
            "-n",
            n,
            "pause",
            "demo",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(paused(&api).await, Some(true));
    let listed = run(
        &argo,
        &[
            "--kubeconfig",
            env.kubeconfig_path().to_str().unwrap(),
            "list",
            "rollouts",
            "-A",
        ],
    );
    let listed = text(&listed.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().take(2).eq([n, "demo"])),
        "{listed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
