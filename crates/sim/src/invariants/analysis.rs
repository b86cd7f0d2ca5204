//! What must hold of AnalysisRuns. An Inconclusive verdict pauses the update on that run
//! until a user resumes or aborts, as Argo does: the controller must neither lift that pause
//! itself nor measure again behind the user's back, which is what Argo's background analysis
//! once did (it re-created the run while the Rollout sat at a pause step, #3850). The update
//! is held meanwhile: only a timed pause step may run out, and only once its time is up. A
//! user's resume measures again with a new run.
//!
//! A run is identified by what it measures: its Rollout, `rollout-type`, pod-template hash,
//! revision and, for step analysis, step index ([`RunKey`]).

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use sluice_api::common::AnalysisPhase;
use sluice_api::rollout::RolloutPause;
use sluice_engine::analysis::{ROLLOUT_TYPE, STEP_INDEX, TYPE_BACKGROUND};
use sluice_engine::labels::{POD_TEMPLATE_HASH, REVISION};

use super::{annotation, has_pause};
use crate::analysis_runs::{is_finished, phase_of};
use crate::api_model::{ApiServer, Kind, name_of};
use crate::controller::Replica;

pub const NOT_RECREATED_WHILE_INCONCLUSIVE: &str = "analysis-run-not-recreated-while-inconclusive";
pub const PAUSE_STEP_HELD: &str = "pause-step-held-while-inconclusive";
pub const UPDATE_HELD: &str = "update-held-while-inconclusive";
pub const ONE_LIVE_RUN: &str = "one-live-analysis-run-per-key";
pub const INCONCLUSIVE_PAUSES: &str = "inconclusive-analysis-pauses-the-update";
pub const PAUSED_UNTIL_PROMOTED: &str = "inconclusive-pause-held-until-promoted";
pub const RUNS_AT_END: &str = "analysis-runs-as-inputs-dictate";
pub const PAUSE_LIFTED_BY_USERS_ONLY: &str = "inconclusive-pause-lifted-by-users-only";

/// The pause reason of an update waiting on a user's judgement of an Inconclusive run.
pub const INCONCLUSIVE_PAUSE: &str = "InconclusiveAnalysisRun";
/// The annotation marking the runs of an aborted attempt at a retry (the engine's
/// `SUPERSEDED_BY_RETRY`).
const SUPERSEDED_BY_RETRY: &str = "rollouts.sluice.dev/superseded-by-retry";
/// The pause reason of a pause step.
const PAUSE_STEP: &str = "CanaryPauseStep";
/// The simulation's clock: milliseconds since this second (the scheduler's epoch).
const EPOCH_SECONDS: i64 = 1_800_000_000;

/// What a run measures; two runs with one key measure the same thing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunKey {
    pub rollout: String,
    pub role: String,
    pub pod_hash: String,
    pub revision: String,
    pub step: Option<String>,
}

impl RunKey {
    /// The key of a run a Rollout made; `None` for anything else.
    pub fn of(run: &Value) -> Option<RunKey> {
        let label = |k: &str| {
            run.pointer("/metadata/labels")
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Some(RunKey {
            rollout: Replica::run_owner(run)?,
            role: label(ROLLOUT_TYPE)?,
            pod_hash: label(POD_TEMPLATE_HASH).unwrap_or_default(),
            revision: annotation(run, REVISION)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            step: label(STEP_INDEX),
        })
    }
}

impl std::fmt::Display for RunKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} hash {} revision {}",
            self.rollout, self.role, self.pod_hash, self.revision
        )?;
        if let Some(step) = &self.step {
            write!(f, " step {step}")?;
        }
        Ok(())
    }
}

fn uid(v: &Value) -> &str {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Inconclusive: the update must wait for a user.
fn holds_the_update(run: &Value) -> bool {
    phase_of(run) == Some(AnalysisPhase::Inconclusive)
}

fn status_str<'v>(ro: &'v Value, field: &str) -> Option<&'v str> {
    ro.pointer(&format!("/status/{field}"))
        .and_then(Value::as_str)
}

fn status_true(ro: &Value, field: &str) -> bool {
    ro.pointer(&format!("/status/{field}")) == Some(&Value::Bool(true))
}

fn step_index(ro: &Value) -> i64 {
    ro.pointer("/status/currentStepIndex")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The background runs of a Rollout's current pod template.
pub fn background_runs(api: &ApiServer, rollout: &str) -> Vec<String> {
    let Some(ro) = api.get(Kind::Rollout, rollout) else {
        return Vec::new();
    };
    let hash = status_str(ro, "currentPodHash").unwrap_or_default();
    api.list(Kind::AnalysisRun)
        .iter()
        .filter_map(|run| Some((RunKey::of(run)?, name_of(run).to_string())))
        .filter(|(k, _)| k.rollout == rollout && k.role == TYPE_BACKGROUND && k.pod_hash == hash)
        .map(|(_, name)| name)
        .collect()
}

/// The runs of a Rollout that still measure: not finished, whether or not asked to terminate.
pub fn measuring(api: &ApiServer, rollout: &str) -> Vec<String> {
    api.list(Kind::AnalysisRun)
        .iter()
        .filter(|run| !is_finished(run))
        .filter(|run| RunKey::of(run).is_some_and(|k| k.rollout == rollout))
        .map(|run| name_of(run).to_string())
        .collect()
}

/// Violations found, to be stamped with the time by the caller.
pub type Found = Vec<(&'static str, String)>;

#[derive(Debug, Default)]
pub struct AnalysisChecks {
    /// Every run uid committed so far: the first change of a uid is its creation.
    seen: BTreeSet<String>,
    /// Keys whose run holds its update (Inconclusive, no resume since), with the run's name.
    held: BTreeMap<RunKey, String>,
    /// Rollouts last seen paused on an Inconclusive run.
    paused: BTreeSet<String>,
    /// Per controller process: the runs its last list returned, which its current reconcile
    /// decides on (a replica reconciles one Rollout at a time).
    listed: BTreeMap<String, Vec<Value>>,
}

impl AnalysisChecks {
    /// A committed change to an AnalysisRun.
    pub fn on_run(&mut self, run: &Value) -> Found {
        let mut found = Found::new();
        let Some(key) = RunKey::of(run) else {
            return found;
        };
        let name = name_of(run).to_string();
        if self.seen.insert(uid(run).to_string())
            && let Some(holder) = self.held.get(&key)
        {
            found.push((
                NOT_RECREATED_WHILE_INCONCLUSIVE,
                format!("analysisrun/{name} created for {key} while {holder} is Inconclusive and nobody resumed"),
            ));
        }
        if holds_the_update(run) {
            self.held.insert(key, name);
        }
        found
    }

    /// A committed change to a Rollout: an abort, a full promotion or the end of the
    /// Inconclusive pause (a user resumed: controllers never lift it, which
    /// [`PAUSE_LIFTED_BY_USERS_ONLY`] checks) ends whatever waited on a user's judgement; a
    /// retry or a resume may measure again.
    pub fn on_rollout(&mut self, ro: &Value) {
        let name = name_of(ro).to_string();
        let resumed = if has_pause(ro, INCONCLUSIVE_PAUSE) {
            self.paused.insert(name.clone());
            false
        } else {
            self.paused.remove(&name)
        };
        if resumed || status_true(ro, "abort") || status_true(ro, "promoteFull") {
            self.held.retain(|k, _| k.rollout != name);
        }
    }

    /// A controller's list of AnalysisRuns was served.
    pub fn on_list(&mut self, identity: &str, runs: Vec<Value>) {
        self.listed.insert(identity.to_string(), runs);
    }

    /// A controller's status write committed: `before` is the Rollout it decided on (the write
    /// is conditional on its resourceVersion), `after` the result; `api` is the state now.
    pub fn on_status_write(
        &self,
        api: &ApiServer,
        at_ms: u64,
        identity: &str,
        before: &Value,
        after: &Value,
    ) -> Found {
        let now = Timestamp::from_second(EPOCH_SECONDS).unwrap_or(Timestamp::UNIX_EPOCH)
            + SignedDuration::from_millis(i64::try_from(at_ms).unwrap_or(i64::MAX));
        let mut found = held_update(identity, before, after, now);
        found.extend(self.paused_on_what_it_saw(api, identity, before, after));
        found
    }

    /// The background run the decision saw (the newest of the one the Rollout records and
    /// those not asked to terminate, leaving out those a retry superseded): if it was
    /// Inconclusive, the update must be
    /// paused on it. A full promotion skips analysis; an abort, or an update that had
    /// completed before, reads no verdict; a retry or a user's resume measures again.
    fn paused_on_what_it_saw(
        &self,
        _api: &ApiServer,
        identity: &str,
        before: &Value,
        after: &Value,
    ) -> Found {
        let mut found = Found::new();
        let name = name_of(after);
        let hash = status_str(after, "currentPodHash").unwrap_or_default();
        let no_pause = before
            .pointer("/status/pauseConditions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        let resumed = status_true(before, "controllerPause") && no_pause;
        let retried = !status_true(before, "abort")
            && before
                .pointer("/status/abortedAt")
                .is_some_and(|v| !v.is_null());
        let skipped = status_true(after, "abort")
            || status_true(before, "promoteFull")
            || status_true(after, "promoteFull")
            || status_str(before, "stableRS") == Some(hash)
            || resumed
            || retried;
        let recorded = before
            .pointer("/status/canary/currentBackgroundAnalysisRunStatus/name")
            .and_then(Value::as_str);
        let revision = annotation(after, REVISION)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let current = self
            .listed
            .get(identity)
            .into_iter()
            .flatten()
            .filter(|run| {
                RunKey::of(run).is_some_and(|k| {
                    k.rollout == name
                        && k.role == TYPE_BACKGROUND
                        && k.pod_hash == hash
                        && k.revision == revision
                })
            })
            .filter(|run| run.pointer("/metadata/deletionTimestamp").is_none())
            .filter(|run| annotation(run, SUPERSEDED_BY_RETRY).is_none())
            .filter(|run| {
                Some(name_of(run)) == recorded
                    || run.pointer("/spec/terminate") != Some(&Value::Bool(true))
            })
            .max_by_key(|run| {
                (
                    run.pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    name_of(run).to_string(),
                )
            });
        if let Some(run) = current
            && !skipped
            && holds_the_update(run)
            && !has_pause(after, INCONCLUSIVE_PAUSE)
        {
            found.push((
                INCONCLUSIVE_PAUSES,
                format!(
                    "{identity} saw analysisrun/{} Inconclusive and wrote rollout/{name} without a {INCONCLUSIVE_PAUSE} pause (phase {}, step {})",
                    name_of(run),
                    status_str(after, "phase").unwrap_or("-"),
                    step_index(after),
                ),
            ));
        }
        found
    }

    /// After every change: no two runs measure the same thing at once.
    pub fn after_change(&self, api: &ApiServer) -> Found {
        let mut live: BTreeMap<RunKey, Vec<String>> = BTreeMap::new();
        for run in api.list(Kind::AnalysisRun) {
            let terminating = run.pointer("/spec/terminate") == Some(&Value::Bool(true));
            if is_finished(&run) || terminating {
                continue;
            }
            if let Some(key) = RunKey::of(&run) {
                live.entry(key).or_default().push(name_of(&run).to_string());
            }
        }
        live.into_iter()
            .filter(|(_, names)| names.len() > 1)
            .map(|(key, names)| (ONE_LIVE_RUN, format!("{key}: {names:?} all measuring")))
            .collect()
    }
}

/// While paused on an Inconclusive run the update is held: no step completes but a timed
/// pause step whose time is up (Argo lets it run out, leaving `InconclusiveAnalysisRun` the
/// pause that holds), and the update does not complete. A full promotion skips every step by
/// the user's word. Nor may a controller lift that pause: only a user resumes.
fn held_update(identity: &str, before: &Value, after: &Value, now: Timestamp) -> Found {
    let mut found = Found::new();
    let name = name_of(after);
    let hash = status_str(after, "currentPodHash").unwrap_or_default();
    let inconclusive = (has_pause(before, INCONCLUSIVE_PAUSE)
        || has_pause(after, INCONCLUSIVE_PAUSE))
        && !status_true(before, "promoteFull")
        && !status_true(after, "abort");
    let same_update = status_str(before, "currentPodHash") == Some(hash);
    let (from, to) = (step_index(before), step_index(after));
    let steps = after
        .pointer("/spec/strategy/canary/steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let pause_at = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| steps.get(i))
            .and_then(|s| s.get("pause"))
    };
    if inconclusive && same_update && to > from {
        // A pause step the Rollout shows no pause-step condition for is taken as resumed
        // (Argo's rule: the controller's pause is up without one).
        let timed_out = to == from + 1
            && pause_at(from).is_some()
            && match pause_started(before) {
                None => true,
                Some(started) => pause_at(from)
                    .and_then(|p| serde_json::from_value::<RolloutPause>(p.clone()).ok())
                    .and_then(|p| p.duration()?.ok())
                    .is_some_and(|duration| {
                        SignedDuration::try_from(duration).is_ok_and(|d| started + d <= now)
                    }),
            };
        if !timed_out {
            let passed_pause = (from..to).any(|i| pause_at(i).is_some());
            let invariant = if passed_pause {
                PAUSE_STEP_HELD
            } else {
                UPDATE_HELD
            };
            found.push((
                invariant,
                format!("{identity} moved rollout/{name} from step {from} to {to} while paused ({INCONCLUSIVE_PAUSE})"),
            ));
        }
    }
    let completes =
        status_str(after, "stableRS") == Some(hash) && status_str(before, "stableRS") != Some(hash);
    if inconclusive && same_update && completes {
        found.push((
            UPDATE_HELD,
            format!("{identity} made {hash} stable for rollout/{name} while paused ({INCONCLUSIVE_PAUSE})"),
        ));
    }
    if has_pause(before, INCONCLUSIVE_PAUSE)
        && !has_pause(after, INCONCLUSIVE_PAUSE)
        && same_update
        && !status_true(after, "abort")
        && !status_true(before, "promoteFull")
    {
        found.push((
            PAUSE_LIFTED_BY_USERS_ONLY,
            format!("{identity} lifted the {INCONCLUSIVE_PAUSE} pause of rollout/{name}"),
        ));
    }
    found
}

/// When the pause step's pause began, by the Rollout's `CanaryPauseStep` condition.
fn pause_started(ro: &Value) -> Option<Timestamp> {
    ro.pointer("/status/pauseConditions")?
        .as_array()?
        .iter()
        .find(|c| c["reason"] == PAUSE_STEP)?
        .get("startTime")?
        .as_str()?
        .parse()
        .ok()
}

/// The script's check that a Rollout still waits on a user, with exactly `background_runs`
/// background runs.
pub fn expect_paused(api: &ApiServer, rollout: &str, reason: &str, background: usize) -> Found {
    let mut found = Found::new();
    let Some(ro) = api.get(Kind::Rollout, rollout) else {
        return found;
    };
    if !has_pause(ro, reason) {
        found.push((
            PAUSED_UNTIL_PROMOTED,
            format!(
                "rollout/{rollout} is {} at step {} without a {reason} pause, before any promote",
                status_str(ro, "phase").unwrap_or("-"),
                step_index(ro)
            ),
        ));
    }
    let runs = background_runs(api, rollout);
    if runs.len() != background {
        found.push((
            PAUSED_UNTIL_PROMOTED,
            format!("rollout/{rollout} has background runs {runs:?}, expected {background}"),
        ));
    }
    found
}
