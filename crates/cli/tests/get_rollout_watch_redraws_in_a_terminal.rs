//! `kubectl sluice get rollout -w` in a real terminal (a tmux pane) while a controller running
//! in-process takes a canary to its pause: the view is redrawn in place (one header on the
//! screen, showing the new state and both images), and Ctrl-C ends it at once, leaving the
//! pane's shell prompt usable. About six seconds.

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

    // Ctrl-C ends the view; the shell answers again.
    tmux.run(&["send-keys", "-t", "view", "C-c", ""]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    tmux.run(&["send-keys", "-t", "view", "clear; echo view-ended", "Enter"]);
    tmux.wait_screen("the shell prompt back", |s| {
        s.lines().any(|l| l.trim() == "view-ended")
    })
    .await;
}
