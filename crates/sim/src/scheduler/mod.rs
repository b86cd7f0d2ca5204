//! The discrete-event scheduler: one queue of timed events, one clock, one seeded random
//! stream. Everything that happens — a watch event reaching a cache, a request reaching the
//! API server, a pod becoming ready, a crash — is an event, so the seed alone fixes the order.
//!
//! This module holds the world's state and the clock; each kind of event is handled in the
//! module for its part of the world, and [`dispatch`] says which.

mod deadlines;
mod dispatch;
mod election;
mod event;
mod faults;
mod main_loop;
mod notify;
mod outcome;
mod requests;
mod script;
mod side_controllers;
mod watches;
mod workloads;

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

use crate::analysis_runs::RunController;
use crate::api_model::ApiServer;
use crate::controller::{Addr, ApplyFn, Replica};
use crate::daemon_sets::DaemonSetController;
use crate::experiments::ExperimentController;
use crate::invariants::Checker;
use crate::kubelet::Cluster;
use crate::lease::MonoClock;
use crate::rng::Rng;
use crate::scenarios::{Scenario, Setup};
use crate::stateful_sets::StatefulSetController;
use event::Ev;

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

/// The world of one run: the API server, the controller replicas and Kubernetes' own
/// controllers, the event queue, the script's progress and what the checks have seen.
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
    stateful_sets: StatefulSetController,
    sts_sync_pending: BTreeSet<String>,
    daemon_sets: DaemonSetController,
    ds_sync_pending: BTreeSet<String>,
    runs: RunController,
    experiments: ExperimentController,
    /// The replicas' notifications loops, in scenarios with notifications.
    notify: Option<notify::NotifyWorld>,
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
        let notify = setup
            .notifications
            .as_ref()
            .map(|n| notify::NotifyWorld::new(n, setup.controllers));
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
            stateful_sets: StatefulSetController::default(),
            sts_sync_pending: BTreeSet::new(),
            daemon_sets: DaemonSetController::default(),
            ds_sync_pending: BTreeSet::new(),
            runs: RunController::new(),
            experiments: ExperimentController::new(),
            notify,
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

    /// Whether replica `i` may act as the controller now (its write gate is open).
    fn may_act(&self, i: usize) -> bool {
        self.replicas[i].gate.term().is_some()
    }
}
