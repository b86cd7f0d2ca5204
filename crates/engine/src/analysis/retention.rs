//! What a run keeps and what goes, decided here so that the AnalysisRun loop only carries it
//! out: the measurement a Resume or Terminate task continues, how many measurements of a
//! metric (and so measurement Jobs) are kept, and when a finished run is deleted.

use std::time::Duration;

use jiff::Timestamp;
use sluice_api::AnalysisRun;
use sluice_api::analysis::{AnalysisRunStatus, Measurement};

use super::RunAssessment;

/// The measurement a Resume or Terminate task for `metric` continues: the metric's last one.
pub fn in_flight_measurement(run: &AnalysisRun, metric: &str) -> Option<Measurement> {
    run.status
        .as_ref()?
        .metric_results
        .as_ref()?
        .iter()
        .find(|r| r.name.as_deref() == Some(metric))?
        .measurements
        .as_ref()?
        .last()
        .cloned()
}

/// How many measurements of `metric` the status keeps; what a provider made for older ones
/// (a measurement Job) can go.
pub fn measurements_kept(status: &AnalysisRunStatus, metric: &str) -> usize {
    status
        .metric_results
        .iter()
        .flatten()
        .find(|r| r.name.as_deref() == Some(metric))
        .and_then(|r| r.measurements.as_ref())
        .map_or(0, Vec::len)
}

/// What becomes of the run itself after an assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposal {
    /// Kept: no `ttlStrategy` applies (yet).
    Keep,
    /// Its `ttlStrategy` time has come: delete it now.
    DeleteNow,
    /// Delete it after this long.
    DeleteAfter(Duration),
}

impl RunAssessment {
    /// Whether and when the run is deleted, seen at `now`.
    pub fn disposal(&self, now: Timestamp) -> Disposal {
        match self.delete_at {
            None => Disposal::Keep,
            Some(at) if at <= now => Disposal::DeleteNow,
            Some(at) => Disposal::DeleteAfter(
                Duration::try_from(at.duration_since(now)).unwrap_or_default(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run() -> AnalysisRun {
        serde_json::from_value(json!({
            "metadata": {"name": "r"},
            "spec": {"metrics": [{"name": "m"}]},
            "status": {"phase": "Running", "metricResults": [{"name": "m", "measurements": [
                {"phase": "Successful", "value": "1"},
                {"phase": "Running"}
            ]}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_last_measurement_is_continued_and_all_kept_are_counted() {
        let run = run();
        let last = in_flight_measurement(&run, "m").unwrap();
        assert_eq!(last.phase.as_ref().map(|p| p.as_str()), Some("Running"));
        assert!(in_flight_measurement(&run, "other").is_none());
        let status = run.status.clone().unwrap();
        assert_eq!(measurements_kept(&status, "m"), 2);
        assert_eq!(measurements_kept(&status, "other"), 0);
    }

    #[test]
    fn a_run_is_deleted_once_its_time_has_come() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let assessment = |delete_at: Option<&str>| RunAssessment {
            status: AnalysisRunStatus::default(),
            requeue_after: None,
            completed: true,
            delete_at: delete_at.map(|t| t.parse().unwrap()),
        };
        assert_eq!(assessment(None).disposal(now), Disposal::Keep);
        assert_eq!(
            assessment(Some("2026-01-01T00:00:00Z")).disposal(now),
            Disposal::DeleteNow
        );
        assert_eq!(
            assessment(Some("2026-01-01T00:00:30Z")).disposal(now),
            Disposal::DeleteAfter(Duration::from_secs(30))
        );
    }
}
