//! Why an update does not move on: what one reconcile found it waiting for, as data. The
//! decision code records a [`Wait`] where it decides not to go further, so that a user-facing
//! explanation (`kubectl sluice explain`) comes from the same decision the controller makes,
//! not from a second reading of the status.

use jiff::Timestamp;

/// One thing an update waits for. A reconcile may record several (a pause step and the
/// progress deadline that runs meanwhile); they come in the order they were decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// The spec (or an object it names) is invalid; `message` is the InvalidSpec condition's,
    /// with the field.
    InvalidSpec { message: String },
    /// `spec.paused` is set (a user's `pause`).
    PausedByUser,
    /// The update was aborted (an analysis failed, a user aborted, the progress deadline
    /// with `progressDeadlineAbort`); `message` is the Rollout's.
    Aborted { message: String },
    /// A canary pause step: until `until`, or until promoted when `None`.
    PauseStep { step: i32, until: Option<Timestamp> },
    /// The pods of a ReplicaSet are not yet all available.
    PodsNotAvailable {
        replica_set: String,
        wanted: i32,
        available: i32,
    },
    /// An AnalysisRun is still measuring.
    AnalysisRunning { run: String },
    /// An AnalysisRun ended Inconclusive: the update is paused until promoted or aborted.
    AnalysisInconclusive { run: String },
    /// An AnalysisRun failed and the Rollout asked to pause rather than abort
    /// (`rollouts.sluice.dev/on-analysis-failure: pause`): paused until promoted or aborted.
    AnalysisFailedPaused { run: String },
    /// The Experiment of an experiment step is running.
    ExperimentRunning { name: String },
    /// A blue-green preview waits for its promotion: by a user when `until` is `None`, else
    /// automatically at `until` (`autoPromotionSeconds`).
    AwaitingPromotion { until: Option<Timestamp> },
    /// A `plugin` step: its plugin is running (or failed to answer and is called again) since
    /// `since`, and is asked again at `next`.
    StepPlugin {
        step: i32,
        name: String,
        phase: Option<String>,
        message: Option<String>,
        next: Option<Timestamp>,
    },
    /// The traffic router has not yet confirmed the canary weight it was given.
    WeightNotVerified { weight: i32 },
    /// The AWS target groups bound to `service` do not have all its pods registered yet
    /// (`--aws-verify-target-group`): the old pods stay.
    TargetsNotRegistered { service: String },
    /// No progress since `since`: the progress deadline fires at `at`.
    ProgressDeadline { since: Timestamp, at: Timestamp },
    /// The progress deadline passed; `message` is the Progressing condition's.
    ProgressDeadlineExceeded { message: String },
}
