//! The install commands the README and `manifests/install/README.md` document succeed as
//! written, with the kubectl on the machine, against the local control plane. The CRDs are
//! applied for real; the controller's own objects with a server-side dry run (the API server
//! validates and admits them, nothing cluster-wide is left behind).

use std::process::Command;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::wait::{Condition, conditions::is_crd_established};
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for_object};

/// Runs `kubectl ARGS` from the repository root with the admin kubeconfig; panics with its
/// output unless it exits 0.
fn kubectl(env: &TestEnv, args: &[&str]) -> String {
    let output = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", env.kubeconfig_path())
        .current_dir(env.repo_root())
        .output()
        .expect("running kubectl");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "`kubectl {}` failed ({}):\n{stdout}\n{stderr}",
        args.join(" "),
        output.status
    );
    stdout
}

fn documented(doc: &str, command: &str) {
    let root = sluice_e2e::harness::repo_root();
    let text = std::fs::read_to_string(root.join(doc)).expect(doc);
    assert!(
        text.contains(command),
        "{doc} no longer documents `{command}`: update this test with it"
    );
}

#[tokio::test]
async fn documented_install_commands_succeed_as_written() {
    let env = TestEnv::shared().await.unwrap();

    // README: installing the CRDs.
    documented("README.md", "kubectl apply --server-side -k manifests/crds");
    kubectl(&env, &["apply", "--server-side", "-k", "manifests/crds"]);
    // Established before use (polled: `kubectl wait` fails on a CRD with no conditions yet).
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(env.client());
    for name in [
        "rollouts.argoproj.io",
        "analysisruns.argoproj.io",
        "analysistemplates.argoproj.io",
        "clusteranalysistemplates.argoproj.io",
        "experiments.argoproj.io",
    ] {
        wait_for_object(&crds, name, Duration::from_secs(60), "Established", |crd| {
            is_crd_established().matches_object(Some(crd))
        })
        .await
        .unwrap();
    }

    // manifests/install/README.md: the whole install into argo-rollouts, from the rendered file
    // and from its kustomization, server-side and (migration over Argo's) client-side. The
    // namespace is made for real so that the namespaced objects can be dry-run into it.
    for command in [
        "kubectl create namespace argo-rollouts",
        "kubectl apply -n argo-rollouts --server-side -f manifests/install.yaml",
        "kubectl apply -n argo-rollouts --server-side -k manifests/install",
    ] {
        documented("manifests/install/README.md", command);
    }
    let namespace = "argo-rollouts";
    let exists = Command::new("kubectl")
        .args(["get", "namespace", namespace])
        .env("KUBECONFIG", env.kubeconfig_path())
        .output()
        .expect("running kubectl")
        .status
        .success();
    if !exists {
        kubectl(&env, &["create", "namespace", namespace]);
    }
    for source in [
        ["-f", "manifests/install.yaml"],
        ["-k", "manifests/install"],
    ] {
        let mut args = vec![
            "apply",
            "-n",
            namespace,
            "--server-side",
            "--dry-run=server",
        ];
        args.extend(source);
        let out = kubectl(&env, &args);
        assert!(out.contains("deployment.apps/argo-rollouts"), "{out}");
        assert!(
            out.contains("clusterrole.rbac.authorization.k8s.io/argo-rollouts-aggregate-to-view"),
            "{out}"
        );
    }

    // manifests/namespace-install: one namespace.
    documented(
        "manifests/install/README.md",
        "kubectl apply -n <namespace> -f manifests/namespace-install.yaml",
    );
    let ns = TestNamespace::create(&env, "ns-install").await.unwrap();
    for source in [
        ["-f", "manifests/namespace-install.yaml"],
        ["-k", "manifests/namespace-install"],
    ] {
        let mut args = vec!["apply", "-n", ns.name(), "--dry-run=server"];
        args.extend(source);
        kubectl(&env, &args);
    }
}
