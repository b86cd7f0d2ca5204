//! AnalysisRuns, as pure functions: building a run for a Rollout from its templates, and the
//! run's state machine (which measurements are due, and what the results mean for the metrics
//! and the run). Measuring is someone else's job: providers hand back measurements whose
//! phase is already decided, and time is always passed in.
//!
//! One reconcile of a run is `next_tasks` → run the tasks with the providers → `assess`.

mod build;
mod field_ref;
mod phase;
mod record;
mod retention;
mod rules;
mod run;
mod settings;
pub use settings::validate_metrics;
mod task;

use std::time::Duration;

pub use build::{
    ResolvedTemplate, RunKind, RunRequest, build_analysis_run, collision_name, is_named_after,
    merge_args, merge_templates, not_found, resolve_nested, run_name,
};
pub(crate) use build::{resolve_rollout_args, unique_rules};
pub use retention::{Disposal, in_flight_measurement, measurements_kept};
pub use run::{RunAssessment, assess, is_terminating, next_tasks};
pub use task::{MetricTask, TaskKind};

/// The phase of each metric of `run` (in spec order) as its recorded status stands, judged as
/// [`assess`] judges it: the verdict of a metric's counters, limits and last measurement. The
/// conformance tests compare it with Argo's. `Err` is the message a run with this spec ends in.
pub fn metric_phases(
    run: &sluice_api::AnalysisRun,
    terminating: bool,
) -> Result<Vec<sluice_api::common::AnalysisPhase>, String> {
    let settings = settings::metric_settings(run)?;
    let results = run
        .status
        .as_ref()
        .and_then(|s| s.metric_results.as_deref())
        .unwrap_or_default();
    Ok(settings
        .iter()
        .map(|m| {
            match results
                .iter()
                .find(|r| r.name.as_deref() == Some(m.name.as_str()))
            {
                Some(result) => phase::metric_phase(m, result, terminating),
                None => phase::metric_phase(m, &Default::default(), terminating),
            }
        })
        .collect())
}

/// AnalysisRun label naming the role a run plays for its Rollout (`Step`, `Background`,
/// `PrePromotion`, `PostPromotion`).
pub const ROLLOUT_TYPE: &str = "rollout-type";
/// AnalysisRun label with the canary step index of a step run.
pub const STEP_INDEX: &str = "step-index";

/// `rollout-type` values.
pub const TYPE_STEP: &str = "Step";
pub const TYPE_BACKGROUND: &str = "Background";
pub const TYPE_PRE_PROMOTION: &str = "PrePromotion";
pub const TYPE_POST_PROMOTION: &str = "PostPromotion";

/// How long after an Error measurement the metric is measured again, whatever its interval.
pub const ERROR_RETRY_INTERVAL: Duration = Duration::from_secs(10);
/// How often an in-flight measurement that named no `resumeAt` is polled.
pub const IN_FLIGHT_POLL_INTERVAL: Duration = Duration::from_secs(10);
/// Message of a measurement stopped by termination that its provider reported Successful.
pub const METRIC_TERMINATED: &str = "Metric Terminated";
/// Run message when `spec.terminate` ended the run.
pub const RUN_TERMINATED: &str = "Run Terminated";
