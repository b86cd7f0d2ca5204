//! The discrete-event scheduler: one queue of timed events, one clock, one seeded random
//! stream. Everything that happens — a watch event reaching a cache, a request reaching the
//! API server, a pod becoming ready, a crash — is an event, so the seed alone fixes the order.

mod deadlines;
mod election;
mod outcome;
mod script;
mod watches;

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};
use sluice_controller::cluster::WriteError;

use crate::analysis_runs::{Polled, RunController};
use crate::api_model::{ApiServer, Endpoint, Kind, name_of};
use crate::controller::{Addr, ApplyFn, Replica};
use crate::experiments::{self, ExperimentController};
use crate::invariants::Checker;
use crate::kubelet::{Cluster, Followup};
use crate::lease::MonoClock;
use crate::net::{Request, Response, serve};
use crate::rng::Rng;
use crate::scenarios::{Scenario, Setup, Target};

pub use outcome::{Outcome, Stats};

/// Simulated time starts here (any fixed instant will do; none is read from the OS).
const EPOCH_SECONDS: i64 = 1_800_000_000;
/// Random faults keep coming this long after the script's last action.
const CHAOS_TAIL_MS: u64 = 60_000;
/// ... and never longer than this: progress can only be demanded of a world whose faults end
/// (a third party rewriting an object faster than watches deliver it starves any controller).
const CHAOS_MAX_MS: u64 = 600_000;
/// Then the world is calm for this long before the end state is judged.
const SETTLE_MS: u64 = 600_000;
/// No controller may write in this last part of the calm period.
const QUIET_MS: u64 = 240_000;
/// A script wait that has not come true after this long is a stuck rollout.
const WAIT_TIMEOUT_MS: u64 = 900_000;
/// How much of the trace a failure report shows.
const TRACE_TAIL: usize = 80;

#[derive(Debug)]
enum Ev {
    Deliver {
        to: Addr,
        kind: Kind,
    },
    Relist {
        to: Addr,
        kind: Kind,
    },
    Wake {
        to: Addr,
    },
    /// A controller's request reaches the API server (even if its sender has died since).
    Arrive {
        from: Addr,
        identity: String,
        request: Request,
    },
    Reply {
        to: Addr,
        response: Response,
    },
    /// An election attempt: read the Lease, decide, write it.
    LeaseTick {
        to: Addr,
    },
    LeaseGetArrive {
        from: Addr,
    },
    LeaseGot {
        to: Addr,
        lease: Option<Option<Box<Lease>>>,
    },
    LeaseWriteArrive {
        from: Addr,
        lease: Box<Lease>,
        create: bool,
        at_ms: u64,
    },
    LeaseWritten {
        to: Addr,
        at_ms: u64,
        stored: Result<Box<Lease>, bool>,
    },
    /// The renew deadline of the last successful renewal.
    LeaseDeadline {
        to: Addr,
    },
    Restart {
        replica: usize,
    },
    Heal {
        replica: usize,
    },
    SyncReplicaSet {
        name: String,
    },
    PodReady {
        pod: String,
    },
    /// The AnalysisRun controller's wake-up for a run.
    SyncAnalysisRun {
        name: String,
    },
    /// A request of the AnalysisRun controller's reconcile of `name` reaches the API server.
    RunArrive {
        name: String,
        request: Request,
    },
    RunReply {
        name: String,
        response: Response,
    },
    /// The Experiment controller's wake-up for an Experiment.
    SyncExperiment {
        name: String,
    },
    /// A request of the Experiment controller's reconcile of `name` reaches the API server.
    ExperimentArrive {
        name: String,
        request: Request,
    },
    ExperimentReply {
        name: String,
        response: Response,
    },
    /// The garbage collector deletes what lost its owners.
    CollectGarbage,
    /// The end of grace of a deadline: what was due must be done.
    CheckDeadlines,
    Script,
    Calm,
    Meddle,
    RandomCrash,
    RandomPartition,
}

pub struct Sim {
    now_ms: u64,
    seq: u64,
    events: BTreeMap<(u64, u64), Ev>,
    rng: Rng,
    setup: Setup,
    apply: ApplyFn,
    api: ApiServer,
    cluster: Cluster,
    mono: MonoClock,
    replicas: Vec<Replica>,
    lease_fail_until: Vec<u64>,
    rs_sync_pending: BTreeSet<String>,
    runs: RunController,
    experiments: ExperimentController,
    gc_pending: bool,
    /// When deadline checks are booked for.
    deadline_checks: BTreeSet<u64>,
    script_pos: usize,
    script_armed: bool,
    wait_since: u64,
    calm: bool,
    end_ms: u64,
    last_write: Option<(u64, String)>,
    checked_rv: u64,
    last_holder: Option<String>,
    checker: Checker,
    trace: Vec<(u64, String)>,
    stats: Stats,
}

/// Runs one seed of a scenario.
pub fn run(scenario: &Scenario, seed: u64, apply: ApplyFn) -> Outcome {
    let mut rng = Rng::new(seed);
    let mut setup_rng = rng.fork();
    let setup = (scenario.build)(seed, &mut setup_rng);
    let mut sim = Sim::new(setup, rng, apply);
    sim.run();
    Outcome {
        scenario: scenario.name,
        seed,
        violations: sim.checker.violations,
        trace: sim.trace,
        stats: sim.stats,
    }
}

impl Sim {
    fn new(setup: Setup, rng: Rng, apply: ApplyFn) -> Self {
        let replicas = (0..setup.controllers)
            .map(|i| Replica::new(i, setup.leases))
            .collect();
        Self {
            now_ms: 0,
            seq: 0,
            events: BTreeMap::new(),
            rng,
            lease_fail_until: vec![0; setup.controllers],
            setup,
            apply,
            api: ApiServer::new(),
            cluster: Cluster::default(),
            mono: MonoClock::new(),
            replicas,
            rs_sync_pending: BTreeSet::new(),
            runs: RunController::new(),
            experiments: ExperimentController::new(),
            gc_pending: false,
            deadline_checks: BTreeSet::new(),
            script_pos: 0,
            script_armed: false,
            wait_since: 0,
            calm: false,
            end_ms: u64::MAX,
            last_write: None,
            checked_rv: 0,
            last_holder: None,
            checker: Checker::default(),
            trace: Vec::new(),
            stats: Stats::default(),
        }
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_second(EPOCH_SECONDS).unwrap_or(Timestamp::UNIX_EPOCH)
            + SignedDuration::from_millis(self.now_ms as i64)
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.insert((t.max(self.now_ms), self.seq), ev);
    }

    fn after(&mut self, range: (u64, u64), ev: Ev) {
        let t = self.now_ms + self.rng.range(range);
        self.at(t, ev);
    }

    fn log(&mut self, line: String) {
        self.trace.push((self.now_ms, line));
    }

    fn current(&self, addr: Addr) -> Option<usize> {
        let r = self.replicas.get(addr.replica)?;
        (r.up && r.incarnation == addr.incarnation).then_some(addr.replica)
    }

    fn run(&mut self) {
        let rollout = self.setup.rollout.clone();
        // A Rollout given with a status was left so by an earlier controller (a takeover).
        let status = rollout.get("status").cloned();
        let now = self.now();
        let uid = match self.api.create(Kind::Rollout, rollout, now) {
            Ok(created) => created["metadata"]["uid"].clone(),
            Err(e) => {
                self.checker
                    .stalled(0, format!("cannot create the Rollout: {e:?}"));
                return;
            }
        };
        if let Some(status) = status {
            self.api.put_status(Kind::Rollout, "demo", status);
        }
        for (kind, mut obj) in self.setup.objects.clone() {
            crate::scenarios::own_by_rollout(&mut obj, &uid);
            let _ = self.api.create(kind, obj, now);
        }
        self.log("user: create rollout/demo".into());
        for i in 0..self.replicas.len() {
            self.boot(i);
        }
        self.at(CHAOS_MAX_MS, Ev::Calm);
        let f = self.setup.faults.clone();
        if let Some(every) = f.meddle_every_ms {
            self.after(every, Ev::Meddle);
        }
        if let Some(every) = f.crash_every_ms {
            self.after(every, Ev::RandomCrash);
        }
        if let Some(every) = f.partition_every_ms {
            self.after(every, Ev::RandomPartition);
        }
        self.fan_out();
        self.check_script();

        let mut stalled = false;
        while let Some(((t, _), ev)) = self.events.pop_first() {
            if t > self.end_ms {
                break;
            }
            self.now_ms = t;
            self.stats.events += 1;
            self.handle(ev);
            self.fan_out();
            self.check_script();
            if self.script_pos < self.setup.script.len()
                && !self.script_armed
                && self.now_ms > self.wait_since + WAIT_TIMEOUT_MS
            {
                let wait = self.setup.script[self.script_pos].wait.clone();
                let detail = format!(
                    "waited {WAIT_TIMEOUT_MS} ms for {wait:?}: {}",
                    self.rollout_summary()
                );
                self.checker.stalled(self.now_ms, detail);
                stalled = true;
                break;
            }
        }
        self.stats.sim_ms = self.now_ms;
        // The end state is judged whenever the run got there, even after earlier violations.
        if !stalled {
            let quiet_from = self.end_ms.saturating_sub(QUIET_MS);
            let expect = self.setup.expect.clone();
            let last = self.last_write.clone();
            let now = self.now();
            self.checker
                .at_quiescence(&self.api, &expect, self.now_ms, now, last, quiet_from);
            self.log(format!("end: {}", self.rollout_summary()));
        }
    }

    fn rollout_summary(&self) -> String {
        let Some(ro) = self.api.get(Kind::Rollout, "demo") else {
            return "no rollout".into();
        };
        let s = |p: &str| ro.pointer(p).map(Value::to_string).unwrap_or_default();
        format!(
            "phase {} message {} step {} stable {} current {} gen {} observed {}",
            s("/status/phase"),
            s("/status/message"),
            s("/status/currentStepIndex"),
            s("/status/stableRS"),
            s("/status/currentPodHash"),
            s("/metadata/generation"),
            s("/status/observedGeneration"),
        )
    }

    /// A controller process starts: list the kinds it watches, then run for the lease.
    fn boot(&mut self, i: usize) {
        let to = self.replicas[i].addr();
        for kind in [Kind::Rollout, Kind::ReplicaSet] {
            self.after((0, 1_000), Ev::Relist { to, kind });
        }
        if self.replicas[i].elector.is_some() {
            self.after((0, 500), Ev::LeaseTick { to });
        }
    }

    /// Whether replica `i` may act as the controller now (its write gate is open).
    fn may_act(&self, i: usize) -> bool {
        self.replicas[i].gate.term().is_some()
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { to, kind } => self.deliver(to, kind),
            Ev::Relist { to, kind } => self.relist(to, kind),
            Ev::Wake { to } => {
                if let Some(i) = self.current(to) {
                    self.try_start(i);
                }
            }
            Ev::Arrive {
                from,
                identity,
                request,
            } => self.arrive(from, identity, request),
            Ev::Reply { to, response } => {
                if let Some(i) = self.current(to)
                    && let Some(inflight) = &self.replicas[i].inflight
                {
                    inflight.writer.deliver(response);
                    self.drive(i);
                }
            }
            Ev::LeaseTick { to } => self.lease_tick(to),
            Ev::LeaseGetArrive { from } => self.lease_get_arrive(from),
            Ev::LeaseGot { to, lease } => self.lease_got(to, lease),
            Ev::LeaseWriteArrive {
                from,
                lease,
                create,
                at_ms,
            } => self.lease_write_arrive(from, *lease, create, at_ms),
            Ev::LeaseWritten { to, at_ms, stored } => self.lease_written(to, at_ms, stored),
            Ev::LeaseDeadline { to } => self.lease_deadline(to),
            Ev::Restart { replica } => {
                if !self.replicas[replica].up {
                    self.replicas[replica].restart();
                    self.log(format!("{}: started", self.replicas[replica].identity()));
                    self.boot(replica);
                }
            }
            Ev::Heal { replica } => {
                if self.replicas[replica].partitioned {
                    self.replicas[replica].partitioned = false;
                    self.log(format!("replica {replica}: partition healed"));
                }
            }
            Ev::SyncReplicaSet { name } => {
                self.rs_sync_pending.remove(&name);
                let now = self.now();
                let kubelet = self.setup.kubelet.clone();
                let followups = self.cluster.sync_replica_set(
                    &mut self.api,
                    &name,
                    self.now_ms,
                    now,
                    &kubelet,
                    &mut self.rng,
                );
                for f in followups {
                    match f {
                        Followup::PodReady { pod, at_ms } => self.at(at_ms, Ev::PodReady { pod }),
                        Followup::SyncReplicaSet { name, at_ms } => {
                            if self.rs_sync_pending.insert(name.clone()) {
                                self.at(at_ms, Ev::SyncReplicaSet { name });
                            }
                        }
                    }
                }
            }
            Ev::PodReady { pod } => {
                let now = self.now();
                self.cluster.pod_ready(&mut self.api, &pod, now);
            }
            Ev::SyncAnalysisRun { name } => {
                let now = self.now();
                if self
                    .runs
                    .start(&self.api, &name, self.now_ms, now, &self.setup.analysis)
                {
                    self.drive_run(&name);
                }
            }
            Ev::RunArrive { name, request } => {
                let now = self.now();
                let response = serve(&mut self.api, request, now);
                if let Err(e) = &response {
                    self.log(format!("analysis: write of run {name} -> {e}"));
                }
                let latency = self.setup.faults.net_latency_ms;
                self.after(latency, Ev::RunReply { name, response });
            }
            Ev::RunReply { name, response } => {
                self.runs.deliver(&name, response);
                self.drive_run(&name);
            }
            Ev::SyncExperiment { name } => {
                let now = self.now();
                if self.experiments.start(&self.api, &name, self.now_ms, now) {
                    self.drive_experiment(&name);
                }
            }
            Ev::ExperimentArrive { name, request } => self.experiment_arrive(name, request),
            Ev::ExperimentReply { name, response } => {
                self.experiments.deliver(&name, response);
                self.drive_experiment(&name);
            }
            Ev::CollectGarbage => {
                self.gc_pending = false;
                for (kind, name) in crate::gc::collect(&mut self.api) {
                    self.log(format!("gc: delete {kind:?}/{name}"));
                }
            }
            Ev::CheckDeadlines => self.check_deadlines(),
            Ev::Script => self.fire_script(),
            Ev::Calm => {
                if self.calm {
                    return;
                }
                self.calm = true;
                self.log("calm: no more random faults".into());
                for i in 0..self.replicas.len() {
                    self.replicas[i].partitioned = false;
                    self.lease_fail_until[i] = 0;
                }
            }
            Ev::Meddle => {
                if !self.calm {
                    let mut targets: Vec<(Kind, String)> = self
                        .api
                        .list(Kind::ReplicaSet)
                        .iter()
                        .map(|v| (Kind::ReplicaSet, name_of(v).to_string()))
                        .collect();
                    targets.extend(self.api.routers());
                    if !targets.is_empty() {
                        let (kind, n) =
                            targets[self.rng.below(targets.len() as u64) as usize].clone();
                        self.meddle(kind, &n);
                    }
                    if let Some(every) = self.setup.faults.meddle_every_ms {
                        self.after(every, Ev::Meddle);
                    }
                }
            }
            Ev::RandomCrash => {
                if !self.calm {
                    let i = self.rng.below(self.replicas.len() as u64) as usize;
                    if self.replicas[i].up {
                        self.log(format!("fault: crash {}", self.replicas[i].identity()));
                        self.crash(i);
                    }
                    if let Some(every) = self.setup.faults.crash_every_ms {
                        self.after(every, Ev::RandomCrash);
                    }
                }
            }
            Ev::RandomPartition => {
                if !self.calm {
                    let i = self.rng.below(self.replicas.len() as u64) as usize;
                    let len = self.rng.range(self.setup.faults.partition_ms);
                    self.partition(i, len);
                    if let Some(every) = self.setup.faults.partition_every_ms {
                        self.after(every, Ev::RandomPartition);
                    }
                }
            }
        }
    }

    /// Someone else (kubectl, Argo CD) writes a ReplicaSet or a router object: a new
    /// resourceVersion that any controller decision based on the old one must not write over.
    /// Only an annotation changes: what the object routes or runs is the controller's.
    fn meddle(&mut self, kind: Kind, name: &str) {
        self.seq += 1;
        let patch =
            json!({"metadata": {"annotations": {"example.com/touched": self.seq.to_string()}}});
        if self.api.patch(kind, name, &patch, Endpoint::Main).is_ok() {
            let what = match kind {
                Kind::ReplicaSet => "rs".to_string(),
                other => format!("{other:?}"),
            };
            self.log(format!("meddler: annotate {what}/{name}"));
        }
    }

    fn crash(&mut self, i: usize) {
        self.stats.crashes += 1;
        self.replicas[i].crash();
        let restart = self.setup.faults.restart_after_ms;
        self.after(restart, Ev::Restart { replica: i });
    }

    fn partition(&mut self, i: usize, len: u64) {
        if !self.replicas[i].up || self.replicas[i].partitioned {
            return;
        }
        self.stats.partitions += 1;
        self.log(format!(
            "fault: partition {} for {len} ms",
            self.replicas[i].identity()
        ));
        let r = &mut self.replicas[i];
        r.partitioned = true;
        r.rollout_watch.disconnect();
        r.rs_watch.disconnect();
        r.run_watch.disconnect();
        r.exp_watch.disconnect();
        let to = r.addr();
        for kind in [Kind::Rollout, Kind::ReplicaSet] {
            let backoff = self.setup.faults.relist_backoff_ms;
            self.after(backoff, Ev::Relist { to, kind });
        }
        self.at(self.now_ms + len, Ev::Heal { replica: i });
    }

    fn target(&self, t: &Target) -> usize {
        match t {
            Target::Leader => self
                .replicas
                .iter()
                .position(|r| r.up && self.last_holder.as_deref() == Some(r.identity().as_str()))
                .unwrap_or(0),
        }
    }

    /// Starts reconciles while the replica is free, synced, leading and has work due.
    fn try_start(&mut self, i: usize) {
        let r = &self.replicas[i];
        if !r.up || !r.synced() || r.inflight.is_some() || !self.may_act(i) {
            return;
        }
        let now = self.now();
        let apply = self.apply;
        if let Some(seen) = self.replicas[i].start(self.now_ms, now, apply) {
            self.stats.reconciles += 1;
            let who = self.replicas[i].identity();
            self.log(format!("{who}: {seen}"));
            self.drive(i);
        } else if let Some(due) = self.replicas[i].next_due()
            && due > self.now_ms
        {
            let to = self.replicas[i].addr();
            self.at(due, Ev::Wake { to });
        }
    }

    /// Polls the reconcile in flight; sends its next request or books its requeue.
    fn drive(&mut self, i: usize) {
        let now_ms = self.now_ms;
        match self.replicas[i].poll(now_ms) {
            None => {
                let Some(request) = self.replicas[i]
                    .inflight
                    .as_ref()
                    .and_then(|f| f.writer.take_request())
                else {
                    return;
                };
                self.send(i, request);
            }
            Some(done) => {
                let who = self.replicas[i].identity();
                match &done.result {
                    Ok(plan) if !plan.actions.is_empty() || !plan.events.is_empty() => {
                        let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason).collect();
                        self.log(format!("{who}: reconciled {} {reasons:?}", done.rollout));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        if matches!(e, WriteError::Conflict) {
                            self.stats.conflicts += 1;
                        }
                        self.log(format!("{who}: reconcile {} failed: {e}", done.rollout));
                    }
                }
                let to = self.replicas[i].addr();
                if let Some(due) = self.replicas[i].next_due() {
                    self.at(due, Ev::Wake { to });
                }
            }
        }
    }

    /// Polls the AnalysisRun controller's reconcile of `name`; sends its next request (with the
    /// network's latency) or books its requeue.
    fn drive_run(&mut self, name: &str) {
        match self.runs.poll(name, self.now_ms) {
            Polled::Waiting => {}
            Polled::Send(request) => {
                let latency = self.setup.faults.net_latency_ms;
                let name = name.to_string();
                self.after(latency, Ev::RunArrive { name, request });
            }
            Polled::Done {
                phase_change,
                error,
                next_ms,
            } => {
                if let Some((phase, message)) = phase_change {
                    self.log(format!("analysis: run {name} is {phase} {message}"));
                }
                if let Some(e) = error {
                    self.log(format!("analysis: reconcile of run {name} failed: {e}"));
                }
                if let Some(at) = next_ms {
                    let name = name.to_string();
                    self.at(at, Ev::SyncAnalysisRun { name });
                }
            }
        }
    }

    /// Polls the Experiment controller's reconcile of `name`; sends its next request (with the
    /// network's latency) or books its requeue.
    fn drive_experiment(&mut self, name: &str) {
        match self.experiments.poll(name, self.now_ms) {
            experiments::Polled::Waiting => {}
            experiments::Polled::Send(request) => {
                let latency = self.setup.faults.net_latency_ms;
                let name = name.to_string();
                self.after(latency, Ev::ExperimentArrive { name, request });
            }
            experiments::Polled::Done {
                phase_change,
                failed_writes,
                error,
                next_ms,
            } => {
                if let Some(phase) = phase_change {
                    self.log(format!("experiments: experiment/{name} is {phase}"));
                }
                for w in failed_writes {
                    self.log(format!("experiments: experiment/{name}: write failed: {w}"));
                }
                if let Some(e) = error {
                    self.log(format!(
                        "experiments: reconcile of experiment/{name} failed: {e}"
                    ));
                }
                if let Some(at) = next_ms {
                    let name = name.to_string();
                    self.at(at, Ev::SyncExperiment { name });
                }
            }
        }
    }

    /// A request of the Experiment controller reaches the API server. A ReplicaSet it patches
    /// may have been written by someone else just before, as the Rollout controller's may.
    fn experiment_arrive(&mut self, name: String, request: Request) {
        if let Request::PatchReplicaSet { name: rs, .. } = &request
            && self.rng.chance(self.setup.faults.conflict_before_patch)
            && !self.calm
        {
            let rs = rs.clone();
            self.meddle(Kind::ReplicaSet, &rs);
        }
        let what = request.describe();
        let is_write = request.is_write();
        let rv_before = self.api.resource_version();
        let now = self.now();
        let response = serve(&mut self.api, request, now);
        if is_write && self.api.resource_version() != rv_before {
            self.last_write = Some((self.now_ms, format!("experiment controller: {what}")));
            self.log(format!("experiments: {what}"));
        } else if let Err(e) = &response {
            self.log(format!("experiments: {what} -> {e}"));
        }
        let latency = self.setup.faults.net_latency_ms;
        self.after(latency, Ev::ExperimentReply { name, response });
    }

    fn send(&mut self, i: usize, request: Request) {
        let from = self.replicas[i].addr();
        let latency = self.setup.faults.net_latency_ms;
        // A partitioned replica's request never arrives.
        if self.replicas[i].partitioned {
            let response = Err(WriteError::Api("request timed out".into()));
            self.after(latency, Ev::Reply { to: from, response });
            return;
        }
        // The controller's HTTP fence: no mutating request leaves a replica that does not lead.
        if request.is_write() && !self.may_act(i) {
            self.after(
                latency,
                Ev::Reply {
                    to: from,
                    response: Err(WriteError::NotLeader),
                },
            );
            return;
        }
        let identity = self.replicas[i].identity();
        self.after(
            latency,
            Ev::Arrive {
                from,
                identity,
                request,
            },
        );
    }

    fn arrive(&mut self, from: Addr, identity: String, request: Request) {
        let contested = match &request {
            Request::PatchReplicaSet { .. } | Request::ReplaceRouterObject { .. } => {
                request.target()
            }
            _ => None,
        };
        if let Some((kind, name)) = contested
            && self.rng.chance(self.setup.faults.conflict_before_patch)
            && !self.calm
        {
            self.meddle(kind, &name);
        }
        let what = request.describe();
        let is_write = request.is_write();
        let lists_runs = matches!(request, Request::ListAnalysisRuns);
        let status_of = match &request {
            Request::PatchRolloutStatus { name, .. } => self
                .api
                .get(Kind::Rollout, name)
                .cloned()
                .map(|before| (name.clone(), before)),
            _ => None,
        };
        let rv_before = self.api.resource_version();
        let now = self.now();
        let mut response = serve(&mut self.api, request, now);
        let committed = self.api.resource_version() != rv_before;
        if lists_runs && response.is_ok() {
            let runs = self.api.list(Kind::AnalysisRun);
            self.checker.on_run_list(&identity, runs);
        }
        if committed
            && let Some((name, before)) = status_of
            && let Some(after) = self.api.get(Kind::Rollout, &name)
        {
            self.checker
                .on_status_write(&self.api, self.now_ms, &identity, &before, after);
        }
        if is_write && committed {
            self.stats.controller_writes += 1;
            self.last_write = Some((self.now_ms, format!("{identity}: {what}")));
            self.log(format!("{identity}: {what}"));
            if self.setup.leases {
                let lease = crate::lease::view(&self.api);
                self.checker.on_controller_write(
                    self.now_ms,
                    now,
                    &identity,
                    &what,
                    lease.as_ref(),
                );
            }
        } else if let Err(e) = &response {
            self.log(format!("{identity}: {what} -> {e}"));
        }
        if !self.calm && self.rng.chance(self.setup.faults.lost_reply) {
            response = Err(WriteError::Api("reply lost: timeout".into()));
        }
        let latency = self.setup.faults.net_latency_ms;
        self.after(latency, Ev::Reply { to: from, response });
    }
}
