//! `kubectl sluice get rollout -w` in a real terminal (a tmux pane) while a controller running
//! in-process takes a canary to its pause: the view is redrawn in place (one header on the
//! screen, showing the new state and both images, in colour), drawn again whole when the
//! terminal is resized, and Ctrl-C ends it at once, leaving the pane's shell prompt usable;
//! with `--no-color` the terminal gets no colour, and into a pipe the view is plain text, one
//! block after another. About ten seconds.

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::json;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::*;
use sluice_testenv::harness::wait_for;

/// tmux on a server of this test's own.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-t", "view"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen with its colours and attributes as escape sequences.
    fn screen_with_colors(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-e", "-t", "view"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Ctrl-C, then waits for the pane's shell to answer.
    async fn interrupt(&self, marker: &str) {
        self.run(&["send-keys", "-t", "view", "C-c", ""]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let echo = format!("clear; echo {marker}");
        self.run(&["send-keys", "-t", "view", &echo, "Enter"]);
        self.wait_screen("the shell prompt back", |s| {
            s.lines().any(|l| l.trim() == marker)
        })
        .await;
    }

    async fn wait_screen(&self, what: &str, holds: impl Fn(&str) -> bool) -> String {
        wait_for(what, TIMEOUT, || async {
            let screen = self.screen();
            anyhow::ensure!(holds(&screen), "{screen}");
            Ok(screen)
        })
        .await
        .unwrap()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_rollout_watch_redraws_in_a_terminal() {
    let (env, ns, _controller) = setup("cli-watch-tmux").await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"pause": {}}]),
        json!({}),
    ))
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;

    let tmux = Tmux {
        socket: format!("sluice-{}", ns.name()),
    };
    let command = format!(
        "{} --kubeconfig {} -n {} get rollout web -w",
        env!("CARGO_BIN_EXE_kubectl-sluice"),
        env.kubeconfig_path().display(),
        ns.name()
    );
    // A shell in the pane, so that what Ctrl-C leaves behind can be seen and typed into.
    let out = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "view",
        "-x",
        "160",
        "-y",
        "50",
        "sh",
    ]);
    assert!(out.status.success(), "{out:?}");
    tmux.run(&["send-keys", "-t", "view", &command, "Enter"]);
    tmux.wait_screen("the healthy rollout", |s| {
        s.contains("Name:") && s.contains("Healthy")
    })
    .await;

    set_image(&api, "web", "app:v2").await;
    let screen = tmux
        .wait_screen("the rollout paused at its step", |s| {
            s.contains("Paused") && s.contains("app:v2")
        })
        .await;
    // Redrawn in place: one view on the screen, not one appended per change.
    assert_eq!(screen.matches("Name:").count(), 1, "{screen}");
    assert!(screen.contains("app:v1"), "{screen}");
    // In colour on a terminal (the status icons and phases).
    assert!(tmux.screen_with_colors().contains("\x1b[3"), "no colour");

    // A narrower, shorter terminal: the view is drawn again for it, whole and once.
    tmux.run(&["resize-window", "-t", "view", "-x", "90", "-y", "40"]);
    let screen = tmux
        .wait_screen("the view drawn again after the resize", |s| {
            s.matches("Name:").count() == 1 && s.contains("Paused")
        })
        .await;
    assert!(screen.lines().all(|l| l.chars().count() <= 90), "{screen}");

    // Ctrl-C ends the view; the shell answers again.
    tmux.interrupt("view-ended").await;

    // --no-color: the same view on the terminal, without colour.
    tmux.run(&[
        "send-keys",
        "-t",
        "view",
        &format!("{command} --no-color"),
        "Enter",
    ]);
    tmux.wait_screen("the view without colour", |s| {
        s.contains("Name:") && s.contains("Paused")
    })
    .await;
    let colored = tmux.screen_with_colors();
    assert!(!colored.contains("\x1b[3"), "{colored:?}");
    tmux.interrupt("plain-ended").await;

    // Into a pipe: plain text, no escape sequence, a block per change.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-sluice"))
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(["-n", ns.name(), "get", "rollout", "web", "-w"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut piped = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        use tokio::io::AsyncReadExt as _;
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf).await {
            if n == 0 {
                break;
            }
            piped.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    child.kill().await.unwrap();
    let piped = String::from_utf8_lossy(&piped);
    assert!(
        piped.contains("Name:") && piped.contains("Paused"),
        "{piped}"
    );
    assert!(!piped.contains('\x1b'), "{piped:?}");
}
