//! A dashboard shared by a team, with logins, in a real browser (Debian's Chromium driven by
//! playwright-core: crates/cli/dashboard-ui/tests/login.mjs lists every check), against the
//! local control plane, a controller, and a real OpenID Connect provider (node-oidc-provider,
//! crates/cli/dashboard-ui/tests/oidc-provider.mjs). The dashboards act with the identity and
//! ClusterRole of manifests/dashboard, which may not change a Rollout itself; the cluster's
//! RBAC names the users. A reader logged in through the provider sees the Rollout and its
//! promote is refused by the API server as the reader; a deployer's promote goes through and
//! is recorded as an Event naming them; logout ends a session; a forged cookie, a bad token
//! and an expired session are refused; a service account's token logs in as it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::{canary_rollout, rollouts, setup, wait_phase};
use sluice_testenv::harness::{TestEnv, TestNamespace};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const CHROMIUM: &str = "/usr/bin/chromium";
const READER: &str = "alice@example.test";
const DEPLOYER: &str = "bob@example.test";
const CLIENT_SECRET: &str = "login-test-secret";

fn ui_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboard-ui")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The first line of `child`'s output that starts with `prefix`.
async fn line_starting(child: &mut Child, prefix: &str) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("reading output") {
            if line.starts_with(prefix) {
                return line;
            }
        }
        panic!("the process ended before printing {prefix:?}");
    })
    .await
    .unwrap_or_else(|_| panic!("no {prefix:?} line within 30 s"));
    // Keep draining, so the process never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    found
}

async fn token_of(ns: &TestNamespace, account: &str) -> String {
    ns.service_account_token(account).await.unwrap()
}

/// The users' RBAC, and the dashboard's own identity as manifests/dashboard installs it.
async fn rbac(env: &TestEnv, ns: &TestNamespace) {
    let read = json!(["get", "list", "watch"]);
    let shown = json!([
        {"apiGroups": ["argoproj.io"], "resources": ["rollouts", "analysisruns", "experiments"], "verbs": read},
        {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": read},
        {"apiGroups": [""], "resources": ["pods"], "verbs": read}
    ]);
    let mut deploy = shown.as_array().unwrap().clone();
    deploy.push(json!({"apiGroups": ["argoproj.io"], "resources": ["rollouts", "rollouts/status"], "verbs": ["patch", "update"]}));
    let binding = |name: &str, subjects: serde_json::Value| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subjects
        })
    };
    for manifest in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "viewer"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sluice-dashboard"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "rollout-reader"}, "rules": shown}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "rollout-deployer"}, "rules": deploy}),
        binding(
            "rollout-reader",
            json!([
                {"kind": "Group", "name": format!("oidc:readers-{}", ns.name()), "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "ServiceAccount", "name": "viewer", "namespace": ns.name()}
            ]),
        ),
        binding(
            "rollout-deployer",
            json!([
                {"kind": "Group", "name": format!("oidc:deployers-{}", ns.name()), "apiGroup": "rbac.authorization.k8s.io"}
            ]),
        ),
    ] {
        ns.apply_yaml(&manifest.to_string()).await.unwrap();
    }
    // The ClusterRole exactly as shipped; bound to this namespace's service account.
    let role = std::fs::read_to_string(
        env.repo_root()
            .join("manifests/dashboard/cluster-role.yaml"),
    )
    .expect("manifests/dashboard/cluster-role.yaml");
    ns.apply_yaml(&role).await.unwrap();
    let cluster_binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("sluice-dashboard-{}", ns.name())},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sluice-dashboard"},
        "subjects": [{"kind": "ServiceAccount", "name": "sluice-dashboard", "namespace": ns.name()}]
    });
    ns.apply_yaml(&cluster_binding.to_string()).await.unwrap();
}

/// `kubectl-sluice dashboard -A --login ...` on `port`, as the dashboard's service account.
async fn start_dashboard(
    env: &TestEnv,
    ns: &TestNamespace,
    token: &str,
    port: u16,
    extra: &[&str],
) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["--token", token, "-n", ns.name(), "dashboard", "-A"])
        .args([
            "--port",
            &port.to_string(),
            "--public-url",
            &format!("http://127.0.0.1:{port}"),
        ])
        .args(extra)
        .env("SLUICE_OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting kubectl-sluice dashboard");
    line_starting(&mut child, "Sluice dashboard at").await;
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_logins_in_a_browser() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: `apt-get install chromium` (scripts/install-test-tools.sh installs it)"
    );
    sluice_testenv::browser::ensure_node_modules(&ui_dir())
        .await
        .expect("the dashboard UI's node modules");
    let (env, ns, _controller) = setup("cli-login").await;
    rbac(&env, &ns).await;
    let steps = json!([{"setWeight": 50}, {"pause": {}}]);
    ns.apply_yaml(&canary_rollout(
        "shop",
        2,
        "nginx:1.0",
        steps.clone(),
        json!({}),
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    wait_phase(&api, "shop", RolloutPhase::Healthy, Duration::from_secs(90)).await;
    ns.apply_yaml(&canary_rollout("shop", 2, "nginx:1.1", steps, json!({})))
        .await
        .unwrap();
    wait_phase(&api, "shop", RolloutPhase::Paused, Duration::from_secs(90)).await;

    let port = free_port();
    let provider_port = free_port();
    let mut provider = Command::new("node")
        .arg("tests/oidc-provider.mjs")
        .current_dir(ui_dir())
        .env("PORT", provider_port.to_string())
        .env(
            "REDIRECT_URI",
            format!("http://127.0.0.1:{port}/login/callback"),
        )
        .env("CLIENT_SECRET", CLIENT_SECRET)
        .env(
            "ACCOUNT_GROUPS",
            // Groups of this run only, so no other namespace's bindings name them.
            json!({READER: [format!("readers-{}", ns.name())], DEPLOYER: [format!("deployers-{}", ns.name())]})
                .to_string(),
        )
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting the OpenID Connect provider");
    let issuer = line_starting(&mut provider, "ready ").await["ready ".len()..].to_owned();

    let own = token_of(&ns, "sluice-dashboard").await;
    let logins = [
        "--login",
        "token,oidc",
        "--oidc-issuer",
        &issuer,
        "--oidc-username-claim",
        "email",
        "--oidc-groups-prefix",
        "oidc:",
    ];
    let _dashboard = start_dashboard(&env, &ns, &own, port, &logins).await;
    let short_port = free_port();
    let _short = start_dashboard(
        &env,
        &ns,
        &own,
        short_port,
        &["--login", "token", "--session-ttl", "4s"],
    )
    .await;

    let screenshots =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-screenshots");
    let status = Command::new("node")
        .arg("tests/login.mjs")
        .current_dir(ui_dir())
        .env("DASHBOARD_URL", format!("http://127.0.0.1:{port}"))
        .env("SHORT_URL", format!("http://127.0.0.1:{short_port}"))
        .env("NAMESPACE", ns.name())
        .env("ROLLOUT", "shop")
        .env("READER", READER)
        .env("DEPLOYER", DEPLOYER)
        .env("VIEWER_TOKEN", token_of(&ns, "viewer").await)
        .env("SCREENSHOTS", &screenshots)
        .env("CHROMIUM", CHROMIUM)
        .kill_on_drop(true)
        .status()
        .await
        .expect("running node");
    // The one object outside the namespace, gone whatever the outcome.
    let _ = kube::Api::<ClusterRoleBinding>::all(env.client())
        .delete(
            &format!("sluice-dashboard-{}", ns.name()),
            &DeleteParams::default(),
        )
        .await;
    assert!(
        status.success(),
        "the login checks failed (screenshots in {})",
        screenshots.display()
    );

    // The deployer's promote is on record, naming them; the reader's refused one is not.
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    let actions: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("DashboardAction"))
        .filter_map(|e| e.message.clone())
        .collect();
    assert_eq!(
        actions,
        [format!(
            "{DEPLOYER} promoted the Rollout from the dashboard (logged in with oidc)"
        )],
        "the dashboard's Events"
    );
}
