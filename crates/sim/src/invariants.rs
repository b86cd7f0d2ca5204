//! What must hold in every schedule. Checked on every committed change, on every controller
//! write, and once more at quiescence. Each check has a stable name that failure reports use.
//! The checks of AnalysisRuns are in [`analysis`], those of Experiments in [`experiments`],
//! those of traffic routing in [`traffic`], those of StatefulSets in [`stateful_sets`], those
//! of DaemonSets in [`daemon_sets`], those of config rollouts in [`config_rollouts`].

mod analysis;
pub mod config_rollouts;
pub mod daemon_sets;
mod deadlines;
mod experiments;
mod notifications;
pub mod stateful_sets;
mod traffic;

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use sluice_engine::labels::{DESIRED_REPLICAS, POD_TEMPLATE_HASH, REVISION, SCALE_DOWN_DEADLINE};

use crate::api_model::{ApiServer, Kind, WatchEvent, name_of};
use crate::kubelet::{image_of_template, is_available, min_ready_seconds, owner_name};
use crate::lease::LeaseView;

pub use analysis::{
    INCONCLUSIVE_PAUSE, INCONCLUSIVE_PAUSES, NOT_RECREATED_WHILE_INCONCLUSIVE, ONE_LIVE_RUN,
    PAUSE_LIFTED_BY_USERS_ONLY, PAUSE_STEP_HELD, PAUSED_UNTIL_PROMOTED, RUNS_AT_END, RunKey,
    UPDATE_HELD, background_runs,
};
pub use deadlines::{DEADLINES_MET, Deadline, EXPERIMENT_GRACE};
pub use experiments::{
    FAILED_EXPERIMENT_ABORTS, NO_LINGERING_EXPERIMENTS, NO_ORPHANED_EXPERIMENT_REPLICA_SETS,
};
pub use notifications::{AT_LEAST_ONCE, AT_MOST_ONCE, NotificationChecks};
pub use traffic::{
    ROUTED_REPLICA_SETS_KEEP_THEIR_PODS, Routed, TRAFFIC_WAITS_FOR_PODS, routed_weights,
};

pub const ANNOTATION_NEVER_EMPTY: &str = "annotation-never-empty";
pub const AVAILABILITY: &str = "availability-within-max-unavailable";
pub const UNIQUE_REPLICA_SET: &str = "one-replicaset-per-pod-template-hash";
/// Two live ReplicaSets of one Rollout never run the same template, whatever their hashes:
/// a controller that missed a ReplicaSet named by another hash table made a second one (and
/// replaced every pod).
pub const ONE_REPLICA_SET_PER_TEMPLATE: &str = "one-replicaset-per-pod-template";
pub const ONE_WRITER_PER_TERM: &str = "one-writer-per-lease-term";
pub const FINAL_PHASE: &str = "final-phase-as-inputs-dictate";
pub const SCALED_DOWN: &str = "old-replicasets-scaled-down-at-quiescence";
pub const QUIET: &str = "steady-state-writes-nothing";
pub const PROGRESS: &str = "scenario-makes-progress";

/// Every invariant the checker knows, by name: each must be shown able to fail (the mutation
/// tests of `tests/mutation/` name the planted bug that each one catches).
pub const ALL: &[&str] = &[
    ANNOTATION_NEVER_EMPTY,
    AVAILABILITY,
    UNIQUE_REPLICA_SET,
    ONE_REPLICA_SET_PER_TEMPLATE,
    ONE_WRITER_PER_TERM,
    FINAL_PHASE,
    SCALED_DOWN,
    QUIET,
    PROGRESS,
    analysis::NOT_RECREATED_WHILE_INCONCLUSIVE,
    analysis::PAUSE_STEP_HELD,
    analysis::UPDATE_HELD,
    analysis::ONE_LIVE_RUN,
    analysis::INCONCLUSIVE_PAUSES,
    analysis::PAUSED_UNTIL_PROMOTED,
    analysis::RUNS_AT_END,
    analysis::PAUSE_LIFTED_BY_USERS_ONLY,
    deadlines::DEADLINES_MET,
    FAILED_EXPERIMENT_ABORTS,
    NO_ORPHANED_EXPERIMENT_REPLICA_SETS,
    NO_LINGERING_EXPERIMENTS,
    AT_MOST_ONCE,
    AT_LEAST_ONCE,
    stateful_sets::ANALYSIS_GATES_THE_PARTITION,
    stateful_sets::SETTLED,
    daemon_sets::NODES_WITHIN_STEP,
    daemon_sets::SETTLED,
    config_rollouts::COPIES_EXIST_WHILE_READ,
    config_rollouts::SETTLED,
    ROUTED_REPLICA_SETS_KEEP_THEIR_PODS,
    TRAFFIC_WAITS_FOR_PODS,
];

/// Annotations the controller owns: an empty value is never meaningful, and for the deadline
/// it is exactly Argo's bug (an empty `scale-down-deadline` made the old ReplicaSet look
/// undated, so it was never scaled down).
const OWNED_ANNOTATIONS: &[&str] = &[SCALE_DOWN_DEADLINE, REVISION, DESIRED_REPLICAS];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub at_ms: u64,
    pub invariant: &'static str,
    pub detail: String,
}

/// What the scenario's inputs dictate for the end state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// `Healthy`, `Degraded` or `Paused`.
    pub phase: &'static str,
    /// The image the stable ReplicaSet must run at the end.
    pub stable_image: String,
    /// How many background AnalysisRuns the current pod template must have at the end.
    pub analysis_runs: Option<usize>,
}

#[derive(Debug, Default)]
pub struct Checker {
    pub violations: Vec<Violation>,
    /// Per Rollout: availability has reached the floor, so it must not fall below again.
    armed: BTreeMap<String, bool>,
    writers_per_term: BTreeMap<i64, BTreeSet<String>>,
    analysis: analysis::AnalysisChecks,
    experiments: experiments::ExperimentChecks,
    traffic: traffic::TrafficChecks,
    daemon_sets: daemon_sets::DaemonSetChecks,
    config: config_rollouts::ConfigChecks,
    /// Deadlines already reported missed (what was due, and when).
    missed_deadlines: BTreeSet<(String, Timestamp)>,
    /// Per ReplicaSet: the resourceVersion its template key was computed at, and the key.
    template_keys: BTreeMap<String, (String, Vec<u8>)>,
}

/// `spec.replicas` and the availability floor `replicas - maxUnavailable` of a Rollout.
pub fn availability_floor(rollout: &Value) -> (i32, i32) {
    let replicas = rollout
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1) as i32;
    let parse = |p: &str| -> Option<IntOrString> {
        rollout
            .pointer(p)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    };
    if rollout.pointer("/spec/strategy/blueGreen").is_some() {
        // Blue-green keeps the active pods until the switch; its maxUnavailable defaults to 0.
        let unavailable = parse("/spec/strategy/blueGreen/maxUnavailable")
            .and_then(|u| {
                sluice_engine::replicas::resolve_surge_limits(
                    Some(&IntOrString::Int(1)),
                    Some(&u),
                    replicas,
                )
                .ok()
            })
            .map_or(0, |l| l.max_unavailable);
        return (replicas, replicas - unavailable);
    }
    let surge = parse("/spec/strategy/canary/maxSurge");
    let unavailable = parse("/spec/strategy/canary/maxUnavailable");
    let limits = sluice_engine::replicas::resolve_surge_limits(
        surge.as_ref(),
        unavailable.as_ref(),
        replicas,
    )
    .map(|l| l.max_unavailable)
    .unwrap_or(0);
    (replicas, replicas - limits)
}

/// Available pods of all ReplicaSets a Rollout owns, counted from the pods themselves.
pub fn available_pods(api: &ApiServer, rollout: &str, now: Timestamp) -> i32 {
    let owned: BTreeMap<String, i64> = api
        .list(Kind::ReplicaSet)
        .iter()
        .filter(|rs| owner_name(rs) == Some(rollout))
        .map(|rs| (name_of(rs).to_string(), min_ready_seconds(rs)))
        .collect();
    api.list(Kind::Pod)
        .iter()
        .filter(|p| {
            owner_name(p)
                .and_then(|o| owned.get(o))
                .is_some_and(|min_ready| is_available(p, *min_ready, now))
        })
        .count() as i32
}

fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.pointer("/metadata/annotations").and_then(|a| a.get(key))
}

/// Whether a Rollout has a pause condition with this reason.
pub fn has_pause(rollout: &Value, reason: &str) -> bool {
    rollout
        .pointer("/status/pauseConditions")
        .and_then(Value::as_array)
        .is_some_and(|p| p.iter().any(|c| c["reason"] == reason))
}

impl Checker {
    fn fail(&mut self, at_ms: u64, invariant: &'static str, detail: String) {
        self.violations.push(Violation {
            at_ms,
            invariant,
            detail,
        });
    }

    fn fail_all(&mut self, at_ms: u64, found: analysis::Found) {
        for (invariant, detail) in found {
            self.fail(at_ms, invariant, detail);
        }
    }

    /// Every committed change, whoever made it.
    pub fn on_change(&mut self, at_ms: u64, kind: Kind, event: &WatchEvent) {
        let WatchEvent::Applied(obj) = event else {
            return;
        };
        match kind {
            Kind::AnalysisRun => {
                let found = self.analysis.on_run(obj);
                self.fail_all(at_ms, found);
                return;
            }
            Kind::Rollout => {
                self.analysis.on_rollout(obj);
                return;
            }
            Kind::ReplicaSet => {}
            _ => return,
        }
        for key in OWNED_ANNOTATIONS {
            let Some(v) = annotation(obj, key) else {
                continue;
            };
            let text = v.as_str().unwrap_or_default();
            let bad = text.is_empty()
                || (*key == SCALE_DOWN_DEADLINE && text.parse::<Timestamp>().is_err());
            if bad {
                self.fail(
                    at_ms,
                    ANNOTATION_NEVER_EMPTY,
                    format!("rs/{} has {key}={v}", name_of(obj)),
                );
            }
        }
    }

    /// Every write a controller got committed. With leases on, the writer must hold the
    /// unexpired lease when the server applies the write; so each term has one writer.
    pub fn on_controller_write(
        &mut self,
        at_ms: u64,
        now: Timestamp,
        identity: &str,
        what: &str,
        lease: Option<&LeaseView>,
    ) {
        let holder = lease.and_then(|l| l.valid_holder(now));
        let term = lease.map_or(-1, |l| l.term);
        if holder != Some(identity) {
            self.fail(
                at_ms,
                ONE_WRITER_PER_TERM,
                format!(
                    "{identity} wrote ({what}) while the lease (term {term}) is held by {holder:?}"
                ),
            );
        }
        let writers = self.writers_per_term.entry(term).or_default();
        writers.insert(identity.to_string());
        if writers.len() > 1 {
            let detail = format!("term {term} has writers {writers:?}");
            self.fail(at_ms, ONE_WRITER_PER_TERM, detail);
        }
    }

    /// A controller's list of AnalysisRuns was served: its reconcile decides on these.
    pub fn on_run_list(&mut self, identity: &str, runs: Vec<Value>) {
        self.analysis.on_list(identity, runs);
    }

    /// A controller's write of a Rollout's status committed, turning `before` into `after`.
    pub fn on_status_write(
        &mut self,
        api: &ApiServer,
        at_ms: u64,
        identity: &str,
        before: &Value,
        after: &Value,
    ) {
        let found = self
            .analysis
            .on_status_write(api, at_ms, identity, before, after);
        self.fail_all(at_ms, found);
    }

    /// A reconcile of `rollout` decided on `status`, before any of its writes.
    pub fn on_decision(
        &mut self,
        api: &ApiServer,
        rollout: &str,
        status: &sluice_api::rollout::RolloutStatus,
    ) {
        self.daemon_sets.on_decision(api, rollout, status);
    }

    /// The script checks that a Rollout still waits on a user.
    pub fn expect_paused(
        &mut self,
        api: &ApiServer,
        at_ms: u64,
        rollout: &str,
        reason: &str,
        background_runs: usize,
    ) {
        let found = analysis::expect_paused(api, rollout, reason, background_runs);
        self.fail_all(at_ms, found);
    }

    /// The scenario tells the checks the content of ConfigMap `source` that the stable
    /// revision must read at quiescence.
    pub fn expect_config(&mut self, source: &str, data: Value) {
        self.config.expect(source, data);
    }

    /// The scenario itself took capacity away or changed the target: the floor holds again
    /// only once it is reached again.
    pub fn disarm_availability(&mut self, rollout: &str) {
        self.armed.insert(rollout.to_string(), false);
    }

    /// After every event that committed something.
    pub fn after_change(&mut self, api: &ApiServer, at_ms: u64, now: Timestamp) {
        for ro in api.list(Kind::Rollout) {
            let name = name_of(&ro).to_string();
            let (replicas, floor) = availability_floor(&ro);
            let available = available_pods(api, &name, now);
            let armed = self.armed.entry(name.clone()).or_insert(false);
            if available >= floor {
                *armed = true;
            } else if *armed {
                *armed = false;
                self.fail(
                    at_ms,
                    AVAILABILITY,
                    format!(
                        "rollout/{name}: {available} pods available, below {floor} (replicas {replicas} - maxUnavailable)"
                    ),
                );
            }
        }
        let mut by_hash: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for rs in api.list(Kind::ReplicaSet) {
            let Some(hash) = rs
                .pointer("/metadata/labels")
                .and_then(|l| l.get(POD_TEMPLATE_HASH))
                .and_then(Value::as_str)
            else {
                continue;
            };
            // An Experiment's ReplicaSets are named after their template, not their hash.
            if crate::experiments::controller_owner(&rs, "Experiment").is_some() {
                continue;
            }
            let owner = owner_name(&rs).unwrap_or_default();
            if name_of(&rs) != format!("{owner}-{hash}") {
                let detail = format!("rs/{} carries hash {hash} of another name", name_of(&rs));
                self.fail(at_ms, UNIQUE_REPLICA_SET, detail);
            }
            by_hash
                .entry(format!("{owner}/{hash}"))
                .or_default()
                .push(name_of(&rs).to_string());
        }
        for (hash, names) in by_hash {
            if names.len() > 1 {
                self.fail(at_ms, UNIQUE_REPLICA_SET, format!("{hash}: {names:?}"));
            }
        }
        self.one_replica_set_per_template(api, at_ms);
        let found = self.analysis.after_change(api);
        self.fail_all(at_ms, found);
        let found = self.traffic.after_change(api);
        self.fail_all(at_ms, found);
        let found = self.experiments.after_change(api);
        self.fail_all(at_ms, found);
        let found = stateful_sets::after_change(api);
        self.fail_all(at_ms, found);
        let found = self.daemon_sets.after_change(api);
        self.fail_all(at_ms, found);
        let found = config_rollouts::after_change(api);
        self.fail_all(at_ms, found);
    }

    fn one_replica_set_per_template(&mut self, api: &ApiServer, at_ms: u64) {
        for ro in api.list(Kind::Rollout) {
            let name = name_of(&ro).to_string();
            let replica_sets: Vec<Value> = api
                .list(Kind::ReplicaSet)
                .into_iter()
                .filter(|rs| {
                    rs.pointer("/metadata/deletionTimestamp").is_none()
                        && owner_name(rs) == Some(name.as_str())
                        && crate::experiments::controller_owner(rs, "Experiment").is_none()
                })
                .collect();
            if replica_sets.len() < 2 {
                continue;
            }
            let Ok(rollout) = serde_json::from_value::<sluice_api::Rollout>(ro) else {
                continue;
            };
            let mut by_template: BTreeMap<Vec<u8>, Vec<String>> = BTreeMap::new();
            for rs in replica_sets {
                let rs_name = name_of(&rs).to_string();
                let version = rs
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let cached = self
                    .template_keys
                    .get(&rs_name)
                    .filter(|(v, _)| *v == version);
                let key = match cached {
                    Some((_, key)) => key.clone(),
                    None => {
                        let Ok(typed) = serde_json::from_value(rs) else {
                            continue;
                        };
                        let key = sluice_engine::pod_hash::template_key(&rollout, &typed)
                            .unwrap_or_default();
                        self.template_keys
                            .insert(rs_name.clone(), (version, key.clone()));
                        key
                    }
                };
                by_template.entry(key).or_default().push(rs_name);
            }
            for names in by_template.into_values().filter(|n| n.len() > 1) {
                let detail = format!("rollout/{name}: {names:?} run the same pod template");
                self.fail(at_ms, ONE_REPLICA_SET_PER_TEMPLATE, detail);
            }
        }
    }

    /// At quiescence: the end state the inputs dictate, nothing left up that should be down,
    /// and no writes in the quiet window (a controller that keeps writing in steady state is
    /// in an annotate/reset loop).
    pub fn at_quiescence(
        &mut self,
        api: &ApiServer,
        expect: &Expect,
        at_ms: u64,
        now: Timestamp,
        last_write: Option<(u64, String)>,
        quiet_from_ms: u64,
    ) {
        for ro in api.list(Kind::Rollout) {
            let name = name_of(&ro).to_string();
            let phase = ro
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("<none>");
            let generation = ro.pointer("/metadata/generation").and_then(Value::as_i64);
            let observed = ro
                .pointer("/status/observedGeneration")
                .and_then(Value::as_str)
                .and_then(|g| g.parse().ok());
            if phase != expect.phase || generation != observed {
                let message = ro
                    .pointer("/status/message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let stuck = if phase == "Progressing" {
                    " (stuck Progressing with nothing left to do)"
                } else {
                    ""
                };
                self.fail(
                    at_ms,
                    FINAL_PHASE,
                    format!(
                        "rollout/{name} is {phase}{stuck} \"{message}\" (generation {generation:?}, observed {observed:?}), expected {}",
                        expect.phase
                    ),
                );
            }
            let stable_hash = ro
                .pointer("/status/stableRS")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let current_hash = ro
                .pointer("/status/currentPodHash")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (replicas, _) = availability_floor(&ro);
            for rs in api.list(Kind::ReplicaSet) {
                if owner_name(&rs) != Some(name.as_str()) {
                    continue;
                }
                let rs_name = name_of(&rs);
                let hash = rs_name.rsplit('-').next().unwrap_or_default();
                let spec = rs.pointer("/spec/replicas").and_then(Value::as_i64);
                let status = rs
                    .pointer("/status/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                let image = rs
                    .pointer("/spec/template")
                    .map(image_of_template)
                    .unwrap_or_default();
                if hash == stable_hash {
                    // A canary that timed out without abort keeps its share of the pods.
                    let full = expect.phase == "Healthy" || aborted(&ro);
                    if image != expect.stable_image || (full && spec != Some(i64::from(replicas))) {
                        self.fail(
                            at_ms,
                            FINAL_PHASE,
                            format!(
                                "stable rs/{rs_name} runs {image} at {spec:?}, expected {} at {replicas}",
                                expect.stable_image
                            ),
                        );
                    }
                    continue;
                }
                // Only a paused or timed-out (not aborted) canary may keep its pods.
                let canary_may_stay = hash == current_hash
                    && (expect.phase == "Paused" || (expect.phase == "Degraded" && !aborted(&ro)));
                if !canary_may_stay && (spec != Some(0) || status != 0) {
                    self.fail(
                        at_ms,
                        SCALED_DOWN,
                        format!("rs/{rs_name} ({image}) still has spec {spec:?}, {status} pods"),
                    );
                }
            }
        }
        if let Some(want) = expect.analysis_runs {
            for ro in api.list(Kind::Rollout) {
                let name = name_of(&ro);
                let runs = background_runs(api, name);
                if runs.len() != want {
                    let detail =
                        format!("rollout/{name} has background runs {runs:?}, expected {want}");
                    self.fail(at_ms, RUNS_AT_END, detail);
                }
                // A finished or aborted update waits on no analysis: nothing may measure on.
                if expect.phase == "Healthy" || aborted(&ro) {
                    for run in analysis::measuring(api, name) {
                        let detail = format!(
                            "analysisrun/{run} still measures for rollout/{name}, which waits on nothing"
                        );
                        self.fail(at_ms, RUNS_AT_END, detail);
                    }
                }
            }
        }
        let found = experiments::at_quiescence(api, now);
        self.fail_all(at_ms, found);
        let found = stateful_sets::at_quiescence(api, expect);
        self.fail_all(at_ms, found);
        let found = daemon_sets::at_quiescence(api, expect);
        self.fail_all(at_ms, found);
        let found = config_rollouts::at_quiescence(api, &self.config);
        self.fail_all(at_ms, found);
        self.check_deadlines(api, at_ms, now);
        if let Some((t, what)) = last_write
            && t >= quiet_from_ms
        {
            self.fail(
                at_ms,
                QUIET,
                format!("a controller still wrote at {t} ms ({what}), into the quiet window"),
            );
        }
    }

    /// The deadlines whose work is still undone: the scheduler comes back at each one's
    /// [`Deadline::check_at`] to [`Checker::check_deadlines`], whatever happens meanwhile.
    pub fn pending_deadlines(&self, api: &ApiServer) -> Vec<Deadline> {
        deadlines::pending(api)
    }

    /// What was due by `now` (a deadline and its grace past) is done; each miss is reported
    /// once.
    pub fn check_deadlines(&mut self, api: &ApiServer, at_ms: u64, now: Timestamp) {
        for (deadline, detail) in deadlines::missed(api, now) {
            if self.missed_deadlines.insert((deadline.what, deadline.at)) {
                self.fail(at_ms, DEADLINES_MET, detail);
            }
        }
    }

    /// A wait in the scenario script never came true.
    pub fn stalled(&mut self, at_ms: u64, detail: String) {
        self.fail(at_ms, PROGRESS, detail);
    }
}

fn aborted(ro: &Value) -> bool {
    ro.pointer("/status/abort") == Some(&Value::Bool(true))
}
