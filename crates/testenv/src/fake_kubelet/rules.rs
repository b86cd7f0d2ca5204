//! The rules by which the fake kubelet decides what each container of a pod does.
//!
//! There is no container runtime, so a pod's behaviour is read from its spec. Tests use these
//! rules to simulate good and bad versions of an application:
//!
//! | rule | trigger | outcome |
//! |---|---|---|
//! | image pull failure | a container image containing `does-not-exist` | the container never starts: waiting with reason `ErrImagePull`, then `ImagePullBackOff`; the pod stays `Pending` and never Ready |
//! | crash loop | a container entrypoint starting with `/bad-command` | waiting with reason `CrashLoopBackOff`, last state terminated with exit code 1, `restartCount` rising with an exponential back-off (1 s, 2 s, 4 s ... capped at 20 s); pod `Running`, never Ready |
//! | readiness delay | annotation `sluice.dev/ready-delay` (`"5"`, `"1.5"`, `"500ms"`, `"1m30s"`) | containers run at once and turn Ready after that delay; without the annotation the kubelet's default (`--ready-delay`, 1 s) applies |
//! | never ready | annotation `sluice.dev/never-ready: "true"` | containers run but never turn Ready |
//! | run to completion | owner is a `Job`, or `restartPolicy` is `Never` or `OnFailure` | a `/bad-command` container exits with code 1 after the default run time and the pod ends `Failed`; a container whose command line holds `sleep N` exits with code 0 after N seconds; any other container exits with code 0 after the default run time (`--run-duration`, 1 s). The pod ends `Succeeded` when every container exited with 0 |
//!
//! The entrypoint of a container is `command[0]`, or `args[0]` when there is no `command`: an
//! image's own entrypoint is unknown here, so the first argument stands in for it. The `sleep N`
//! search looks through `command` and `args` together, split at whitespace and shell separators,
//! so `["sh", "-c", "sleep 5 && echo done"]` runs for five seconds. The rules are applied in the
//! order of the table: a bad image wins over a bad command, which wins over the annotations.
//! Init containers are not run; the pod is `Initialized` at once. A `restartPolicy: OnFailure`
//! pod with a bad command fails instead of restarting in place.
//!
//! Everything here is a pure function of the pod and the time elapsed since the kubelet started
//! it, so that the outcome is easy to test and the kubelet only needs to wake up at the
//! [`Evaluation::next_change`] instant.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

/// An image name containing this never gets pulled.
pub const IMAGE_PULL_FAILURE_MARKER: &str = "does-not-exist";
/// An entrypoint starting with this crashes with exit code 1.
pub const BAD_COMMAND_PREFIX: &str = "/bad-command";
/// Delay between a container starting and turning Ready.
pub const READY_DELAY_ANNOTATION: &str = "sluice.dev/ready-delay";
/// `"true"` keeps the pod's containers running but never Ready.
pub const NEVER_READY_ANNOTATION: &str = "sluice.dev/never-ready";

/// The durations behind the rules; the readiness delay and the run time come from flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timings {
    /// Readiness delay of pods without the ready-delay annotation.
    pub ready_delay: Duration,
    /// Run time of a run-to-completion container without a `sleep N`.
    pub run_duration: Duration,
    /// How long a failed image pull shows `ErrImagePull` before `ImagePullBackOff`.
    pub image_pull_backoff_after: Duration,
    /// First crash-loop restart delay; it doubles on every restart.
    pub crash_backoff_base: Duration,
    /// Longest crash-loop restart delay.
    pub crash_backoff_cap: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            ready_delay: Duration::from_secs(1),
            run_duration: Duration::from_secs(1),
            image_pull_backoff_after: Duration::from_secs(2),
            crash_backoff_base: Duration::from_secs(1),
            crash_backoff_cap: Duration::from_secs(20),
        }
    }
}

/// What the rules look at in a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// Owned by a Job, or a restart policy other than `Always`.
    pub run_to_completion: bool,
    /// The ready-delay annotation, when present and valid.
    pub ready_delay: Option<Duration>,
    pub never_ready: bool,
    pub containers: Vec<ContainerFacts>,
}

/// What the rules look at in a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerFacts {
    pub name: String,
    pub image: String,
    /// `command[0]`, else `args[0]`.
    pub entrypoint: Option<String>,
    /// The `N` of a `sleep N` in the command line.
    pub sleep: Option<Duration>,
}

impl PodFacts {
    /// Reads the facts from a pod. Problems that do not stop the pod (an unparsable annotation)
    /// come back as warnings, and the default applies.
    pub fn from_pod(pod: &Pod) -> (PodFacts, Vec<String>) {
        let mut warnings = Vec::new();
        let annotations = pod.metadata.annotations.as_ref();
        let annotation = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
        let ready_delay = annotation(READY_DELAY_ANNOTATION).and_then(|raw| {
            parse_duration(raw)
                .map_err(|e| warnings.push(format!("ignoring {READY_DELAY_ANNOTATION}: {e}")))
                .ok()
        });
        let never_ready = annotation(NEVER_READY_ANNOTATION)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let owned_by_job = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Job" && o.api_version.starts_with("batch/"));
        let spec = pod.spec.as_ref();
        let restarts_always = spec
            .and_then(|s| s.restart_policy.as_deref())
            .is_none_or(|p| p == "Always");
        let containers = spec
            .map(|s| {
                s.containers
                    .iter()
                    .map(ContainerFacts::from_container)
                    .collect()
            })
            .unwrap_or_default();
        let facts = PodFacts {
            run_to_completion: owned_by_job || !restarts_always,
            ready_delay,
            never_ready,
            containers,
        };
        (facts, warnings)
    }
}

impl ContainerFacts {
    pub fn from_container(container: &Container) -> ContainerFacts {
        let command = container.command.as_deref().unwrap_or_default();
        let args = container.args.as_deref().unwrap_or_default();
        let entrypoint = command.first().or(args.first()).cloned();
        let words: Vec<&str> = command.iter().chain(args).map(String::as_str).collect();
        ContainerFacts {
            name: container.name.clone(),
            image: container.image.clone().unwrap_or_default(),
            entrypoint,
            sleep: find_sleep(&words),
        }
    }

    fn has_bad_image(&self) -> bool {
        self.image.contains(IMAGE_PULL_FAILURE_MARKER)
    }

    fn has_bad_command(&self) -> bool {
        self.entrypoint
            .as_deref()
            .is_some_and(|e| e.starts_with(BAD_COMMAND_PREFIX))
    }
}

/// The `N` of the first `sleep N` in a command line.
fn find_sleep(words: &[&str]) -> Option<Duration> {
    let tokens: Vec<&str> = words
        .iter()
        .flat_map(|w| w.split(|c: char| c.is_whitespace() || ";&|()".contains(c)))
        .filter(|t| !t.is_empty())
        .collect();
    tokens.windows(2).find_map(|pair| {
        (pair[0] == "sleep")
            .then(|| parse_duration(pair[1]).ok())
            .flatten()
    })
}

/// Parses plain seconds (`"5"`, `"1.5"`) or a Go-style duration (`"500ms"`, `"1m30s"`, `"2h"`).
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let text = raw.trim();
    if text.is_empty() {
        return Err("empty duration".to_string());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|e| format!("{raw:?}: {e}"));
    }
    let mut total = 0.0_f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{raw:?}: missing unit"))?;
        let number: f64 = rest[..number_len]
            .parse()
            .map_err(|_| format!("{raw:?}: expected a number"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            unit => return Err(format!("{raw:?}: unknown unit {unit:?}")),
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("{raw:?}: {e}"))
}

/// A pod phase as the kubelet reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
}

/// One run of a container that ended. Times are offsets from the pod's start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    pub exit_code: i32,
    pub reason: &'static str,
    pub started: Duration,
    pub finished: Duration,
}

/// The state of a container. Times are offsets from the pod's start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunState {
    Waiting {
        reason: &'static str,
        message: String,
    },
    Running {
        since: Duration,
    },
    Terminated(Termination),
}

/// The outcome for one container at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerOutcome {
    pub name: String,
    pub image: String,
    pub state: RunState,
    pub last_termination: Option<Termination>,
    pub restart_count: i32,
    pub started: bool,
    pub ready: bool,
}

/// The outcome for a whole pod at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluation {
    pub phase: Phase,
    pub containers: Vec<ContainerOutcome>,
    /// Elapsed time at which the outcome changes next, if it ever does.
    pub next_change: Option<Duration>,
}

impl Evaluation {
    /// Ready: running with every container ready.
    pub fn ready(&self) -> bool {
        self.phase == Phase::Running
            && !self.containers.is_empty()
            && self.containers.iter().all(|c| c.ready)
    }
}

/// Keeps the earliest future instant at which something changes.
struct NextChange {
    elapsed: Duration,
    earliest: Option<Duration>,
}

impl NextChange {
    fn at(&mut self, instant: Duration) {
        if instant > self.elapsed {
            self.earliest = Some(self.earliest.map_or(instant, |e| e.min(instant)));
        }
    }
}

/// Applies the rules to a pod that has been running for `elapsed`.
pub fn evaluate(facts: &PodFacts, timings: &Timings, elapsed: Duration) -> Evaluation {
    let mut next = NextChange {
        elapsed,
        earliest: None,
    };
    let containers: Vec<ContainerOutcome> = facts
        .containers
        .iter()
        .map(|c| evaluate_container(c, facts, timings, elapsed, &mut next))
        .collect();
    let pulling = facts.containers.iter().any(ContainerFacts::has_bad_image);
    let all_terminated = containers
        .iter()
        .all(|c| matches!(c.state, RunState::Terminated(_)));
    let phase = if pulling {
        Phase::Pending
    } else if facts.run_to_completion && all_terminated && !containers.is_empty() {
        let all_succeeded = containers
            .iter()
            .all(|c| matches!(&c.state, RunState::Terminated(t) if t.exit_code == 0));
        if all_succeeded {
            Phase::Succeeded
        } else {
            Phase::Failed
        }
    } else {
        Phase::Running
    };
    Evaluation {
        phase,
        containers,
        next_change: next.earliest,
    }
}

fn evaluate_container(
    container: &ContainerFacts,
    facts: &PodFacts,
    timings: &Timings,
    elapsed: Duration,
    next: &mut NextChange,
) -> ContainerOutcome {
    let outcome = |state, last_termination, restart_count, started, ready| ContainerOutcome {
        name: container.name.clone(),
        image: container.image.clone(),
        state,
        last_termination,
        restart_count,
        started,
        ready,
    };
    if container.has_bad_image() {
        next.at(timings.image_pull_backoff_after);
        let reason = if elapsed < timings.image_pull_backoff_after {
            "ErrImagePull"
        } else {
            "ImagePullBackOff"
        };
        let message = format!("Back-off pulling image \"{}\"", container.image);
        return outcome(RunState::Waiting { reason, message }, None, 0, false, false);
    }
    let ready_delay = facts.ready_delay.unwrap_or(timings.ready_delay);
    let running = |next: &mut NextChange| {
        let ready = !facts.never_ready && elapsed >= ready_delay;
        if !facts.never_ready {
            next.at(ready_delay);
        }
        (
            RunState::Running {
                since: Duration::ZERO,
            },
            ready,
        )
    };
    if facts.run_to_completion {
        let (exit_code, run_time) = if container.has_bad_command() {
            (1, timings.run_duration)
        } else {
            (0, container.sleep.unwrap_or(timings.run_duration))
        };
        if elapsed >= run_time {
            let reason = if exit_code == 0 { "Completed" } else { "Error" };
            let termination = Termination {
                exit_code,
                reason,
                started: Duration::ZERO,
                finished: run_time,
            };
            return outcome(RunState::Terminated(termination), None, 0, false, false);
        }
        next.at(run_time);
        let (state, ready) = running(next);
        return outcome(state, None, 0, true, ready);
    }
    if container.has_bad_command() {
        let (restarts, last_crash, next_restart) = crash_loop(timings, elapsed);
        next.at(next_restart);
        let state = RunState::Waiting {
            reason: "CrashLoopBackOff",
            message: format!("back-off restarting failed container {}", container.name),
        };
        let termination = Termination {
            exit_code: 1,
            reason: "Error",
            started: last_crash,
            finished: last_crash,
        };
        return outcome(state, Some(termination), restarts, false, false);
    }
    let (state, ready) = running(next);
    outcome(state, None, 0, true, ready)
}

/// Crash-loop schedule: restart k happens `base * 2^(k-1)` (capped) after restart k-1. Returns the
/// restart count at `elapsed`, when the latest crash happened and when the next restart happens.
fn crash_loop(timings: &Timings, elapsed: Duration) -> (i32, Duration, Duration) {
    let cap = timings.crash_backoff_cap.max(Duration::from_millis(1));
    let mut step = timings
        .crash_backoff_base
        .max(Duration::from_millis(1))
        .min(cap);
    let mut at = Duration::ZERO;
    let mut restarts: i32 = 0;
    while step < cap {
        if at + step > elapsed {
            return (restarts, at, at + step);
        }
        at += step;
        restarts = restarts.saturating_add(1);
        step = (step * 2).min(cap);
    }
    // Past the doubling phase every restart is `cap` apart.
    let more = ((elapsed - at).as_nanos() / cap.as_nanos()) as u32;
    let at = at + cap * more;
    let restarts = restarts.saturating_add(i32::try_from(more).unwrap_or(i32::MAX));
    (restarts, at, at + cap)
}

#[cfg(test)]
mod tests;
