//! The controller needs no more than the install manifests grant: running as a non-admin user
//! bound to `manifests/install/cluster-role.yaml`, it takes a Rollout to Healthy through an
//! update (leader election included) without a single request refused, while writes outside
//! those rules are forbidden.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The user the harness' controller kubeconfig authenticates as.
const CONTROLLER_USER: &str = "sluice-e2e-controller";

async fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn is_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(s)) if s.code == 403)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_runs_on_the_manifest_cluster_role_and_nothing_more() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "least-privilege")
        .await
        .unwrap();
    let admin = env.client();

    // The manifests' ClusterRole, bound to the controller user in the test namespace only (a
    // RoleBinding to a ClusterRole grants exactly its rules there), so that tests running side
    // by side keep their own view of that user's rights.
    let cluster_role =
        std::fs::read_to_string(env.repo_root().join("manifests/install/cluster-role.yaml"))
            .unwrap();
    env.apply_yaml(ns.name(), &cluster_role).await.unwrap();
    // The install's Role (reading argo-rollouts-config), in the namespace the controller takes
    // for its own here.
    let config_role =
        std::fs::read_to_string(env.repo_root().join("manifests/install/role.yaml")).unwrap();
    ns.apply_yaml(&config_role).await.unwrap();
    ns.apply_yaml(
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "argo-rollouts"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argo-rollouts"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": CONTROLLER_USER}]
        })
        .to_string(),
    )
    .await
    .unwrap();
    ns.apply_yaml(
        &json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "argo-rollouts-config"}
        })
        .to_string(),
    )
    .await
    .unwrap();
    ns.apply_yaml(
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "sluice-controller"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "argo-rollouts"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": CONTROLLER_USER}]
        })
        .to_string(),
    )
    .await
    .unwrap();
    let user: Client = env.controller_client().await.unwrap();
    wait_for("the RoleBinding to take effect", TIMEOUT, || async {
        Api::<Rollout>::namespaced(user.clone(), ns.name())
            .list(&ListParams::default())
            .await?;
        Ok(())
    })
    .await
    .unwrap();

    sluice_controller::install_crypto_provider();
    let mut args = controller_args(ns.name());
    args.leader_elect = true;
    args.leader_election_namespace = Some(ns.name().to_string());
    args.leader_election_identity = Some("least-privilege".into());
    args.healthz_port = 0;
    args.metrics_port = 0;
    sluice_controller::init_logging(&args);
    let config = sluice_testenv::kubeconfig::config_from_file(env.controller_kubeconfig_path())
        .await
        .unwrap();
    let options = sluice_controller::Options {
        config_namespace: Some(ns.name().to_string()),
        ..Default::default()
    };
    let controller = sluice_controller::start(config, &args, options)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), controller.gate().wait_for(true))
        .await
        .expect("the controller user can take the leader lease");

    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        2,
        "nginx:1.0",
        json!([{"setWeight": 50}, {"pause": {"duration": 1}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    set_image(&api, "web", "nginx:2.0").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_replicas(&ns, "web", &[("nginx:2.0", 2)], TIMEOUT).await;

    // Analysis under the same rules: a run whose argument comes from a Secret.
    let metric = sluice_testenv::http_stub::HttpStub::start().await.unwrap();
    metric.respond_json(200, &json!({"ok": true}));
    let token: Secret = serde_json::from_value(
        json!({"metadata": {"name": "metric-token"}, "stringData": {"token": "t0k"}}),
    )
    .unwrap();
    Api::<Secret>::namespaced(admin.clone(), ns.name())
        .create(&PostParams::default(), &token)
        .await
        .unwrap();
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisRun",
            "metadata": {"name": "probe"},
            "spec": {
                "args": [{"name": "token", "valueFrom": {"secretKeyRef": {"name": "metric-token", "key": "token"}}}],
                "metrics": [{"name": "web", "successCondition": "result.ok == true",
                    "provider": {"web": {"url": metric.url("/?t={{args.token}}")}}}]
            }
        })
        .to_string(),
    )
    .await
    .unwrap();
    let runs: Api<sluice_api::analysis::AnalysisRun> = Api::namespaced(admin.clone(), ns.name());
    sluice_testenv::harness::wait_for("the analysis run to succeed", TIMEOUT, || async {
        let run = runs.get("probe").await?;
        match run
            .status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.as_str())
        {
            Some("Successful") => Ok(()),
            other => anyhow::bail!("{other:?} {:?}", run.status),
        }
    })
    .await
    .unwrap();

    // An Experiment under the same rules: its ReplicaSet, its status, then Successful.
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Experiment",
            "metadata": {"name": "trial"},
            "spec": {
                "duration": "3s",
                "templates": [{
                    "name": "baseline",
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "trial"}},
                    "template": {
                        "metadata": {"labels": {"app": "trial"}},
                        "spec": {"containers": [{"name": "app", "image": "nginx:1.0"}]}
                    }
                }]
            }
        })
        .to_string(),
    )
    .await
    .unwrap();
    let experiments: Api<sluice_api::experiment::Experiment> =
        Api::namespaced(admin.clone(), ns.name());
    sluice_testenv::harness::wait_for("the experiment to succeed", TIMEOUT, || async {
        let exp = experiments.get("trial").await?;
        match exp
            .status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.as_str())
        {
            Some("Successful") => Ok(()),
            other => anyhow::bail!("{other:?} {:?}", exp.status),
        }
    })
    .await
    .unwrap();

    // Readiness and metrics over HTTP; no request of the controller was refused.
    let ports = controller.ports();
    assert_eq!(http_get(ports.healthz, "/readyz").await, (200, "ok".into()));
    let (status, metrics) = http_get(ports.metrics, "/metrics").await;
    assert_eq!(status, 200);
    let requests: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("controller_clientset_k8s_request_total{"))
        .collect();
    assert!(
        requests.iter().all(|l| !l.contains(r#"status_code="403""#)),
        "a request was forbidden: {requests:#?}"
    );
    assert!(
        requests.iter().any(|l| l.contains(r#"kind="rollouts""#)
            && l.contains(r#"verb="Patch""#)
            && l.contains(r#"status_code="200""#)),
        "{requests:#?}"
    );
    assert!(
        requests
            .iter()
            .any(|l| l.contains(r#"kind="events""#) && l.contains(r#"status_code="201""#)),
        "events are recorded: {requests:#?}"
    );
    let info_line = format!(
        r#"rollout_info{{namespace="{}",name="web",strategy="canary",traffic_router="",phase="Completed"}} 1"#,
        ns.name()
    );
    assert!(metrics.contains(&info_line), "{metrics}");
    let experiment_line = format!(
        r#"experiment_info{{namespace="{}",name="trial",phase="Successful"}} 1"#,
        ns.name()
    );
    assert!(metrics.contains(&experiment_line), "{metrics}");
    let experiment_phase = format!(
        r#"experiment_phase{{namespace="{}",name="trial",phase="Successful"}} 1"#,
        ns.name()
    );
    assert!(metrics.contains(&experiment_phase), "{metrics}");
    assert!(
        metrics.contains(&format!(
            r#"experiment_reconcile_count{{namespace="{}",name="trial"}} "#,
            ns.name()
        )),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_leader 1"));

    // Outside its rules the same user is refused.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns.name());
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "db-password"}, "stringData": {"p": "x"}}),
    )
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let user_secrets: Api<Secret> = Api::namespaced(user.clone(), ns.name());
    assert!(is_forbidden(
        user_secrets
            .delete("db-password", &DeleteParams::default())
            .await
    ));
    // Secrets may be read (analysis arguments and provider credentials), never changed.
    assert!(user_secrets.get("db-password").await.is_ok());
    assert!(is_forbidden(
        user_secrets
            .patch(
                "db-password",
                &PatchParams::default(),
                &Patch::Merge(json!({"stringData": {"p": "y"}}))
            )
            .await
    ));
    let elsewhere: Api<ReplicaSet> = Api::namespaced(user.clone(), "default");
    assert!(is_forbidden(elsewhere.list(&ListParams::default()).await));
    assert!(secrets.get("db-password").await.is_ok(), "still there");

    // A clean shutdown hands the lease back (the release is an update the role allows).
    controller.shutdown().await.unwrap();
    let lease = Api::<Lease>::namespaced(admin, ns.name())
        .get("argo-rollouts-controller-lock")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(""));
    assert_eq!(spec.lease_duration_seconds, Some(1));
}
