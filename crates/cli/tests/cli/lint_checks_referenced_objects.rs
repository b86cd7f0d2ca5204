//! `kubectl sluice lint -f FILE` with a multi-document file: besides the Rollout, the Services
//! and the NGINX Ingress it references are checked, with Argo's messages, each naming the
//! document and the Rollout; the fixed file passes. Offline (no cluster); well under a second.

use std::process::Command;

const MANIFEST: &str = "\
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.25
  strategy:
    canary:
      canaryService: web-canary
      stableService: web-stable
      trafficRouting:
        nginx: {stableIngress: web}
      steps:
      - setWeight: 20
---
apiVersion: v1
kind: Service
metadata:
  name: web-canary
spec:
  selector: {app: WRONG}
---
apiVersion: v1
kind: Service
metadata:
  name: web-stable
spec:
  selector: {app: web}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  rules:
  - http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service: {name: SERVICE, port: {number: 80}}
";

fn lint(text: &str, file: &str) -> (bool, String) {
    let path = std::env::temp_dir().join(format!("sluice-lint-{}-{file}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .args(["lint", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let shown = format!("{}: ", path.display());
    let stdout = String::from_utf8(out.stdout).unwrap().replace(&shown, "");
    (out.status.success(), stdout)
}

#[test]
fn lint_checks_referenced_objects() {
    let (ok, out) = lint(&MANIFEST.replace("SERVICE", "elsewhere"), "bad.yaml");
    assert!(!ok, "{out}");
    assert_eq!(
        out,
        "\
document 1, Rollout \"web\": spec.strategy.canary.canaryService: Invalid value: \"web-canary\": Service \"web-canary\" has unmatch label \"app\" in rollout
document 1, Rollout \"web\": spec.strategy.canary.trafficRouting.nginx.stableIngress: Invalid value: \"web\": ingress `web` has no rules using service web-stable backend
"
    );
    let fixed = MANIFEST
        .replace("SERVICE", "web-stable")
        .replace("WRONG", "web");
    let (ok, out) = lint(&fixed, "good.yaml");
    assert!(ok, "{out}");
    assert_eq!(out, "1 Rollout(s) checked, no problems found\n");
}
