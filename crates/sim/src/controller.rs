//! One replica of the Rollout controller as the simulation runs it: the real reconciler's
//! driver (`sluice_controller::loops::driver`: the ownership filter, cache →
//! `sluice_engine::reconcile` → `apply_plan` through a `ClusterAccess`, the requeue policy),
//! and the work-queue rules of kube's controller runtime (a trigger during a reconcile re-runs
//! it afterwards, one reconcile per object at a time). What differs is only the plumbing:
//! caches fed by simulated watches, a writer whose calls the scheduler carries, and a clock
//! the scheduler owns.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;
use sluice_api::Rollout;
use sluice_controller::cluster::WriteError;
use sluice_controller::loops::apply::{Applied, apply_plan};
use sluice_controller::loops::driver::{self, HeldProgress, Requeue, StaleViews};
use sluice_engine::Plan;
use sluice_engine::config_rollout::{self, ConfigKind, ConfigRef};

use sluice_controller::leader::lease::LeaderElector;

use crate::api_model::Kind;
use crate::lease::election_config;
use crate::net::{Gate, SimWriter};
use crate::watch::{Cache, WatchStream};

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How a plan is applied: the real apply layer, or a deliberately broken one in tests.
pub type ApplyFn = fn(SimWriter, Rollout, Plan) -> BoxFuture<Result<Applied, WriteError>>;

/// The real apply layer.
pub fn real_apply(
    writer: SimWriter,
    rollout: Rollout,
    plan: Plan,
) -> BoxFuture<Result<Applied, WriteError>> {
    Box::pin(async move { apply_plan(&writer, &rollout, &plan).await })
}

/// `--rollout-resync` default.
const RESYNC: Duration = Duration::from_secs(900);

/// Which replica and which life of it: a restarted process is a new incarnation, and
/// anything addressed to an old one is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addr {
    pub replica: usize,
    pub incarnation: u32,
}

pub struct InFlight {
    pub rollout: String,
    /// The Rollout the reconcile started from (its events are about it).
    pub seen: Rollout,
    pub writer: SimWriter,
    /// The status the reconcile decided on, once it has (before anything of it is written).
    decided: Decided,
    future: BoxFuture<Result<Plan, WriteError>>,
}

/// Where a reconcile leaves the status it decided on, for the checks to read before its
/// writes reach the API server (a DaemonSet's evictions are judged against the step the
/// controller has decided it is at, which its status write reports only after them).
type Decided = Arc<std::sync::Mutex<Option<sluice_api::rollout::RolloutStatus>>>;

impl InFlight {
    /// The status this reconcile decided on, if it has decided and it was not taken yet.
    pub fn take_decision(&self) -> Option<sluice_api::rollout::RolloutStatus> {
        self.decided
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// A reconcile that finished.
pub struct Finished {
    pub rollout: String,
    pub seen: Rollout,
    pub result: Result<Plan, WriteError>,
    pub requeue_after: Option<Duration>,
    /// The status it decided on, if the checks have not been told yet.
    pub decided: Option<sluice_api::rollout::RolloutStatus>,
}

pub struct Replica {
    pub index: usize,
    pub incarnation: u32,
    pub up: bool,
    pub partitioned: bool,
    pub rollouts: Cache<Rollout>,
    pub replica_sets: Cache<ReplicaSet>,
    pub rollout_watch: WatchStream,
    pub rs_watch: WatchStream,
    /// AnalysisRuns made by Rollouts: a verdict moves the owning Rollout on. Nothing is cached
    /// from it; a reconcile lists runs afresh.
    pub run_watch: WatchStream,
    /// Experiments made by Rollouts: a phase change moves the owning Rollout's experiment step
    /// on. Nothing is cached from it; a reconcile lists Experiments afresh.
    pub exp_watch: WatchStream,
    /// StatefulSets (their metadata, in the real controller): a change wakes the Rollouts that
    /// drive the StatefulSet. Nothing is cached; a reconcile reads it afresh.
    pub sts_watch: WatchStream,
    /// DaemonSets, the same way.
    pub ds_watch: WatchStream,
    /// ConfigMaps and Secrets (their metadata): a change wakes the Rollouts with config
    /// rollouts on whose template references the object.
    pub cm_watch: WatchStream,
    pub secret_watch: WatchStream,
    /// Rollouts waiting to be reconciled, with the time they are due.
    queue: BTreeMap<String, u64>,
    /// Triggered while being reconciled: run again when done.
    dirty: BTreeSet<String>,
    pub inflight: Option<InFlight>,
    /// The controller's leader elector, when leases are on.
    pub elector: Option<LeaderElector>,
    /// The write fence: the term this replica may write in.
    pub gate: Gate,
    /// What the process remembers of progress held back (lost with it in a crash).
    held: Arc<HeldProgress>,
    /// The Rollouts whose next reconcile reads afresh (lost with it too).
    stale: StaleViews,
}

impl Replica {
    pub fn new(index: usize, leases: bool) -> Self {
        let mut r = Self {
            index,
            incarnation: 0,
            up: true,
            partitioned: false,
            rollouts: Cache::default(),
            replica_sets: Cache::default(),
            rollout_watch: WatchStream::default(),
            rs_watch: WatchStream::default(),
            run_watch: WatchStream::default(),
            exp_watch: WatchStream::default(),
            sts_watch: WatchStream::default(),
            ds_watch: WatchStream::default(),
            cm_watch: WatchStream::default(),
            secret_watch: WatchStream::default(),
            queue: BTreeMap::new(),
            dirty: BTreeSet::new(),
            inflight: None,
            elector: None,
            gate: Gate::default(),
            held: Arc::default(),
            stale: StaleViews::default(),
        };
        r.reset_election(leases);
        r
    }

    /// Without leases the gate is open for good (term 0), as the controller runs standalone.
    fn reset_election(&mut self, leases: bool) {
        self.elector = leases.then(|| LeaderElector::new(election_config(self.identity())));
        self.gate = Gate::default();
        self.gate.set((!leases).then_some(0));
    }

    pub fn addr(&self) -> Addr {
        Addr {
            replica: self.index,
            incarnation: self.incarnation,
        }
    }

    /// A unique identity per process, as client-go candidates use (hostname plus a uuid): a
    /// restarted replica waits for its old lease to expire like anyone else.
    pub fn identity(&self) -> String {
        format!("sluice-{}-{}", self.index, self.incarnation)
    }

    /// The process died: everything in memory is gone.
    pub fn crash(&mut self) {
        self.up = false;
        self.inflight = None;
        self.queue.clear();
        self.dirty.clear();
        self.rollouts = Cache::default();
        self.replica_sets = Cache::default();
        self.rollout_watch.disconnect();
        self.rs_watch.disconnect();
        self.run_watch.disconnect();
        self.exp_watch.disconnect();
        self.sts_watch.disconnect();
        self.ds_watch.disconnect();
        self.cm_watch.disconnect();
        self.secret_watch.disconnect();
        self.held = Arc::default();
        self.stale = StaleViews::default();
    }

    /// The watch stream of a kind the controller watches.
    pub fn watch_mut(&mut self, kind: Kind) -> Option<&mut WatchStream> {
        match kind {
            Kind::Rollout => Some(&mut self.rollout_watch),
            Kind::ReplicaSet => Some(&mut self.rs_watch),
            Kind::AnalysisRun => Some(&mut self.run_watch),
            Kind::Experiment => Some(&mut self.exp_watch),
            Kind::StatefulSet => Some(&mut self.sts_watch),
            Kind::DaemonSet => Some(&mut self.ds_watch),
            Kind::ConfigMap => Some(&mut self.cm_watch),
            Kind::Secret => Some(&mut self.secret_watch),
            _ => None,
        }
    }

    /// A fresh process.
    pub fn restart(&mut self) {
        self.crash();
        self.incarnation += 1;
        self.up = true;
        let leases = self.elector.is_some();
        self.reset_election(leases);
    }

    pub fn synced(&self) -> bool {
        self.rollouts.synced && self.replica_sets.synced
    }

    pub fn trigger(&mut self, rollout: &str, at: u64) {
        if self.inflight.as_ref().is_some_and(|f| f.rollout == rollout) {
            self.dirty.insert(rollout.to_string());
            return;
        }
        let due = self.queue.entry(rollout.to_string()).or_insert(at);
        *due = (*due).min(at);
    }

    /// Wakes the cached Rollouts that drive StatefulSet `name`.
    pub fn trigger_stateful_set(&mut self, name: &str, at: u64) {
        let driving: Vec<String> = self
            .rollouts
            .objects
            .iter()
            .filter(|(_, ro)| sluice_engine::statefulset::stateful_set_name(ro) == Some(name))
            .map(|(n, _)| n.clone())
            .collect();
        for n in driving {
            self.trigger(&n, at);
        }
    }

    /// Wakes the cached Rollouts that drive DaemonSet `name`.
    pub fn trigger_daemon_set(&mut self, name: &str, at: u64) {
        let driving: Vec<String> = self
            .rollouts
            .objects
            .iter()
            .filter(|(_, ro)| sluice_engine::daemonset::daemon_set_name(ro) == Some(name))
            .map(|(n, _)| n.clone())
            .collect();
        for n in driving {
            self.trigger(&n, at);
        }
    }

    /// Wakes the cached Rollouts with config rollouts on whose own template references the
    /// ConfigMap or Secret (`kind`) `name`, as the real controller's index does.
    pub fn trigger_config(&mut self, kind: Kind, name: &str, at: u64) {
        let kind = match kind {
            Kind::ConfigMap => ConfigKind::ConfigMap,
            Kind::Secret => ConfigKind::Secret,
            _ => return,
        };
        let wanted = ConfigRef {
            kind,
            name: name.to_string(),
        };
        let reading: Vec<String> = self
            .rollouts
            .objects
            .iter()
            .filter(|(_, ro)| config_rollout::enabled(ro))
            .filter(|(_, ro)| {
                ro.spec
                    .template
                    .as_ref()
                    .and_then(|t| serde_json::to_value(t).ok())
                    .is_some_and(|t| config_rollout::references(&t).contains(&wanted))
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in reading {
            self.trigger(&n, at);
        }
    }

    pub fn trigger_all(&mut self, at: u64) {
        let names: Vec<String> = self.rollouts.objects.keys().cloned().collect();
        for n in names {
            self.trigger(&n, at);
        }
    }

    /// The Rollout a ReplicaSet event concerns: its controller owner.
    pub fn owner_of(rs: &ReplicaSet) -> Option<String> {
        rs.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "Rollout")
            .map(|o| o.name.clone())
    }

    /// The Rollout an AnalysisRun or Experiment event concerns: its controller owner.
    pub fn run_owner(run: &Value) -> Option<String> {
        run.pointer("/metadata/ownerReferences")?
            .as_array()?
            .iter()
            .find(|o| o["controller"] == Value::Bool(true) && o["kind"] == "Rollout")?
            .get("name")?
            .as_str()
            .map(str::to_string)
    }

    pub fn next_due(&self) -> Option<u64> {
        self.queue.values().min().copied()
    }

    /// Starts the reconcile of the most overdue Rollout, if one is due at `now_ms`. A follower
    /// decides nothing; the plan is pinned to the current term.
    pub fn start(&mut self, now_ms: u64, now: Timestamp, apply: ApplyFn) -> Option<String> {
        let term = self.gate.term()?;
        if self.inflight.is_some() {
            return None;
        }
        let name = self
            .queue
            .iter()
            .filter(|(_, due)| **due <= now_ms)
            .min_by_key(|(n, due)| (**due, (*n).clone()))
            .map(|(n, _)| n.clone())?;
        self.queue.remove(&name);
        let ro = self.rollouts.objects.get(&name).cloned()?;
        if ro.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let owned = owned_replica_sets(&self.replica_sets, &ro);
        let afresh = ro
            .metadata
            .uid
            .as_deref()
            .is_some_and(|uid| self.stale.take(uid));
        let seen = format!(
            "reconcile {name} {}at rollout rv {} with {}",
            if afresh {
                "with ReplicaSets afresh, cached "
            } else {
                ""
            },
            ro.metadata.resource_version.as_deref().unwrap_or("-"),
            owned
                .iter()
                .map(|rs| format!(
                    "{}@{}",
                    rs.metadata.name.as_deref().unwrap_or_default(),
                    rs.metadata.resource_version.as_deref().unwrap_or("-")
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
        let writer = SimWriter::new(self.gate.clone(), Some(term));
        let held = self.held.clone();
        let decided = Decided::default();
        let future = Box::pin(reconcile_once(
            writer.clone(),
            ro.clone(),
            (owned, afresh),
            now,
            held,
            (apply, decided.clone()),
        ));
        self.inflight = Some(InFlight {
            rollout: name,
            seen: ro,
            writer,
            decided,
            future,
        });
        Some(seen)
    }

    /// Runs the reconcile in flight until it waits on the network or finishes.
    pub fn poll(&mut self, now_ms: u64) -> Option<Finished> {
        let inflight = self.inflight.as_mut()?;
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(result) = inflight.future.as_mut().poll(&mut cx) else {
            return None;
        };
        let inflight = self.inflight.take()?;
        let decided = inflight.take_decision();
        if let Some(uid) = inflight.seen.metadata.uid.as_deref() {
            self.stale.note(uid, &result);
        }
        // The real reconciler's requeue policy.
        let requeue_after = match driver::requeue(&result, RESYNC) {
            Requeue::After(after) => Some(after),
            Requeue::AwaitChange => None,
        };
        if self.dirty.remove(&inflight.rollout) {
            self.trigger(&inflight.rollout, now_ms);
        } else if let Some(after) = requeue_after {
            self.trigger(&inflight.rollout, now_ms + after.as_millis() as u64);
        }
        Some(Finished {
            rollout: inflight.rollout,
            seen: inflight.seen,
            result,
            requeue_after,
            decided,
        })
    }
}

fn owned_replica_sets(cache: &Cache<ReplicaSet>, ro: &Rollout) -> Vec<ReplicaSet> {
    cache
        .objects
        .values()
        .filter(|rs| driver::owns(ro, rs))
        .cloned()
        .collect()
}

/// The controller's default settings: what production runs is what the simulation checks.
static SETTINGS: std::sync::LazyLock<sluice_engine::Settings> = std::sync::LazyLock::new(|| {
    <sluice_controller::Args as clap::Parser>::parse_from(["sluice-controller"]).engine_settings()
});

/// The real reconciler's observe, decide and apply ([`driver::reconcile`]), applied by
/// `apply`; the status decided on is left in `decided` before the plan is applied.
async fn reconcile_once(
    writer: SimWriter,
    ro: Rollout,
    (replica_sets, afresh): (Vec<ReplicaSet>, bool),
    now: Timestamp,
    held: Arc<HeldProgress>,
    (apply, decided): (ApplyFn, Decided),
) -> Result<Plan, WriteError> {
    let replica_sets = driver::replica_sets_to_decide_on(&writer, &ro, replica_sets, afresh).await;
    let apply_with = |plan: Plan| {
        *decided
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(plan.status.clone());
        apply(writer.clone(), ro.clone(), plan)
    };
    let (plan, _) = driver::reconcile(
        &writer,
        &crate::step_plugins::SimStepPlugin,
        &ro,
        replica_sets,
        now,
        &SETTINGS,
        &held,
        apply_with,
    )
    .await?;
    Ok(plan)
}
