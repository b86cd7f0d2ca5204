//! `dashboard` in a real browser: Debian's Chromium, headless, driven by playwright-core
//! (crates/cli/dashboard-ui/tests/browser.mjs, which lists every check) against the local
//! control plane and an in-process controller. The list shows the namespace's four Rollouts
//! and filters them; a Rollout's page follows a canary through its steps without a reload: to
//! its first pause, then (a promote click) through an analysis step whose measurements are
//! drawn, to its second pause; through a dropped connection; a new image set from the page;
//! abort shows Degraded; a --read-only dashboard of all namespaces has no buttons and answers
//! 403 to every change; a dashboard started with the token of a user who may only read shows
//! the Rollout, and the API server's 403 comes back for a change; an experiment step's
//! Experiment shows running with its two ReplicaSets; a roll back from the page. Screenshots
//! go to target/dashboard-screenshots/. About 30 s; needs Node,
//! /usr/bin/chromium and the UI's node_modules (`npm ci` is run when they are missing).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::{canary_rollout, rollouts, setup, wait_phase};
use sluice_testenv::harness::{TestEnv, TestNamespace};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

const CHROMIUM: &str = "/usr/bin/chromium";

fn ui_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboard-ui")
}

/// Starts `kubectl-sluice dashboard` on a free port with `extra` flags; returns the process
/// and the URL it printed.
async fn start_dashboard(env: &TestEnv, namespace: &str, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["-n", namespace, "dashboard", "--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting kubectl-sluice dashboard");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .expect("the dashboard prints its address")
    .expect("reading the dashboard's output");
    // `Sluice dashboard at http://127.0.0.1:PORT/ (namespace NS)`
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    (child, url)
}

/// The UI's node_modules (playwright-core), installed from the lock file when missing.
async fn ensure_node_modules() {
    sluice_testenv::browser::ensure_node_modules(&ui_dir())
        .await
        .expect("the dashboard UI's node modules");
}

/// A metric source for the analysis step: `{"value": N}`, N growing by 7 from 10 with each
/// request, so the chart has a slope. Returns its URL.
async fn serve_metric() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let count = Arc::new(AtomicU32::new(0));
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let n = count.fetch_add(1, Ordering::SeqCst);
            async move { axum::Json(json!({"value": 10 + 7 * n})) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A service account of `ns` that may read what the dashboard shows but change nothing, and
/// a token of it.
async fn viewer_token(ns: &TestNamespace) -> String {
    let read = json!(["get", "list", "watch"]);
    for manifest in [
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "viewer"}}),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "viewer"},
            "rules": [
                {"apiGroups": ["argoproj.io"], "resources": ["rollouts", "analysisruns", "experiments"], "verbs": read},
                {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": read},
                {"apiGroups": [""], "resources": ["pods"], "verbs": read}
            ]
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "viewer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "viewer"},
            "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": ns.name()}]
        }),
    ] {
        ns.apply_yaml(&manifest.to_string()).await.unwrap();
    }
    ns.service_account_token("viewer").await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_a_browser() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: `apt-get install chromium` (scripts/install-test-tools.sh installs it)"
    );
    ensure_node_modules().await;
    let (env, ns, _controller) = setup("cli-dashboard").await;
    let metric = serve_metric().await;
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "latency"},
            "spec": {"metrics": [{
                "name": "latency", "count": 3, "interval": "1s",
                "successCondition": "result < 100",
                "provider": {"web": {"url": metric, "jsonPath": "{$.value}"}}
            }]}
        })
        .to_string(),
    )
    .await
    .unwrap();
    let steps = json!([
        {"setWeight": 25},
        {"pause": {}},
        {"analysis": {"templates": [{"templateName": "latency"}]}},
        {"setWeight": 50},
        {"pause": {}}
    ]);
    ns.apply_yaml(&canary_rollout(
        "checkout",
        4,
        "nginx:1.0",
        steps,
        json!({}),
    ))
    .await
    .unwrap();
    for name in ["api", "web"] {
        ns.apply_yaml(&canary_rollout(name, 1, "nginx:1.0", json!([]), json!({})))
            .await
            .unwrap();
    }
    // An experiment step that runs for the rest of the test once an update starts it.
    let experiment = json!([{"experiment": {"duration": "1h", "templates": [
        {"name": "baseline", "specRef": "stable"},
        {"name": "candidate", "specRef": "canary"}
    ]}}]);
    ns.apply_yaml(&canary_rollout(
        "search",
        1,
        "nginx:1.0",
        experiment,
        json!({}),
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    for name in ["checkout", "api", "web", "search"] {
        wait_phase(&api, name, RolloutPhase::Healthy, Duration::from_secs(90)).await;
    }

    let (_writable, url) = start_dashboard(&env, ns.name(), &[]).await;
    let (_read_only, read_only_url) =
        start_dashboard(&env, ns.name(), &["--read-only", "-A"]).await;
    // The viewer's own identity: the API server, not the dashboard, refuses its changes.
    let token = viewer_token(&ns).await;
    let (_viewer, viewer_url) = start_dashboard(&env, ns.name(), &["--token", &token]).await;
    let screenshots =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-screenshots");
    let started = std::time::Instant::now();
    let status = Command::new("node")
        .arg("tests/browser.mjs")
        .current_dir(ui_dir())
        .env("DASHBOARD_URL", &url)
        .env("READONLY_URL", &read_only_url)
        .env("VIEWER_URL", &viewer_url)
        .env("NAMESPACE", ns.name())
        .env("ROLLOUTS", "api,checkout,search,web")
        .env("EXPERIMENT_ROLLOUT", "search")
        .env("CANARY", "checkout")
        .env("CANARY_IMAGES", "app=nginx:1.1,nginx:1.2")
        .env("SCREENSHOTS", &screenshots)
        .env("CHROMIUM", CHROMIUM)
        .kill_on_drop(true)
        .status()
        .await
        .expect("running node");
    eprintln!("browser checks took {:?}", started.elapsed());
    assert!(
        status.success(),
        "the browser checks failed (screenshots in {})",
        screenshots.display()
    );

    // What the page showed is what the cluster holds.
    let checkout = api.get("checkout").await.unwrap();
    let status = checkout.status.unwrap_or_default();
    assert_ne!(status.abort, Some(true));
    assert_eq!(
        checkout.spec.template.unwrap().spec.unwrap().containers[0]
            .image
            .as_deref(),
        Some("nginx:1.1")
    );
}
