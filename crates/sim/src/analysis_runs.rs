//! The AnalysisRun controller as the simulation runs it: a scripted verdict source, the way the
//! ReplicaSet controller and kubelet stand in for the cluster. It measures nothing. A run it
//! sees for the first time becomes Running; after a seed-chosen measuring time it takes the
//! verdict the scenario scripts. A run asked to terminate (`spec.terminate`) ends at once,
//! Successful with "Run Terminated", as Argo's controller ends a run in which no metric had
//! failed yet. A finished run is never touched again. AnalysisRun has no status subresource,
//! so status is written through the main endpoint, as the real controller does.

use jiff::Timestamp;
use serde_json::{Value, json};
use sluice_api::common::AnalysisPhase;
use sluice_api::time::whole_seconds;

use crate::api_model::{ApiServer, Endpoint, Kind, WatchEvent, name_of, rv_of};
use crate::rng::Rng;

/// What the scenario scripts for every run.
#[derive(Debug, Clone)]
pub struct AnalysisScript {
    /// The phase every run ends in, unless it is terminated first.
    pub verdict: AnalysisPhase,
    /// How long the controller takes to notice a change to a run.
    pub notice_ms: (u64, u64),
    /// How long a run measures before its verdict.
    pub measure_ms: (u64, u64),
}

impl Default for AnalysisScript {
    fn default() -> Self {
        Self {
            verdict: AnalysisPhase::Successful,
            notice_ms: (5, 1_000),
            measure_ms: (1_000, 20_000),
        }
    }
}

/// A verdict to deliver later: to this very run (by uid), not to a namesake created since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub uid: String,
    pub at_ms: u64,
}

pub fn phase_of(run: &Value) -> Option<AnalysisPhase> {
    run.pointer("/status/phase")
        .and_then(Value::as_str)
        .map(AnalysisPhase::from)
}

pub fn is_finished(run: &Value) -> bool {
    phase_of(run).is_some_and(|p| p.is_completed())
}

fn uid_of(run: &Value) -> &str {
    run.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn terminating(run: &Value) -> bool {
    run.pointer("/spec/terminate") == Some(&Value::Bool(true))
}

fn time(now: Timestamp) -> String {
    whole_seconds(now).to_string()
}

/// Which run a committed change makes the controller look at: any that is not finished.
pub fn interested_in(kind: Kind, event: &WatchEvent) -> Option<String> {
    match (kind, event) {
        (Kind::AnalysisRun, WatchEvent::Applied(run)) if !is_finished(run) => {
            Some(name_of(run).to_string())
        }
        _ => None,
    }
}

/// Writes `status` fields of a run, conditional on the version just read.
fn write_status(api: &mut ApiServer, run: &Value, status: Value) {
    let patch = json!({
        "metadata": {"resourceVersion": rv_of(run)},
        "status": status,
    });
    // The read and the write happen in one step, so the precondition always holds.
    let _ = api.patch(Kind::AnalysisRun, name_of(run), &patch, Endpoint::Main);
}

/// One pass over `name`: start it, or end it if it is asked to terminate. Returns when its
/// verdict is due, for a run that just started.
pub fn sync(
    api: &mut ApiServer,
    name: &str,
    now_ms: u64,
    now: Timestamp,
    script: &AnalysisScript,
    rng: &mut Rng,
) -> Option<Due> {
    let run = api.get(Kind::AnalysisRun, name)?.clone();
    if is_finished(&run) {
        return None;
    }
    if terminating(&run) {
        write_status(
            api,
            &run,
            json!({"phase": "Successful", "message": "Run Terminated", "completedAt": time(now)}),
        );
        return None;
    }
    match phase_of(&run) {
        None | Some(AnalysisPhase::Pending) => {
            write_status(
                api,
                &run,
                json!({"phase": "Running", "startedAt": time(now)}),
            );
            Some(Due {
                uid: uid_of(&run).to_string(),
                at_ms: now_ms + rng.range(script.measure_ms),
            })
        }
        _ => None,
    }
}

/// The measuring time of a run is over: it takes the scripted verdict, unless it finished or
/// was asked to terminate meanwhile (then [`sync`] ends it). Returns whether it did.
pub fn conclude(
    api: &mut ApiServer,
    name: &str,
    uid: &str,
    now: Timestamp,
    script: &AnalysisScript,
) -> bool {
    let Some(run) = api.get(Kind::AnalysisRun, name).cloned() else {
        return false;
    };
    if uid_of(&run) != uid || is_finished(&run) || terminating(&run) {
        return false;
    }
    let metric = run
        .pointer("/spec/metrics/0/name")
        .and_then(Value::as_str)
        .unwrap_or("metric");
    let verdict = script.verdict.as_str();
    let why = match script.verdict {
        AnalysisPhase::Failed => Some("failed (1) > failureLimit (0)"),
        AnalysisPhase::Inconclusive => Some("inconclusive (1) > inconclusiveLimit (0)"),
        AnalysisPhase::Error => Some("consecutiveErrors (5) > consecutiveErrorLimit (4)"),
        _ => None,
    };
    let mut status = json!({"phase": verdict, "completedAt": time(now)});
    if let Some(why) = why {
        status["message"] = json!(format!(
            "Metric \"{metric}\" assessed {verdict} due to {why}"
        ));
    }
    write_status(api, &run, status);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn run(api: &mut ApiServer) {
        let r = json!({"metadata": {"name": "r"}, "spec": {"metrics": [{"name": "m"}]}});
        api.create(Kind::AnalysisRun, r, now()).unwrap();
    }

    fn phase(api: &ApiServer) -> Option<AnalysisPhase> {
        phase_of(api.get(Kind::AnalysisRun, "r").unwrap())
    }

    #[test]
    fn a_run_measures_then_takes_the_scripted_verdict() {
        let mut api = ApiServer::new();
        run(&mut api);
        let script = AnalysisScript {
            verdict: AnalysisPhase::Inconclusive,
            ..AnalysisScript::default()
        };
        let due = sync(&mut api, "r", 0, now(), &script, &mut Rng::new(1)).unwrap();
        assert_eq!(phase(&api), Some(AnalysisPhase::Running));
        assert!(!conclude(&mut api, "r", "other-uid", now(), &script));
        assert_eq!(phase(&api), Some(AnalysisPhase::Running));
        assert!(conclude(&mut api, "r", &due.uid, now(), &script));
        assert_eq!(phase(&api), Some(AnalysisPhase::Inconclusive));
        // Finished runs stay as they are, even when asked to terminate.
        api.patch(
            Kind::AnalysisRun,
            "r",
            &json!({"spec": {"terminate": true}}),
            Endpoint::Main,
        )
        .unwrap();
        assert!(sync(&mut api, "r", 0, now(), &script, &mut Rng::new(1)).is_none());
        assert_eq!(phase(&api), Some(AnalysisPhase::Inconclusive));
    }

    #[test]
    fn a_terminated_run_ends_successful_before_its_verdict() {
        let mut api = ApiServer::new();
        run(&mut api);
        let script = AnalysisScript {
            verdict: AnalysisPhase::Failed,
            ..AnalysisScript::default()
        };
        let due = sync(&mut api, "r", 0, now(), &script, &mut Rng::new(1)).unwrap();
        api.patch(
            Kind::AnalysisRun,
            "r",
            &json!({"spec": {"terminate": true}}),
            Endpoint::Main,
        )
        .unwrap();
        assert!(sync(&mut api, "r", 0, now(), &script, &mut Rng::new(1)).is_none());
        assert!(!conclude(&mut api, "r", &due.uid, now(), &script));
        let r = api.get(Kind::AnalysisRun, "r").unwrap();
        assert_eq!(phase_of(r), Some(AnalysisPhase::Successful));
        assert_eq!(r.pointer("/status/message"), Some(&json!("Run Terminated")));
    }
}
