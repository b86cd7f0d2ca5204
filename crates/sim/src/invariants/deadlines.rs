//! Deadlines are met on time: what an object is due to do at a deadline it does within a bound
//! after it, whether or not anything else happens to the object meanwhile. A controller that
//! forgets to come back at a deadline is rescued by any event that makes it look again (a pod
//! becoming ready, a measurement, a third party's write), so the bug only shows where the
//! world is quiet; these checks are therefore booked at each deadline's end of grace rather
//! than run on changes alone (the scheduler asks for [`pending`] after every change and
//! comes back at each one's [`Deadline::check_at`]).
//!
//! The deadlines of Experiments:
//! - the end of the duration (`availableAt + duration`): no template may still be `Running`;
//! - a template's progress deadline (`lastTransitionTime + progressDeadlineSeconds`): it may
//!   not still be `Progressing` from the same moment;
//! - a ReplicaSet's `scale-down-deadline`: it may not still be up.
//!
//! And of Rollouts: a timed canary pause step may not still hold the Rollout once its
//! duration has passed since its `CanaryPauseStep` condition's `startTime`. The Rollout
//! controller's replicas crash, lose their lease and get partitioned, so its grace is longer.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use sluice_api::experiment::{
    DEFAULT_PROGRESS_DEADLINE_SECONDS, Experiment, TemplateStatus, TemplateStatusCode,
};
use sluice_api::rollout::RolloutPause;
use sluice_engine::labels::SCALE_DOWN_DEADLINE;

use super::annotation;
use crate::api_model::{ApiServer, Kind, name_of};
use crate::experiments::controller_owner;

pub const DEADLINES_MET: &str = "deadlines-met-on-time";

/// How late after a deadline the Experiment controller may act. Its requeue lands within a
/// second of the deadline (times are recorded to the second); a reconcile is about a dozen
/// requests of up to 400 ms each; a status write refused with a conflict (the Rollout
/// terminating the Experiment meanwhile) is retried after 5 s. Twice all that, and a margin:
/// a controller that forgets the deadline waits for its resync, 900 s.
pub const EXPERIMENT_GRACE: SignedDuration = SignedDuration::from_secs(30);

/// How late after a pause step's end the Rollout controller may end it: leadership moves on
/// within a lease duration (15 s) and a few retries once the leader crashes or is cut off,
/// replicas come back within 10 s, partitions last up to 20 s; several of these in a row,
/// and a reconcile's requests. Still far short of the 900 s resync a forgotten requeue waits.
pub const ROLLOUT_GRACE: SignedDuration = SignedDuration::from_secs(120);

/// Something an object must have done by `at + grace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadline {
    /// What is due, and of which object: stable while the deadline stands, so a miss is
    /// reported once.
    pub what: String,
    pub at: Timestamp,
    pub grace: SignedDuration,
}

impl Deadline {
    /// When to look whether it was met.
    pub fn check_at(&self) -> Timestamp {
        plus(self.at, self.grace)
    }
}

/// `t + d`, or the end of time.
fn plus(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

fn time(t: &Option<Time>) -> Option<Timestamp> {
    t.as_ref().map(|t| t.0)
}

fn code(t: &TemplateStatus) -> Option<&TemplateStatusCode> {
    t.status.as_ref()
}

/// Every deadline in the world whose work is still undone.
pub fn pending(api: &ApiServer) -> Vec<Deadline> {
    let mut found: Vec<Deadline> = api
        .list(Kind::Rollout)
        .iter()
        .filter_map(pause_step_deadline)
        .collect();
    let experiments: Vec<(Value, Experiment)> = api
        .list(Kind::Experiment)
        .into_iter()
        .filter_map(|v| Some((v.clone(), serde_json::from_value(v).ok()?)))
        .collect();
    if experiments.is_empty() {
        return found;
    }
    for (_, e) in &experiments {
        found.extend(experiment_deadlines(e));
    }
    for rs in api.list(Kind::ReplicaSet) {
        // Only an Experiment that still exists scales its ReplicaSets (the garbage collector
        // takes the others).
        let Some(owner) = controller_owner(&rs, "Experiment") else {
            continue;
        };
        let exists = experiments.iter().any(|(v, _)| {
            v.pointer("/metadata/uid") == owner.get("uid")
                && Some(name_of(v)) == owner.get("name").and_then(Value::as_str)
        });
        let up = rs.pointer("/spec/replicas").and_then(Value::as_i64) != Some(0);
        let deadline = annotation(&rs, SCALE_DOWN_DEADLINE)
            .and_then(Value::as_str)
            .and_then(|d| d.parse::<Timestamp>().ok());
        if let (true, true, Some(at)) = (exists, up, deadline) {
            found.push(Deadline {
                what: format!("rs/{} scaled down at its scale-down-deadline", name_of(&rs)),
                at,
                grace: EXPERIMENT_GRACE,
            });
        }
    }
    found
}

/// The end of the timed pause step a Rollout is held at, unless something else holds it: a
/// user's pause (`spec.paused`), an abort, a full promotion.
fn pause_step_deadline(ro: &Value) -> Option<Deadline> {
    let held = |p: &str| ro.pointer(p) == Some(&Value::Bool(true));
    if held("/spec/paused") || held("/status/abort") || held("/status/promoteFull") {
        return None;
    }
    let start = ro
        .pointer("/status/pauseConditions")?
        .as_array()?
        .iter()
        .find(|c| c["reason"] == "CanaryPauseStep")?
        .get("startTime")?
        .as_str()?
        .parse::<Timestamp>()
        .ok()?;
    let index = ro.pointer("/status/currentStepIndex")?.as_i64()?;
    let pause = ro.pointer(&format!("/spec/strategy/canary/steps/{index}/pause"))?;
    let pause: RolloutPause = serde_json::from_value(pause.clone()).ok()?;
    let duration = SignedDuration::try_from(pause.duration()?.ok()?).ok()?;
    Some(Deadline {
        what: format!(
            "rollout/{} past its pause step {index} ({start} + {duration:#})",
            name_of(ro)
        ),
        at: plus(start, duration),
        grace: ROLLOUT_GRACE,
    })
}

fn experiment_deadlines(e: &Experiment) -> Vec<Deadline> {
    let mut found = Vec::new();
    let name = e.metadata.name.as_deref().unwrap_or_default();
    let Some(status) = e.status.as_ref() else {
        return found;
    };
    let templates = status.template_statuses.iter().flatten();
    let end = e
        .spec
        .duration()
        .and_then(Result::ok)
        .and_then(|d| SignedDuration::try_from(d).ok())
        .zip(time(&status.available_at))
        .map(|(d, from)| plus(from, d));
    if let Some(end) = end {
        for t in templates.clone() {
            if code(t) == Some(&TemplateStatusCode::Running) {
                found.push(Deadline {
                    what: format!(
                        "experiment/{name} template {} Successful at the end of its duration \
                         (availableAt {} + {})",
                        t.name.as_deref().unwrap_or_default(),
                        status
                            .available_at
                            .as_ref()
                            .map_or(String::new(), |a| a.0.to_string()),
                        e.spec.duration.as_deref().unwrap_or_default()
                    ),
                    at: end,
                    grace: EXPERIMENT_GRACE,
                });
            }
        }
    }
    let seconds = e
        .spec
        .progress_deadline_seconds
        .unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS);
    for t in templates {
        if code(t) != Some(&TemplateStatusCode::Progressing) {
            continue;
        }
        let Some(since) = time(&t.last_transition_time) else {
            continue;
        };
        found.push(Deadline {
            what: format!(
                "experiment/{name} template {} past Progressing at its progress deadline \
                 ({since} + {seconds}s)",
                t.name.as_deref().unwrap_or_default()
            ),
            at: plus(since, SignedDuration::from_secs(seconds.into())),
            grace: EXPERIMENT_GRACE,
        });
    }
    found
}

/// The deadlines whose grace has run out at `now` with their work still undone, each with
/// what to report.
pub fn missed(api: &ApiServer, now: Timestamp) -> Vec<(Deadline, String)> {
    pending(api)
        .into_iter()
        .filter(|d| d.check_at() < now)
        .map(|d| {
            let late = now.duration_since(d.at);
            let detail = format!(
                "{} was due at {}, still not done {late:#} later (grace {:#})",
                d.what, d.at, d.grace
            );
            (d, detail)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn world(status: Value, rs_annotations: Value, rs_replicas: i64) -> ApiServer {
        let mut api = ApiServer::new();
        let exp = api
            .create(
                Kind::Experiment,
                json!({"metadata": {"name": "x"},
                       "spec": {"duration": "10s", "progressDeadlineSeconds": 30,
                                "templates": [{"name": "a"}]},
                       "status": status}),
                at(0),
            )
            .unwrap();
        let uid = exp["metadata"]["uid"].clone();
        api.create(
            Kind::ReplicaSet,
            json!({"metadata": {"name": "x-a", "annotations": rs_annotations,
                                "ownerReferences": [{"kind": "Experiment", "name": "x",
                                    "uid": uid, "controller": true}]},
                   "spec": {"replicas": rs_replicas}}),
            at(0),
        )
        .unwrap();
        api
    }

    fn template(code: &str) -> Value {
        json!({"name": "a", "status": code, "lastTransitionTime": at(0).to_string()})
    }

    #[test]
    fn a_running_template_is_due_to_succeed_at_the_end_of_the_duration() {
        let api = world(
            json!({"phase": "Running", "availableAt": at(0).to_string(),
                   "templateStatuses": [template("Running")]}),
            json!({}),
            1,
        );
        let due = pending(&api);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!(due[0].at, at(10));
        assert!(missed(&api, at(10) + EXPERIMENT_GRACE).is_empty());
        let late = missed(&api, at(11) + EXPERIMENT_GRACE);
        assert_eq!(late.len(), 1);
        assert!(late[0].1.contains("template a Successful"), "{}", late[0].1);
        // Done: nothing due.
        let api = world(
            json!({"phase": "Successful", "availableAt": at(0).to_string(),
                   "templateStatuses": [template("Successful")]}),
            json!({}),
            1,
        );
        assert!(pending(&api).is_empty());
    }

    /// Creates the Rollout `ro`, then writes its status (which a create leaves out).
    fn create(api: &mut ApiServer, ro: Value) {
        api.create(Kind::Rollout, ro.clone(), at(0)).unwrap();
        let status = json!({"status": ro["status"].clone()});
        api.patch(
            Kind::Rollout,
            "demo",
            &status,
            crate::api_model::Endpoint::Status,
        )
        .unwrap();
    }

    #[test]
    fn a_timed_pause_step_is_due_to_end() {
        let mut api = ApiServer::new();
        let paused = |extra: Value| {
            let mut ro = json!({
                "metadata": {"name": "demo"},
                "spec": {"strategy": {"canary": {"steps": [
                    {"setWeight": 20}, {"pause": {"duration": "10s"}}, {"pause": {}}]}}},
                "status": {"currentStepIndex": 1, "pauseConditions": [
                    {"reason": "CanaryPauseStep", "startTime": at(0).to_string()}]}
            });
            crate::api_model::merge_patch(&mut ro, &extra);
            ro
        };
        create(&mut api, paused(json!({})));
        let due = pending(&api);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!((due[0].at, due[0].grace), (at(10), ROLLOUT_GRACE));
        assert_eq!(missed(&api, at(11) + ROLLOUT_GRACE).len(), 1);
        // An indefinite pause, a user's pause, an abort: nothing due.
        for extra in [
            json!({"status": {"currentStepIndex": 2}}),
            json!({"spec": {"paused": true}}),
            json!({"status": {"abort": true}}),
        ] {
            let mut api = ApiServer::new();
            create(&mut api, paused(extra.clone()));
            assert!(pending(&api).is_empty(), "{extra}");
        }
    }

    #[test]
    fn a_progressing_template_is_due_to_fail_at_its_progress_deadline() {
        let api = world(
            json!({"phase": "Pending", "templateStatuses": [template("Progressing")]}),
            json!({}),
            1,
        );
        let due = pending(&api);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!(due[0].at, at(30));
    }

    #[test]
    fn a_replica_set_is_due_down_at_its_scale_down_deadline() {
        let done = json!({"phase": "Successful", "templateStatuses": [template("Successful")]});
        let deadline = json!({SCALE_DOWN_DEADLINE: at(5).to_string()});
        let api = world(done.clone(), deadline.clone(), 1);
        let due = pending(&api);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!(due[0].at, at(5));
        assert!(!missed(&api, at(6) + EXPERIMENT_GRACE).is_empty());
        // Down: nothing due.
        assert!(pending(&world(done, deadline, 0)).is_empty());
    }
}
