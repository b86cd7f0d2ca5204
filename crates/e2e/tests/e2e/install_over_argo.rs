//! Sluice's rendered install files hold Argo Rollouts v1.9.1's objects under the same names, so
//! that `kubectl apply` of Sluice's file over Argo's install replaces the controller in place.
//! What differs, and why:
//!
//! - the Deployment's image (nothing else of the Deployment);
//! - the CRDs' schemas: Sluice's own, generated from its types (same names, group, kinds,
//!   scope and versions);
//! - the controller's ClusterRole (cluster install) or Role (namespace install) rules: least
//!   privilege, what Sluice uses (`manifests/install/cluster-role.yaml` says why each rule is
//!   there);
//! - one Role and RoleBinding `argo-rollouts` more in the cluster install: reading the
//!   `argo-rollouts-config` ConfigMap by name in the controller's namespace, where Argo's
//!   ClusterRole reads every ConfigMap of the cluster.
//!
//! The live check applies Argo's namespace install into a test namespace with kubectl as Argo
//! documents it, then Sluice's over it as the README's migration does, and reads back that the
//! Deployment changed its image and nothing else.

use std::process::Command;

use serde_json::{Value, json};
use sluice_e2e::harness::{TestEnv, TestNamespace};
use sluice_testenv::manifests::parse_documents;

fn key(o: &Value) -> (String, String) {
    (
        o["kind"].as_str().unwrap_or_default().to_string(),
        o["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

fn argo(file: &str) -> Vec<Value> {
    parse_documents(&sluice_e2e::corpus_file(&format!("manifests/{file}"))).unwrap()
}

fn sluice(file: &str) -> Vec<Value> {
    let path = sluice_e2e::harness::repo_root()
        .join("manifests")
        .join(file);
    parse_documents(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The Deployment with its image blanked.
fn without_image(mut d: Value) -> Value {
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
    d
}

/// Compares Argo's objects of `file` with Sluice's; returns the kinds and names only Sluice has.
fn compare(file: &str, controller_role: &str) -> Vec<(String, String)> {
    let theirs = argo(file);
    let ours = sluice(file);
    for a in &theirs {
        let k = key(a);
        let Some(b) = ours.iter().find(|o| key(o) == k) else {
            panic!("{file}: Sluice has no {k:?}");
        };
        match (k.0.as_str(), k.1.as_str()) {
            ("Deployment", _) => {
                assert_ne!(
                    a["spec"]["template"]["spec"]["containers"][0]["image"],
                    b["spec"]["template"]["spec"]["containers"][0]["image"]
                );
                assert_eq!(without_image(a.clone()), without_image(b.clone()), "{file}");
            }
            ("CustomResourceDefinition", _) => {
                for field in ["group", "names", "scope"] {
                    assert_eq!(a["spec"][field], b["spec"][field], "{k:?} {field}");
                }
                let versions = |o: &Value| -> Vec<Value> {
                    o["spec"]["versions"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| json!([v["name"], v["served"], v["storage"]]))
                        .collect()
                };
                assert_eq!(versions(a), versions(b), "{k:?}");
            }
            (kind, name) if kind == controller_role && name == "argo-rollouts" => {
                assert_eq!(a["metadata"], b["metadata"], "{k:?}");
                assert!(!b["rules"].as_array().unwrap().is_empty());
            }
            _ => assert_eq!(a, b, "{file}: {k:?} differs from Argo's"),
        }
    }
    ours.iter()
        .map(key)
        .filter(|k| !theirs.iter().any(|a| key(a) == *k))
        .collect()
}

#[test]
fn install_yaml_has_argos_objects_with_only_the_documented_differences() {
    let extra = compare("install.yaml", "ClusterRole");
    assert_eq!(
        extra,
        [
            ("Role".to_string(), "argo-rollouts".to_string()),
            ("RoleBinding".to_string(), "argo-rollouts".to_string())
        ]
    );
}

#[test]
fn namespace_install_yaml_has_argos_objects_with_only_the_documented_differences() {
    let extra = compare("namespace-install.yaml", "Role");
    assert!(extra.is_empty(), "{extra:?}");
}

fn kubectl(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write as _;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", env.kubeconfig_path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running kubectl");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "`kubectl {}` failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test]
async fn applying_sluice_over_argos_namespace_install_changes_the_image_only() {
    let env = TestEnv::shared().await.unwrap();
    let ns = TestNamespace::create(&env, "over-argo").await.unwrap();
    let argo_file = sluice_e2e::corpus_file("manifests/namespace-install.yaml");
    kubectl(
        &env,
        &["apply", "-n", ns.name(), "-f", "-"],
        Some(&argo_file),
    );
    let get = |what: &str| -> Value {
        serde_json::from_str(&kubectl(
            &env,
            &["get", "-n", ns.name(), what, "-o", "json"],
            None,
        ))
        .unwrap()
    };
    let before = get("deployment/argo-rollouts");
    let sa_before = get("serviceaccount/argo-rollouts");

    let ours = sluice_e2e::harness::repo_root().join("manifests/namespace-install.yaml");
    // The migration command of the README: server-side, taking over the fields Argo's
    // client-side apply owned.
    let readme =
        std::fs::read_to_string(sluice_e2e::harness::repo_root().join("README.md")).unwrap();
    assert!(
        readme.contains(
            "kubectl apply -n argo-rollouts --server-side --force-conflicts -f manifests/install.yaml"
        ),
        "the README no longer documents the migration this test runs"
    );
    let out = kubectl(
        &env,
        &[
            "apply",
            "-n",
            ns.name(),
            "--server-side",
            "--force-conflicts",
            "-f",
            ours.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.contains("deployment.apps/argo-rollouts serverside-applied"),
        "{out}"
    );

    let after = get("deployment/argo-rollouts");
    let spec = |d: &Value| {
        let mut template = d["spec"]["template"].clone();
        template["spec"]["containers"][0]["image"] = json!("");
        template
    };
    assert_eq!(
        spec(&before),
        spec(&after),
        "the pod template changed beyond the image"
    );
    assert_eq!(before["spec"]["selector"], after["spec"]["selector"]);
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"][0]["image"],
        "sluice-controller:0.1.0"
    );
    assert_eq!(
        sa_before["metadata"]["uid"],
        get("serviceaccount/argo-rollouts")["metadata"]["uid"],
        "the ServiceAccount is kept, not replaced"
    );
}
