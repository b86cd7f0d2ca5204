//! `list rollouts --name --watch --timestamps` on the real control plane: the table holds only
//! the named rollout, with a TIMESTAMP column; a change of the Rollout prints its line again
//! with the new values, an unchanged one prints nothing. And `completion bash`: the script,
//! loaded into a real bash, completes the plugin's commands. About three seconds; no
//! controller runs.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use sluice_api::Rollout;
use sluice_testenv::harness::{TestEnv, TestNamespace};

fn rollout(name: &str) -> String {
    format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: {name}
spec:
  replicas: 2
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: web
        image: nginx:1.0
  strategy:
    blueGreen: {{activeService: {name}}}
"#
    )
}

fn is_timestamp(cell: &str) -> bool {
    cell.len() == 20 && cell.parse::<jiff::Timestamp>().is_ok()
}

#[tokio::test]
async fn list_rollouts_watch_and_completion() {
    let env = TestEnv::with_crds().await.unwrap();
    let ns = TestNamespace::create(&env, "cli-list-watch").await.unwrap();
    ns.apply_yaml(&rollout("shown")).await.unwrap();
    ns.apply_yaml(&rollout("other")).await.unwrap();
    let api: Api<Rollout> = ns.api();

    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args([
            "-n",
            ns.name(),
            "list",
            "rollouts",
            "--name",
            "shown",
            "-w",
            "--timestamps",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if lines_tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || lines.recv_timeout(Duration::from_secs(20)).expect("a line");
    let header: Vec<String> = next().split_whitespace().map(str::to_owned).collect();
    assert_eq!(
        header,
        [
            "TIMESTAMP",
            "NAME",
            "STRATEGY",
            "STATUS",
            "STEP",
            "SET-WEIGHT",
            "READY",
            "DESIRED",
            "UP-TO-DATE",
            "AVAILABLE"
        ]
    );
    let first = next();
    let cells: Vec<&str> = first.split_whitespace().collect();
    assert!(is_timestamp(cells[0]), "{first}");
    assert_eq!(
        cells[1..4],
        ["shown", "BlueGreen", "Progressing"],
        "{first}"
    );
    assert_eq!(cells[7], "2", "{first}");

    // The other rollout changes: nothing is printed. Ours changes: its new line is printed.
    let scale = |n: i32| json!({"spec": {"replicas": n}});
    api.patch("other", &PatchParams::default(), &Patch::Merge(scale(5)))
        .await
        .unwrap();
    api.patch("shown", &PatchParams::default(), &Patch::Merge(scale(3)))
        .await
        .unwrap();
    let update = next();
    let cells: Vec<&str> = update.split_whitespace().collect();
    assert!(is_timestamp(cells[0]), "{update}");
    assert_eq!(cells[1], "shown", "{update}");
    assert_eq!(cells[7], "3", "{update}");
    // Aligned with the table above it.
    assert_eq!(update.find("shown"), first.find("shown"));
    assert!(lines.recv_timeout(Duration::from_millis(500)).is_err());
    child.kill().unwrap();
    let _ = child.wait();

    // The completion script, loaded into bash, completes `lis` to `list`, and `list r` to the
    // rollouts subcommand.
    let script = Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .args(["completion", "bash"])
        .output()
        .unwrap();
    assert!(script.status.success(), "{script:?}");
    let script = String::from_utf8(script.stdout).unwrap();
    let complete = |words: &str| {
        let count = words.split_whitespace().count();
        let program = format!(
            "{script}\nCOMP_WORDS=({words}); COMP_CWORD={}; COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; \
             _kubectl_sluice kubectl-sluice \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             echo \"${{COMPREPLY[@]}}\"",
            count - 1
        );
        // On bash's standard input: the script is longer than one argument may be (128 KiB).
        let mut bash = Command::new("bash")
            .arg("-s")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        bash.stdin
            .take()
            .unwrap()
            .write_all(program.as_bytes())
            .unwrap();
        let out = bash.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(complete("kubectl-sluice lis").trim(), "list");
    let listed = complete("kubectl-sluice list r");
    assert!(
        listed.split_whitespace().any(|w| w == "rollouts"),
        "{listed}"
    );
}
