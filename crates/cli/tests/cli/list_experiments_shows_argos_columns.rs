//! `kubectl sluice list experiments` on the real control plane: Argo's columns, a running
//! Experiment's time left counted from when its templates became available, a finished one's
//! none, `-A` with the namespace first, and "No resources found." for an empty namespace.
//! Runs in about two seconds; no controller is involved (the statuses are written here).

use std::process::{Command, Output};

use jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_api::experiment::Experiment;
use sluice_testenv::harness::{TestEnv, TestNamespace};

fn manifest(name: &str, duration: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Experiment
metadata:
  name: {name}
spec:
  duration: {duration}
  templates:
  - name: baseline
    replicas: 1
    selector:
      matchLabels: {{app: {name}}}
    template:
      metadata:
        labels: {{app: {name}}}
      spec:
        containers:
        - name: web
          image: nginx:1.0
"#
    )
}

fn sluice(env: &TestEnv, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .output()
        .expect("kubectl-sluice runs");
    assert!(out.status.success(), "{args:?} failed: {out:?}");
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8")
}

/// A line's cells, split on runs of spaces (no cell here holds a space).
fn cells(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn is_young_age(age: &str) -> bool {
    age.strip_suffix('s')
        .and_then(|s| s.parse::<u32>().ok())
        .is_some_and(|s| s < 60)
}

#[tokio::test]
async fn list_experiments_shows_argos_columns() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "list-experiments")
        .await
        .unwrap();

    let empty = sluice(&env, &["-n", ns.name(), "list", "experiments"]);
    assert_eq!(text(&empty.stdout), "");
    assert_eq!(text(&empty.stderr), "No resources found.\n");

    ns.apply_yaml(&manifest("running", "1h")).await.unwrap();
    ns.apply_yaml(&manifest("finished", "30m")).await.unwrap();
    // Experiments have no status subresource (as in Argo's CRD): the status is patched in.
    let api: Api<Experiment> = ns.api();
    // Available for 9m30s: 50m30s of the hour left, "50m" for the next 30 seconds.
    let available = Timestamp::now() - SignedDuration::from_secs(9 * 60 + 30);
    let status = |phase: &str| json!({"status": {"phase": phase, "availableAt": available.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}});
    for (name, phase) in [("running", "Running"), ("finished", "Successful")] {
        api.patch(name, &PatchParams::default(), &Patch::Merge(status(phase)))
            .await
            .unwrap();
    }

    let out = text(&sluice(&env, &["-n", ns.name(), "list", "experiments"]).stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[0], "NAME        STATUS      DURATION  REMAINING  AGE");
    // Every column but AGE is exact, at Argo's widths; the age is a few seconds.
    let prefix = "finished    Successful  30m       -          ";
    assert!(lines[1].starts_with(prefix), "{out}");
    assert!(is_young_age(lines[1][prefix.len()..].trim_end()), "{out}");
    let prefix = "running     Running     60m       50m        ";
    assert!(lines[2].starts_with(prefix), "{out}");
    assert!(is_young_age(lines[2][prefix.len()..].trim_end()), "{out}");

    // All namespaces, through Argo's alias: the namespace comes first. Other tests' Experiments
    // may be listed too, so only this namespace's lines are checked.
    let all = text(&sluice(&env, &["list", "exp", "-A"]).stdout);
    let header = all.lines().next().unwrap_or_default();
    assert_eq!(
        cells(header),
        [
            "NAMESPACE",
            "NAME",
            "STATUS",
            "DURATION",
            "REMAINING",
            "AGE"
        ]
    );
    let ours: Vec<Vec<&str>> = all
        .lines()
        .map(cells)
        .filter(|c| c.first() == Some(&ns.name()))
        .collect();
    assert_eq!(ours.len(), 2, "{all}");
    assert_eq!(
        ours[0][..5],
        [ns.name(), "finished", "Successful", "30m", "-"]
    );
    assert_eq!(
        ours[1][..5],
        [ns.name(), "running", "Running", "60m", "50m"]
    );
}
