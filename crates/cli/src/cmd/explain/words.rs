//! The words of `explain`: each [`Wait`] the engine decided on, said plainly, with the
//! command that moves the rollout on. A pure function of the engine's plan, the objects and
//! the time, tested with the exact text.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use sluice_api::Rollout;
use sluice_api::analysis::AnalysisRun;
use sluice_api::rollout::RolloutStatus;
use sluice_engine::Wait;

use crate::render::age::human_duration;

/// What `explain` words.
pub struct Facts<'a> {
    pub rollout: &'a Rollout,
    /// The status the engine decided.
    pub status: &'a RolloutStatus,
    pub waits: &'a [Wait],
    pub pods: &'a [Pod],
    pub runs: &'a [AnalysisRun],
    pub now: Timestamp,
    /// `kubectl sluice` or `kubectl argo rollouts`, for the commands shown.
    pub command: &'a str,
    pub namespace: &'a str,
}

/// The explanation: a headline, then one paragraph per wait.
pub fn explain_text(f: &Facts<'_>) -> String {
    let name = f.rollout.metadata.name.as_deref().unwrap_or_default();
    let phase = f
        .status
        .phase
        .as_ref()
        .map_or_else(|| "Unknown".to_owned(), |p| p.to_string());
    let mut out = format!("Rollout {name:?} is {phase}");
    if let Some(message) = f.status.message.as_deref().filter(|m| !m.is_empty()) {
        out.push_str(&format!(": {message}"));
    }
    out.push('\n');
    if f.waits.is_empty() {
        out.push_str(if phase == "Healthy" {
            "It waits for nothing: the update is complete.\n"
        } else {
            "It waits for nothing the controller decides on; it moves on by itself.\n"
        });
        return out;
    }
    out.push_str("It waits for:\n");
    for wait in f.waits {
        let (what, next) = words(f, name, wait);
        out.push_str(&format!("  - {what}\n"));
        if let Some(next) = next {
            out.push_str(&format!("    {next}\n"));
        }
    }
    out
}

/// One wait: what it is, and what moves the rollout on.
fn words(f: &Facts<'_>, name: &str, wait: &Wait) -> (String, Option<String>) {
    let cmd = |args: &str| format!("{} {args} -n {}", f.command, f.namespace);
    match wait {
        Wait::InvalidSpec { message } => (
            format!("a valid spec: {message}"),
            Some(format!(
                "To move on: fix that field and apply the Rollout again (`{}` checks a file first).",
                cmd("lint -f FILE")
            )),
        ),
        Wait::PausedByUser => (
            format!(
                "a resume: spec.paused is true{}",
                paused_by(f.rollout)
                    .map(|who| format!(" (set by {who})"))
                    .unwrap_or_default()
            ),
            Some(format!("To move on: {}", cmd(&format!("resume {name}")))),
        ),
        Wait::Aborted { message } => (
            format!("a retry or a new revision: the update was aborted ({message})"),
            Some(format!(
                "To try again: {}; or roll out a fixed version.",
                cmd(&format!("retry rollout {name}"))
            )),
        ),
        Wait::PauseStep { step, until } => {
            let total = step_count(f.rollout);
            match until {
                Some(until) => (
                    format!(
                        "the pause of step {}/{total} to end at {} (in {})",
                        step + 1,
                        until.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        left(f.now, *until)
                    ),
                    Some(format!("To go on now: {}", cmd(&format!("promote {name}")))),
                ),
                None => (
                    format!(
                        "a promotion: step {}/{total} is a pause without a duration",
                        step + 1
                    ),
                    Some(format!("To move on: {}", cmd(&format!("promote {name}")))),
                ),
            }
        }
        Wait::PodsNotAvailable {
            replica_set,
            wanted,
            available,
        } => {
            let mut what = format!(
                "the pods of ReplicaSet {replica_set:?} to be available: {available} of {wanted}"
            );
            for line in unready_pods(f, replica_set) {
                what.push_str(&format!("\n      {line}"));
            }
            (
                what,
                Some(format!(
                    "To see why: kubectl describe pods -n {} -l rollouts-pod-template-hash={}",
                    f.namespace,
                    pod_hash_of(replica_set)
                )),
            )
        }
        Wait::AnalysisRunning { run } => (
            format!("AnalysisRun {run:?} to finish measuring{}", metrics(f, run)),
            Some(format!("To skip it: {}", cmd(&format!("promote {name}")))),
        ),
        Wait::AnalysisInconclusive { run } => (
            format!(
                "a decision: AnalysisRun {run:?} was Inconclusive{}",
                metrics(f, run)
            ),
            Some(format!(
                "To go on: {}; to go back: {}",
                cmd(&format!("promote {name}")),
                cmd(&format!("abort {name}"))
            )),
        ),
        Wait::AnalysisFailedPaused { run } => (
            format!(
                "a decision: AnalysisRun {run:?} failed, and the Rollout pauses rather than \
                 aborts on a failed analysis{}",
                metrics(f, run)
            ),
            Some(format!(
                "To measure again: {}; to go back: {}",
                cmd(&format!("promote {name}")),
                cmd(&format!("abort {name}"))
            )),
        ),
        Wait::ExperimentRunning { name: experiment } => (
            format!("Experiment {experiment:?} to finish"),
            Some(format!(
                "To see it: {}; to end it now: {}",
                cmd(&format!("get experiment {experiment}")),
                cmd(&format!("terminate experiment {experiment}"))
            )),
        ),
        Wait::AwaitingPromotion { until: None } => (
            "a promotion: the preview is up and autoPromotionEnabled is false".to_owned(),
            Some(format!(
                "To switch traffic to it: {}",
                cmd(&format!("promote {name}"))
            )),
        ),
        Wait::AwaitingPromotion { until: Some(until) } => (
            format!(
                "the automatic promotion at {} (in {}, autoPromotionSeconds)",
                until.strftime("%Y-%m-%dT%H:%M:%SZ"),
                left(f.now, *until)
            ),
            Some(format!(
                "To promote now: {}",
                cmd(&format!("promote {name}"))
            )),
        ),
        Wait::StepPlugin {
            step,
            name: plugin,
            phase,
            message,
            next,
        } => {
            let mut what = format!("step plugin {plugin:?} of step {}", step + 1);
            match phase.as_deref() {
                None => what.push_str(" to be called"),
                Some(phase) => what.push_str(&format!(" to finish: it answered {phase}")),
            }
            if let Some(m) = message {
                what.push_str(&format!(" ({m})"));
            }
            if let Some(next) = next {
                what.push_str(&format!("; asked again in {}", left(f.now, *next)));
            }
            (
                what,
                Some(format!(
                    "To skip it: {}; to give up: {}",
                    cmd(&format!("promote {name}")),
                    cmd(&format!("abort {name}"))
                )),
            )
        }
        Wait::WeightNotVerified { weight } => (
            format!(
                "the traffic router to carry {weight}% to the canary: the weight is written but not yet read back from the router's objects"
            ),
            Some(format!(
                "To watch it: {}",
                cmd(&format!("get rollout {name} -w"))
            )),
        ),
        Wait::TargetsNotRegistered { service } => (
            format!(
                "the AWS target groups of Service {service} to register every new pod before the old pods go (--aws-verify-target-group)"
            ),
            Some(format!(
                "To see what is missing: {}",
                cmd(&format!("get rollout {name}"))
            )),
        ),
        Wait::ProgressDeadline { since, at } => (
            format!(
                "progress: none since {} ({} ago); the progress deadline fires at {} (in {})",
                since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                human_duration(f.now.duration_since(*since).as_secs()),
                at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                left(f.now, *at)
            ),
            None,
        ),
        Wait::ProgressDeadlineExceeded { message } => (
            format!("progress, past its deadline: {message}"),
            Some(format!(
                "To give up on this version: {}",
                cmd(&format!("abort {name}"))
            )),
        ),
    }
}

/// Time left until `until`, as kubectl writes ages.
fn left(now: Timestamp, until: Timestamp) -> String {
    human_duration(until.duration_since(now).as_secs().max(0))
}

fn step_count(rollout: &Rollout) -> usize {
    rollout
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.steps.as_ref())
        .map_or(0, Vec::len)
}

/// The pod-template hash a ReplicaSet of a Rollout is named with (`NAME-HASH`).
fn pod_hash_of(replica_set: &str) -> &str {
    replica_set.rsplit('-').next().unwrap_or(replica_set)
}

/// Who last set `spec.paused`, from the managed fields: the field manager and the time.
fn paused_by(rollout: &Rollout) -> Option<String> {
    rollout
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .and_then(|f| f.0.pointer("/f:spec/f:paused"))
                .is_some()
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0))
        .map(|m| {
            let who = m
                .manager
                .clone()
                .unwrap_or_else(|| "an unknown client".into());
            match &m.time {
                Some(t) => format!("{who} at {}", t.0.strftime("%Y-%m-%dT%H:%M:%SZ")),
                None => who,
            }
        })
}

/// The pods of a ReplicaSet that are not ready: name, status and since when.
fn unready_pods(f: &Facts<'_>, replica_set: &str) -> Vec<String> {
    let hash = pod_hash_of(replica_set);
    f.pods
        .iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("rollouts-pod-template-hash"))
                .is_some_and(|h| h == hash)
        })
        .filter_map(|pod| {
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
            if ready.is_some_and(|c| c.status == "True") {
                return None;
            }
            let since = ready
                .and_then(|c| c.last_transition_time.as_ref())
                .or(pod.metadata.creation_timestamp.as_ref())
                .map(|t| t.0);
            let name = pod.metadata.name.clone().unwrap_or_default();
            let status = crate::info::pods::pod_status(pod);
            Some(match since {
                Some(since) => format!(
                    "pod {name} is not ready ({status}) since {} ({} ago)",
                    since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    human_duration(f.now.duration_since(since).as_secs())
                ),
                None => format!("pod {name} is not ready ({status})"),
            })
        })
        .collect()
}

/// The metrics of a run with their phase and last value: `; web: Inconclusive, last "7"`.
fn metrics(f: &Facts<'_>, run: &str) -> String {
    let Some(found) = f
        .runs
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(run))
    else {
        return String::new();
    };
    let results = found
        .status
        .as_ref()
        .and_then(|s| s.metric_results.as_ref())
        .cloned()
        .unwrap_or_default();
    let parts: Vec<String> = results
        .iter()
        .map(|m| {
            let phase = m.phase.as_ref().map_or("Pending".into(), |p| p.to_string());
            let last = m
                .measurements
                .as_ref()
                .and_then(|ms| ms.last())
                .and_then(|ms| ms.value.clone());
            let metric = m.name.as_deref().unwrap_or_default();
            match last {
                Some(value) => format!("{metric}: {phase}, last value {value:?}"),
                None => format!("{metric}: {phase}"),
            }
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

#[cfg(test)]
mod tests;
