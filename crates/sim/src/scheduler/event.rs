//! The scheduler's events: everything that can happen at an instant of simulated time.

use k8s_openapi::api::coordination::v1::Lease;

use crate::api_model::Kind;
use crate::controller::Addr;
use crate::net::{Request, Response};
use crate::notifications::Life;

/// One thing that happens at an instant: the queue orders events by time, then by when they
/// were booked, so the seed alone fixes what runs first.
#[derive(Debug)]
pub(super) enum Ev {
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
    /// The StatefulSet controller's sync of a StatefulSet.
    SyncStatefulSet {
        name: String,
    },
    /// A StatefulSet's pod at `ordinal`, started on `revision`, is ready.
    OrdinalReady {
        stateful_set: String,
        ordinal: usize,
        revision: String,
    },
    /// The DaemonSet controller's sync of a DaemonSet.
    SyncDaemonSet {
        name: String,
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
    /// A replica's notifier looks for pending notifications nobody queued.
    NotifyRecover {
        replica: usize,
    },
    /// A replica's notifier has a job due.
    NotifyWake {
        replica: usize,
    },
    /// A request of a notifier (of one term of one process) reaches the API server.
    NotifyArrive {
        from: Life,
        request: Request,
    },
    NotifyReply {
        to: Life,
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
