//! `kubectl sluice retry experiment` on the real control plane: a failed Experiment loses its
//! whole status (Argo's `{"status":null}`), so that the controller runs it again from the
//! start; its spec is left as it was. A missing Experiment is an error naming it. About two
//! seconds; no controller runs (the Failed status is written here).

use std::process::{Command, Output};

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_api::experiment::Experiment;
use sluice_testenv::harness::{TestEnv, TestNamespace};

const MANIFEST: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Experiment
metadata:
  name: flaky
spec:
  duration: 10m
  templates:
  - name: baseline
    replicas: 1
    selector:
      matchLabels: {app: flaky}
    template:
      metadata:
        labels: {app: flaky}
      spec:
        containers:
        - name: web
          image: nginx:1.0
"#;

fn sluice(env: &TestEnv, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .output()
        .expect("kubectl-sluice runs")
}

#[tokio::test]
async fn retry_experiment_clears_its_status() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "retry-experiment")
        .await
        .unwrap();
    ns.apply_yaml(MANIFEST).await.unwrap();
    let api: Api<Experiment> = ns.api();
    let failed = json!({"status": {
        "phase": "Failed",
        "message": "Template 'baseline' exceeded its progressDeadlineSeconds",
        "availableAt": "2026-01-01T00:00:00Z",
    }});
    api.patch("flaky", &PatchParams::default(), &Patch::Merge(failed))
        .await
        .unwrap();
    let before = api.get("flaky").await.unwrap();
    assert!(before.status.is_some());

    let out = sluice(&env, &["-n", ns.name(), "retry", "experiment", "flaky"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "experiment 'flaky' retried\n"
    );

    let after = api.get("flaky").await.unwrap();
    assert_eq!(after.status, None, "{after:?}");
    assert_eq!(
        serde_json::to_value(&after.spec).unwrap(),
        serde_json::to_value(&before.spec).unwrap()
    );

    let missing = sluice(&env, &["-n", ns.name(), "retry", "exp", "gone"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("retrying experiment \"gone\""), "{err}");
    assert!(
        err.contains("experiments.argoproj.io \"gone\" not found"),
        "{err}"
    );
}
