//! What must hold of the Experiments of canary `experiment` steps. An Experiment's verdict
//! decides its step: a Failed or Errored one must abort the update, which must never go past
//! the step meanwhile. And an Experiment leaves nothing running behind: once the update no
//! longer waits on it, it is terminated; once it has finished, its ReplicaSets are scaled to 0
//! (after its scale-down delay); and none of its ReplicaSets outlives it.
//!
//! The Experiments of an update are those its Rollout owns with the update's pod-template hash
//! and revision, named `<rollout>-<hash>-<revision>-<step>` (then `-1`, `-2`, ... for a step
//! that made more than one); the newest of a step is the one its verdict comes from.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use serde_json::Value;
use sluice_api::common::AnalysisPhase;
use sluice_engine::labels::{EXPERIMENT_NAME, POD_TEMPLATE_HASH, REVISION, SCALE_DOWN_DEADLINE};

use super::analysis::Found;
use super::annotation;
use crate::api_model::{ApiServer, Kind, name_of};
use crate::experiments::{controller_owner, is_finished, phase_of};

pub const FAILED_EXPERIMENT_ABORTS: &str = "failed-experiment-aborts-the-update";
pub const NO_ORPHANED_EXPERIMENT_REPLICA_SETS: &str = "no-orphaned-experiment-replicasets";
pub const NO_LINGERING_EXPERIMENTS: &str = "no-lingering-experiments";

fn status_str<'v>(v: &'v Value, field: &str) -> Option<&'v str> {
    v.pointer(&format!("/status/{field}"))
        .and_then(Value::as_str)
}

fn status_true(v: &Value, field: &str) -> bool {
    v.pointer(&format!("/status/{field}")) == Some(&Value::Bool(true))
}

fn uid(v: &Value) -> Option<&str> {
    v.pointer("/metadata/uid").and_then(Value::as_str)
}

fn step_index(ro: &Value) -> i64 {
    ro.pointer("/status/currentStepIndex")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The Experiments `rollout` owns (by uid).
fn owned_by<'a>(api: &'a [Value], rollout: &Value) -> impl Iterator<Item = &'a Value> {
    let ro_uid = uid(rollout).map(str::to_string);
    api.iter().filter(move |e| {
        controller_owner(e, "Rollout")
            .is_some_and(|o| o.get("uid").and_then(Value::as_str) == ro_uid.as_deref())
    })
}

/// The newest Experiment of each step of the Rollout's current update, by step index.
fn current_update_experiments<'a>(
    experiments: &'a [Value],
    rollout: &Value,
) -> BTreeMap<i64, &'a Value> {
    let name = name_of(rollout);
    let hash = status_str(rollout, "currentPodHash").unwrap_or_default();
    let revision = annotation(rollout, REVISION)
        .and_then(Value::as_str)
        .unwrap_or_default();
    let prefix = format!("{name}-{hash}-{revision}-");
    let mut newest: BTreeMap<i64, (u64, &Value)> = BTreeMap::new();
    for e in owned_by(experiments, rollout) {
        let labelled = e
            .pointer("/metadata/labels")
            .and_then(|l| l.get(POD_TEMPLATE_HASH))
            .and_then(Value::as_str)
            == Some(hash);
        let Some(rest) = name_of(e).strip_prefix(&prefix).filter(|_| labelled) else {
            continue;
        };
        let (step, suffix) = rest.split_once('-').unwrap_or((rest, "0"));
        let (Ok(step), Ok(suffix)) = (step.parse::<i64>(), suffix.parse::<u64>()) else {
            continue;
        };
        let slot = newest.entry(step).or_insert((suffix, e));
        if suffix >= slot.0 {
            *slot = (suffix, e);
        }
    }
    newest.into_iter().map(|(i, (_, e))| (i, e)).collect()
}

fn failed(e: &Value) -> bool {
    matches!(
        phase_of(e),
        Some(AnalysisPhase::Failed | AnalysisPhase::Error)
    )
}

#[derive(Debug, Default)]
pub struct ExperimentChecks {
    /// Failed Experiments whose update was already caught going past them: reported once.
    passed_over: BTreeSet<String>,
}

impl ExperimentChecks {
    /// After every change: see [`passed_over`]; each Experiment is reported once.
    pub fn after_change(&mut self, api: &ApiServer) -> Found {
        passed_over(api)
            .into_iter()
            .filter(|(experiment, _)| self.passed_over.insert(experiment.clone()))
            .map(|(_, v)| v)
            .collect()
    }
}

/// No update goes past (or completes beyond) an experiment step whose Experiment Failed or
/// Errored, unless a user promoted it in full. By Experiment.
fn passed_over(api: &ApiServer) -> Vec<(String, (&'static str, String))> {
    let mut found = Vec::new();
    let experiments = api.list(Kind::Experiment);
    if experiments.is_empty() {
        return found;
    }
    for ro in api.list(Kind::Rollout) {
        if status_true(&ro, "promoteFull") {
            continue;
        }
        let hash = status_str(&ro, "currentPodHash").unwrap_or_default();
        let completed = status_str(&ro, "stableRS") == Some(hash);
        let at = step_index(&ro);
        for (step, e) in current_update_experiments(&experiments, &ro) {
            if failed(e) && (at > step || completed) {
                let detail = (
                    FAILED_EXPERIMENT_ABORTS,
                    format!(
                        "rollout/{} went on to step {at}{} though experiment/{} of step {step} is {}",
                        name_of(&ro),
                        if completed { " and completed" } else { "" },
                        name_of(e),
                        status_str(e, "phase").unwrap_or("-"),
                    ),
                );
                found.push((name_of(e).to_string(), detail));
            }
        }
    }
    found
}

/// At quiescence: the update of a failed Experiment is aborted; no Experiment runs that
/// nothing waits on; no Experiment ReplicaSet is left without its Experiment or up after it
/// finished.
pub fn at_quiescence(api: &ApiServer, now: Timestamp) -> Found {
    let mut found = Found::new();
    let experiments = api.list(Kind::Experiment);
    for ro in api.list(Kind::Rollout) {
        let name = name_of(&ro);
        let aborted = status_true(&ro, "abort");
        let current = current_update_experiments(&experiments, &ro);
        if !status_true(&ro, "promoteFull")
            && let Some((step, e)) = current.iter().find(|(_, e)| failed(e))
            && (!aborted || status_str(&ro, "phase") != Some("Degraded"))
        {
            found.push((
                FAILED_EXPERIMENT_ABORTS,
                format!(
                    "rollout/{name} is {} (abort {aborted}) though experiment/{} of step {step} is {}",
                    status_str(&ro, "phase").unwrap_or("-"),
                    name_of(e),
                    status_str(e, "phase").unwrap_or("-"),
                ),
            ));
        }
        // The one Experiment an update may still wait on: its current step's, recorded as
        // current, while the update neither completed nor was aborted or promoted in full.
        let hash = status_str(&ro, "currentPodHash").unwrap_or_default();
        let waiting = !aborted
            && !status_true(&ro, "promoteFull")
            && status_str(&ro, "stableRS") != Some(hash);
        let awaited = ro
            .pointer("/status/canary/currentExperiment")
            .and_then(Value::as_str)
            .filter(|_| waiting)
            .filter(|e| {
                current
                    .get(&step_index(&ro))
                    .is_some_and(|c| name_of(c) == *e)
            });
        for e in owned_by(&experiments, &ro) {
            if !is_finished(e) && Some(name_of(e)) != awaited {
                found.push((
                    NO_LINGERING_EXPERIMENTS,
                    format!(
                        "experiment/{} is {} (terminate {}) though rollout/{name} waits on {} (step {}, phase {})",
                        name_of(e),
                        status_str(e, "phase").unwrap_or("-"),
                        e.pointer("/spec/terminate").unwrap_or(&Value::Null),
                        awaited.unwrap_or("none"),
                        step_index(&ro),
                        status_str(&ro, "phase").unwrap_or("-"),
                    ),
                ));
            }
        }
    }
    for rs in api.list(Kind::ReplicaSet) {
        found.extend(experiment_replica_set(api, &rs, now));
    }
    for (kind, what) in [
        (Kind::AnalysisRun, "analysisrun"),
        (Kind::Service, "service"),
    ] {
        for obj in api.list(kind) {
            if let Some(detail) = left_running(api, &obj, what) {
                found.push((NO_LINGERING_EXPERIMENTS, detail));
            }
        }
    }
    found
}

/// What a finished Experiment must not leave behind: an AnalysisRun still measuring, a
/// Service (it goes once its template's pods are down).
fn left_running(api: &ApiServer, obj: &Value, what: &str) -> Option<String> {
    let owner = controller_owner(obj, "Experiment")?;
    let exp = api
        .get(Kind::Experiment, owner.get("name")?.as_str()?)
        .filter(|e| uid(e) == owner.get("uid").and_then(Value::as_str))
        .filter(|e| is_finished(e))?;
    if what == "analysisrun" && crate::analysis_runs::is_finished(obj) {
        return None;
    }
    Some(format!(
        "{what}/{} of experiment/{} ({}) is still there{}",
        name_of(obj),
        name_of(exp),
        status_str(exp, "phase").unwrap_or("-"),
        if what == "analysisrun" {
            " measuring"
        } else {
            ""
        },
    ))
}

/// An Experiment's ReplicaSet (one it controls, or one claiming to be by its experiment-name
/// annotation) belongs to an Experiment that exists, and is down once that one finished.
fn experiment_replica_set(api: &ApiServer, rs: &Value, now: Timestamp) -> Found {
    let mut found = Found::new();
    let rs_name = name_of(rs);
    let owner = controller_owner(rs, "Experiment");
    let claimed = annotation(rs, EXPERIMENT_NAME).and_then(Value::as_str);
    let Some(owner) = owner else {
        if let Some(exp) = claimed {
            found.push((
                NO_ORPHANED_EXPERIMENT_REPLICA_SETS,
                format!(
                    "rs/{rs_name} is experiment/{exp}'s by its annotation, but nothing controls it"
                ),
            ));
        }
        return found;
    };
    let exp_name = owner
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(exp) = api
        .get(Kind::Experiment, exp_name)
        .filter(|e| uid(e) == owner.get("uid").and_then(Value::as_str))
    else {
        found.push((
            NO_ORPHANED_EXPERIMENT_REPLICA_SETS,
            format!("rs/{rs_name} belongs to experiment/{exp_name}, which is gone"),
        ));
        return found;
    };
    if !is_finished(exp) {
        return found;
    }
    let spec = rs.pointer("/spec/replicas").and_then(Value::as_i64);
    let pods = rs
        .pointer("/status/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    // Kept up until its scale-down deadline, if that is still to come.
    let held = annotation(rs, SCALE_DOWN_DEADLINE)
        .and_then(Value::as_str)
        .and_then(|d| d.parse::<Timestamp>().ok())
        .is_some_and(|d| d > now);
    if (spec != Some(0) || pods != 0) && !held {
        found.push((
            NO_ORPHANED_EXPERIMENT_REPLICA_SETS,
            format!(
                "rs/{rs_name} of experiment/{exp_name} ({}) still has spec {spec:?}, {pods} pods",
                status_str(exp, "phase").unwrap_or("-")
            ),
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn world(phase: &str, step: i64, abort: bool) -> ApiServer {
        let mut api = ApiServer::new();
        let ro = api
            .create(
                Kind::Rollout,
                json!({"metadata": {"name": "demo", "annotations": {REVISION: "2"}}}),
                now(),
            )
            .unwrap();
        let ro_uid = uid(&ro).unwrap().to_string();
        api.patch(
            Kind::Rollout,
            "demo",
            &json!({"status": {"currentPodHash": "h2", "stableRS": "h1",
                               "currentStepIndex": step, "abort": abort,
                               "phase": if abort { "Degraded" } else { "Progressing" }}}),
            crate::api_model::Endpoint::Status,
        )
        .unwrap();
        let exp = api
            .create(
                Kind::Experiment,
                json!({"metadata": {"name": "demo-h2-2-1", "labels": {POD_TEMPLATE_HASH: "h2"},
                                    "ownerReferences": [{"kind": "Rollout", "name": "demo",
                                        "uid": ro_uid, "controller": true}]},
                       "status": {"phase": phase}}),
                now(),
            )
            .unwrap();
        let exp_uid = uid(&exp).unwrap().to_string();
        api.create(
            Kind::ReplicaSet,
            json!({"metadata": {"name": "demo-h2-2-1-canary",
                                "annotations": {EXPERIMENT_NAME: "demo-h2-2-1"},
                                "ownerReferences": [{"kind": "Experiment", "name": "demo-h2-2-1",
                                    "uid": exp_uid, "controller": true}]},
                   "spec": {"replicas": 1}}),
            now(),
        )
        .unwrap();
        api
    }

    fn names(found: &Found) -> Vec<&'static str> {
        found.iter().map(|(n, _)| *n).collect()
    }

    #[test]
    fn a_failed_experiment_must_abort_and_hold_its_step() {
        let after_change = |api: &ApiServer| ExperimentChecks::default().after_change(api);
        let api = world("Failed", 2, false);
        let mut checks = ExperimentChecks::default();
        assert_eq!(
            names(&checks.after_change(&api)),
            [FAILED_EXPERIMENT_ABORTS]
        );
        assert!(checks.after_change(&api).is_empty(), "reported once");
        assert!(
            names(&at_quiescence(&api, now())).contains(&FAILED_EXPERIMENT_ABORTS),
            "not aborted"
        );
        let api = world("Failed", 0, true);
        assert!(after_change(&api).is_empty(), "aborted: back at step 0");
        assert!(!names(&at_quiescence(&api, now())).contains(&FAILED_EXPERIMENT_ABORTS));
        let api = world("Successful", 2, false);
        assert!(after_change(&api).is_empty());
    }

    #[test]
    fn finished_experiments_keep_no_pods_and_nothing_runs_unawaited() {
        // Finished, its ReplicaSet still up: caught.
        let api = world("Successful", 2, false);
        assert_eq!(
            names(&at_quiescence(&api, now())),
            [NO_ORPHANED_EXPERIMENT_REPLICA_SETS]
        );
        // Running while the update is past its step: caught, its ReplicaSet may run.
        let api = world("Running", 2, false);
        assert_eq!(
            names(&at_quiescence(&api, now())),
            [NO_LINGERING_EXPERIMENTS]
        );
        // Its ReplicaSet without it: caught.
        let mut api = world("Running", 2, false);
        api.delete(Kind::Experiment, "demo-h2-2-1", None).unwrap();
        assert_eq!(
            names(&at_quiescence(&api, now())),
            [NO_ORPHANED_EXPERIMENT_REPLICA_SETS]
        );
    }

    #[test]
    fn the_awaited_experiment_may_run() {
        let mut api = world("Running", 1, false);
        api.patch(
            Kind::Rollout,
            "demo",
            &json!({"status": {"canary": {"currentExperiment": "demo-h2-2-1"}}}),
            crate::api_model::Endpoint::Status,
        )
        .unwrap();
        assert!(at_quiescence(&api, now()).is_empty());
    }
}
