//! `status`: print the phase of a rollout as it changes, until it is Healthy or Degraded.

use std::pin::pin;

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use sluice_api::Rollout;
use sluice_api::rollout::RolloutPhase;

use super::{emit, get_rollout, rollouts};
use crate::cli::StatusArgs;
use crate::kube_target::Target;
use crate::phase::rollout_phase;

pub async fn run(target: &Target, args: &StatusArgs) -> anyhow::Result<()> {
    let api = rollouts(target);
    // A first read reports a missing rollout or missing rights at once.
    let rollout = get_rollout(&api, &args.name).await?;
    if !args.watch {
        let (phase, message) = rollout_phase(&rollout);
        return emit(&format!("{}\n", status_line(&phase, &message)));
    }
    let watch = watch_until_done(&api, &args.name);
    if args.timeout.is_zero() {
        return watch.await;
    }
    match tokio::time::timeout(args.timeout, watch).await {
        Ok(result) => result,
        Err(_) => bail!("Rollout status watch exceeded timeout"),
    }
}

/// Follows the rollout through a watch, printing each new status line.
async fn watch_until_done(api: &kube::Api<Rollout>, name: &str) -> anyhow::Result<()> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = pin!(watcher(api.clone(), config).default_backoff());
    let mut last_line = None;
    while let Some(event) = events.next().await {
        let rollout = match event {
            Ok(watcher::Event::Apply(rollout) | watcher::Event::InitApply(rollout)) => rollout,
            Ok(watcher::Event::Delete(_)) => bail!("rollout {name:?} was deleted"),
            Ok(watcher::Event::Init | watcher::Event::InitDone) => continue,
            // The watch is retried with a backoff; say why the output stalls.
            Err(e) => {
                super::warn(&format!("watching rollout {name:?}: {e}"));
                continue;
            }
        };
        let (phase, message) = rollout_phase(&rollout);
        let line = status_line(&phase, &message);
        if last_line.as_ref() != Some(&line) {
            emit(&format!("{line}\n"))?;
            last_line = Some(line);
        }
        match outcome(&phase, &message) {
            Outcome::Wait => {}
            Outcome::Done => return Ok(()),
            Outcome::Failed(error) => return Err(anyhow::anyhow!(error)),
        }
    }
    Err(anyhow::anyhow!("the watch of rollout {name:?} ended")).context("watching the rollout")
}

/// `Phase - message`, or just the phase without a message.
pub fn status_line(phase: &RolloutPhase, message: &str) -> String {
    if message.is_empty() {
        phase.to_string()
    } else {
        format!("{phase} - {message}")
    }
}

/// Whether watching goes on.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Wait,
    Done,
    Failed(String),
}

pub fn outcome(phase: &RolloutPhase, message: &str) -> Outcome {
    match phase {
        RolloutPhase::Healthy => Outcome::Done,
        RolloutPhase::Degraded => Outcome::Failed(format!(
            "The rollout is in a degraded state with message: {message}"
        )),
        _ => Outcome::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_show_phase_and_message() {
        assert_eq!(
            status_line(
                &RolloutPhase::Progressing,
                "more replicas need to be updated"
            ),
            "Progressing - more replicas need to be updated"
        );
        assert_eq!(status_line(&RolloutPhase::Healthy, ""), "Healthy");
    }

    #[test]
    fn healthy_ends_degraded_fails_others_wait() {
        assert_eq!(outcome(&RolloutPhase::Healthy, ""), Outcome::Done);
        assert_eq!(
            outcome(&RolloutPhase::Paused, "CanaryPauseStep"),
            Outcome::Wait
        );
        assert_eq!(outcome(&RolloutPhase::Progressing, ""), Outcome::Wait);
        assert_eq!(
            outcome(&RolloutPhase::Degraded, "RolloutAborted: Rollout aborted update to revision 2"),
            Outcome::Failed(
                "The rollout is in a degraded state with message: RolloutAborted: Rollout aborted update to revision 2"
                    .into()
            )
        );
    }
}
